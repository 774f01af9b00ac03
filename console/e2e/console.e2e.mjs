// End-to-end test of the web console in a real headless Chromium (Debian's chromium, driven by
// puppeteer-core), against a real `arbiter server` with its built-in node (4 fake GPUs) on a
// kernel-chosen port, in a temporary folder. Registered in CTest (ConsoleE2E).
//
// Usage: node console.e2e.mjs ARBITER_BINARY OUT_DIR
// Screenshots go to OUT_DIR. Every wait is bounded; the server, its tasks and the browser are
// gone when it exits, pass or fail.
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { check, chromiumPath, Harness } from "./harness.mjs";

const require = createRequire(import.meta.url);
const [binary, outDir] = process.argv.slice(2);
if (!binary || !outDir) {
  console.error("usage: node console.e2e.mjs ARBITER_BINARY OUT_DIR");
  process.exit(2);
}
mkdirSync(outDir, { recursive: true });

const kConfig = `
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
priority_classes:
  - {name: normal, value: 100, preemptible: true}
tenants:
  - name: vision
    queues:
      - {name: vision-train, guaranteed: {gpu: 2}}
  - name: speech
    budget: {gpu_hours: 1000, period: month}
    queues:
      - {name: speech-train, guaranteed: {gpu: 2}}
users:
  - {name: alice, tenant: vision, role: member}
  - {name: sam, tenant: speech, role: member}
approvals:
  - name: speech-big
    when: {queue: speech, gpus_at_least: 2}
    approvers: {role: tenant-admin}
`;

const h = new Harness("console-e2e", 300_000);
const step = (name, fn) => h.step(name, fn);

async function main() {
  const chromium = chromiumPath();
  if (!chromium) {
    console.log("SKIPPED: chromium is not installed (Debian: apt-get install chromium, or set ARBITER_CHROMIUM)");
    return;
  }
  const base = await h.startServer(binary, ["--fake-gpus", "4", "--cycle-interval-ms", "50", "--sample-interval-ms", "1000"]);
  const admin = h.admin;
  const call = (...args) => h.call(...args);
  await call(admin, "PUT", "/api/v1/config", kConfig, "application/yaml");
  const alice = (await call(admin, "POST", "/api/v1/tokens", JSON.stringify({ user: "alice" }))).token;
  const sam = (await call(admin, "POST", "/api/v1/tokens", JSON.stringify({ user: "sam" }))).token;
  // A speech job that vision's members must never see.
  const speechJob = (
    await call(sam, "POST", "/api/v1/jobs", JSON.stringify({ queue: "speech-train", command: ["true"], resources: { gpus: 1 } }))
  ).id;

  const browser = await h.launch(chromium);
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  await page.setBypassCSP(true); // for axe-core's script only; the console runs under its CSP in the other checks
  page.setDefaultTimeout(20_000);
  const consoleErrors = [];
  page.on("console", (m) => {
    // A refused API call (403/404 on purpose) is logged by the browser as a failed resource.
    if (m.type() === "error" && !/Failed to load resource/.test(m.text())) consoleErrors.push(`${page.url()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => consoleErrors.push(`${page.url()}: ${e.message}`));
  const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

  const shot = (name) => page.screenshot({ path: join(outDir, `${name}.png`), fullPage: true });
  const text = () => page.evaluate(() => document.body.innerText);
  const waitText = (needle, timeout = 20_000) =>
    page.waitForFunction((n) => document.body.innerText.includes(n), { timeout, polling: 100 }, needle);
  // The element of `selector` whose text is `label`, clicked as a person would.
  const clickText = async (p, selector, label) => {
    const h = await p.evaluateHandle(
      (sel, l) => [...document.querySelectorAll(sel)].find((e) => e.textContent.trim() === l) ?? null,
      selector,
      label,
    );
    const el = h.asElement();
    check(el, `no ${selector} "${label}"`);
    await el.click();
  };
  const clickButton = (label) => clickText(page, "button", label);
  const clickLink = (label) => clickText(page, "nav a", label);
  const axe = async (name) => {
    await page.evaluate(axeSource);
    const result = await page.evaluate(async () => {
      // eslint-disable-next-line no-undef
      const r = await axe.run(document, { resultTypes: ["violations"] });
      return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help }));
    });
    const bad = result.filter((v) => v.impact === "serious" || v.impact === "critical");
    check(bad.length === 0, `${name}: accessibility violations ${JSON.stringify(bad)}`);
  };
  const signIn = async (token) => {
    await page.goto(base + "/", { waitUntil: "load" });
    await page.waitForSelector("label[for=token]");
    const label = await page.$eval("label[for=token]", (l) => l.textContent);
    check(label === "Token", `the field is labelled ${label}`);
    await page.type("#token", token);
    await clickButton("Sign in");
    await page.waitForSelector("nav a");
  };

  await step("under its Content-Security-Policy, the pages and charts load without errors", async () => {
    const strict = await browser.newPage();
    const errors = [];
    // Refused API calls (401 before signing in) are expected; a CSP violation is not.
    strict.on("console", (m) => m.type() === "error" && !/Failed to load resource/.test(m.text()) && errors.push(m.text()));
    strict.on("pageerror", (e) => errors.push(e.message));
    await strict.goto(base + "/", { waitUntil: "load" });
    await strict.waitForSelector("#token");
    await strict.type("#token", admin);
    await clickText(strict, "button", "Sign in");
    await strict.waitForSelector("figure.chart canvas", { timeout: 20_000 });
    await strict.goto(base + "/reports?report=cluster&since=1h&step=5m", { waitUntil: "load" });
    await strict.waitForSelector("figure.chart canvas", { timeout: 20_000 });
    await clickText(strict, "button", "Sign out");
    await strict.waitForSelector("#token");
    await strict.close();
    check(errors.length === 0, errors.join("\n"));
  });

  await step("sign-in form: a Token field and a Sign in button, accessible", async () => {
    await page.goto(base + "/", { waitUntil: "load" });
    await page.waitForSelector("#token");
    await shot("sign-in");
    await axe("sign-in");
  });

  await step("a wrong token is refused with the API's message", async () => {
    await page.type("#token", "arb_000000000000_" + "0".repeat(48));
    await clickButton("Sign in");
    await page.waitForSelector("[role=alert]");
    check((await page.$("nav")) === null, "signed in with a bogus token");
  });

  await step("admin signs in and sees every navigation link", async () => {
    await signIn(admin);
    const links = await page.$$eval("nav a", (as) => as.map((a) => a.textContent));
    for (const l of ["Overview", "Jobs", "Queues", "Nodes", "Services", "Reports", "Admin"]) {
      check(links.includes(l), `no ${l} link in ${links}`);
    }
    const cookies = await page.cookies();
    const c = cookies.find((c) => c.name === "arbiter_session");
    check(c && c.httpOnly && c.sameSite === "Strict", `cookie ${JSON.stringify(c)}`);
    check(await page.evaluate(() => !document.cookie.includes("arbiter_session")), "the script can read the cookie");
  });

  await step("Overview: GPU figures and a chart with data", async () => {
    await clickLink("Overview");
    await page.waitForSelector("[data-figure=total]");
    await page.waitForFunction(() => document.querySelector("[data-figure=total]")?.textContent === "4", { timeout: 20_000 });
    await page.waitForSelector("figure.chart canvas", { timeout: 20_000 });
    const points = await page.$eval("figure.chart [data-points]", (e) => Number(e.getAttribute("data-points")));
    check(points > 0, "the chart has no data");
    await page.waitForSelector('ul.budgets li[data-tenant="speech"]', { timeout: 20_000 });
    const budget = await page.$eval('ul.budgets li[data-tenant="speech"]', (e) => e.textContent);
    check(/of 1,?000 GPU-hours used/.test(budget), `the speech budget reads ${budget}`);
    await shot("overview");
    await axe("overview");
  });

  let runId = 0;
  await step("Jobs: the form shows the API's validation error by its field", async () => {
    await clickLink("Jobs");
    await page.waitForSelector("#submit-command");
    await page.waitForFunction(() => document.querySelectorAll("#submit-queue option").length > 0);
    await page.select("#submit-queue", "vision-train");
    await clickButton("Submit");
    await page.waitForSelector("#submit-command-error");
    const msg = await page.$eval("#submit-command-error", (e) => e.textContent);
    check(/must not be empty/.test(msg), `error: ${msg}`);
    check((await page.$eval("#submit-command", (e) => e.getAttribute("aria-invalid"))) === "true", "not marked invalid");
    await shot("jobs-validation");
    await axe("jobs");
  });

  await step("submit a job from the form; it runs and succeeds, with its logs", async () => {
    await page.type("#submit-command", "echo hello-from-the-console");
    await clickButton("Submit");
    await page.waitForFunction(() => /^\/jobs\/\d+$/.test(location.pathname));
    runId = Number((await page.evaluate(() => location.pathname)).split("/")[2]);
    await page.waitForSelector(".state-succeeded", { timeout: 30_000 });
    await waitText("hello-from-the-console");
    await waitText("all tasks exited 0");
    await shot("job-succeeded");
    await axe("job page");
  });

  await step("follow a running job's logs, then cancel it from its page", async () => {
    await clickLink("Jobs");
    await page.waitForSelector("#submit-command");
    await page.select("#submit-queue", "vision-train");
    await page.type("#submit-command", "echo first-line; sleep 1; echo second-line; sleep 60");
    await clickButton("Submit");
    await page.waitForFunction(() => /^\/jobs\/\d+$/.test(location.pathname));
    await page.waitForSelector(".state-running", { timeout: 30_000 });
    await waitText("first-line");
    await waitText("second-line");
    // Its GPU shows in its queue's bar.
    const jobUrl = page.url();
    await clickLink("Queues");
    await waitText("gpu: used 1 of guaranteed 2");
    const width = await page.$eval('.queue-bar[data-queue="vision-train"] .bar .used', (e) => e.getBoundingClientRect().width);
    check(width > 0, "the used part of the bar is empty");
    await shot("queues-running");
    await page.goto(jobUrl, { waitUntil: "load" });
    await page.waitForSelector(".state-running");
    await clickButton("Cancel");
    await page.waitForSelector(".state-cancelled", { timeout: 30_000 });
  });

  let bigId = 0;
  await step("a too-large job's page says why it is pending", async () => {
    await clickLink("Jobs");
    await page.waitForSelector("#submit-command");
    await page.select("#submit-queue", "vision-train");
    await page.type("#submit-command", "sleep 1");
    await page.$eval("#submit-gpus", (e) => (e.value = ""));
    await page.type("#submit-gpus", "8");
    await clickButton("Submit");
    await page.waitForFunction(() => /^\/jobs\/\d+$/.test(location.pathname));
    bigId = Number((await page.evaluate(() => location.pathname)).split("/")[2]);
    await page.waitForSelector("[data-verdict]", { timeout: 20_000 });
    const why = await page.$eval("[data-verdict]", (e) => e.textContent);
    check(/8/.test(why) && why.length > 20, `verdict: ${why}`);
    // The expected start from the replays of the queue (docs/console.md).
    await page.waitForSelector("[data-expected-start]", { timeout: 20_000 });
    const es = await page.$eval("[data-expected-start]", (e) => e.textContent);
    check(/Expected start: .* in half the replays, .* in nine in ten; 32 replays/.test(es), `expected start: ${es}`);
    await shot("job-pending");
    await clickButton("Cancel");
    await page.waitForSelector(".state-cancelled", { timeout: 20_000 });
  });

  await step("Jobs list: filtered on the server, links to each job", async () => {
    await page.goto(base + "/jobs?state=succeeded", { waitUntil: "load" });
    await page.waitForSelector(`a[href="/jobs/${runId}"]`);
    check((await page.$(`a[href="/jobs/${bigId}"]`)) === null, "a cancelled job in the succeeded filter");
    await shot("jobs");
    // The text filter is the server's too: a word of one job's command finds it alone.
    await page.goto(base + "/jobs", { waitUntil: "load" });
    await page.waitForSelector("#filter-q");
    await page.type("#filter-q", "HELLO-from-the");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => location.search.includes("q=HELLO-from-the"));
    await page.waitForSelector(`a[href="/jobs/${runId}"]`);
    check((await page.$(`a[href="/jobs/${bigId}"]`)) === null, "a job without the text in the text filter");
  });

  await step("live: a job submitted elsewhere appears on the Jobs page without a reload", async () => {
    await page.goto(base + "/jobs", { waitUntil: "load" });
    await page.waitForSelector(`a[href="/jobs/${runId}"]`);
    const body = JSON.stringify({ queue: "vision-train", command: ["true"], resources: { gpus: 1 } });
    const id = (await call(admin, "POST", "/api/v1/jobs", body)).id;
    // The list's own refresh is every 10 s: the event stream brings it sooner.
    await page.waitForSelector(`a[href="/jobs/${id}"]`, { timeout: 5_000 });
  });

  await step("Jobs list: a column's header sorts the page, from the keyboard too", async () => {
    const ids = () => page.$$eval("table tbody tr td:first-child a", (as) => as.map((a) => Number(a.textContent)));
    await page.focus("button[data-sort=id]");
    await page.keyboard.press("Enter"); // already by job ascending: now descending
    await page.waitForSelector('th[aria-sort="descending"] button[data-sort=id]');
    const down = await ids();
    check(down.length > 1 && down.every((v, i) => i === 0 || down[i - 1] > v), `not descending: ${down}`);
    const caption = await page.$eval("table caption", (e) => e.textContent);
    check(/this page sorted by job, descending/.test(caption), `caption: ${caption}`);
    await page.click("button[data-sort=id]");
    await page.waitForSelector('th[aria-sort="ascending"] button[data-sort=id]');
  });

  await step("Queues: bars per queue", async () => {
    await clickLink("Queues");
    await page.waitForSelector('.queue-bar[data-queue="vision-train"]');
    await waitText("used");
    await page.waitForSelector('.fair-share[data-queue="vision-train"]', { timeout: 20_000 });
    const fair = await page.$eval('.fair-share[data-queue="vision-train"]', (e) => e.textContent);
    check(/GPU-hours used of .* entitled \(\d+% of its entitlement\)/.test(fair), `the fair share reads ${fair}`);
    const bar = await page.$eval('.queue-bar[data-queue="speech-train"] .bar-text', (e) => e.textContent);
    check(/idle guarantee others may borrow 2, about 0 of it lent/.test(bar), `speech-train's bar reads ${bar}`);
    await shot("queues");
    await axe("queues");
  });

  await step("Nodes: fragmentation per GPU model and a rack filter", async () => {
    await clickLink("Nodes");
    await page.waitForSelector("ul.gpus");
    const models = await page.$$eval("section[aria-labelledby=fragmentation] tbody tr", (rows) => rows.map((r) => r.getAttribute("data-model")));
    check(models.length > 0 && models.every((m) => m), `no fragmentation row per GPU model: ${JSON.stringify(models)}`);
    const label = await page.$eval("label[for=node-rack]", (e) => e.textContent);
    check(label === "Rack", `the rack filter's label is ${label}`);
  });

  for (const [name, selector] of [
    ["Nodes", "ul.gpus"],
    ["Services", "h1"],
    ["Admin", "#config-yaml"],
  ]) {
    await step(`${name} page renders and is accessible`, async () => {
      await clickLink(name);
      await page.waitForSelector(selector);
      await page.waitForFunction(() => !document.body.innerText.includes("Loading…"), { timeout: 20_000 });
      await shot(name.toLowerCase());
      await axe(name);
    });
  }

  await step("Admin: a dry run of the configuration shows its diff", async () => {
    await page.waitForFunction(() => document.querySelector("#config-yaml").value.includes("vision-train"));
    await clickButton("Dry run");
    await page.waitForSelector("pre.diff");
  });

  await step("Admin: create a user and a token from the forms; the API's field error by its field", async () => {
    await page.type("#new-user-name", "Not A Name!");
    await page.select("#new-user-role", "member");
    await clickButton("Create user");
    await page.waitForSelector("#new-user-name-error", { timeout: 5_000 });
    check((await page.$eval("#new-user-name", (e) => e.getAttribute("aria-invalid"))) === "true", "the user name is not marked invalid");
    await page.click("#new-user-name", { clickCount: 3 });
    await page.keyboard.press("Backspace");
    await page.type("#new-user-name", "carol");
    await page.type("#new-user-tenant", "vision");
    await clickButton("Create user");
    await page.waitForFunction(() => document.querySelector("form[aria-labelledby=new-user] .created")?.textContent.includes("carol"), { timeout: 5_000 });
    await page.type("#new-token-user", "carol");
    await clickButton("Create token");
    await page.waitForFunction(() => /arb_/.test(document.querySelector("form[aria-labelledby=new-token] .created")?.textContent ?? ""), { timeout: 5_000 });
    await shot("admin-created");
    await axe("admin forms");
  });

  await step("Reports: a table, a chart with data and a CSV link", async () => {
    await page.goto(base + "/reports?report=cluster&since=1h&step=5m", { waitUntil: "load" });
    await page.waitForSelector("table");
    await page.waitForSelector("figure.chart canvas");
    const href = await page.$eval("a[download]", (a) => a.getAttribute("href"));
    check(href.includes("format=csv"), href);
    const csv = await page.evaluate(async (h) => (await fetch(h)).text(), href);
    check(csv.startsWith("period_start,"), `csv: ${csv.slice(0, 80)}`);
    await shot("reports");
    await axe("reports");
  });

  await step("Approvals: the badge counts what awaits the admin; approving from the page", async () => {
    const body = JSON.stringify({ queue: "speech-train", command: ["true"], resources: { gpus: 2 } });
    const held = (await call(sam, "POST", "/api/v1/jobs", body)).id;
    const until = new Date(Date.now() + 86_400_000).toISOString();
    const quota = await call(
      sam,
      "POST",
      "/api/v1/quota-requests",
      JSON.stringify({ queue: "speech-train", guaranteed: { gpu: 3 }, until, reason: "a deadline" }),
    );
    await page.goto(base + "/overview", { waitUntil: "load" });
    await page.waitForSelector('nav .badge[data-approvals="2"]', { timeout: 20_000 });
    await page.click('nav a[href="/approvals"]');
    await page.waitForSelector(`tr[data-approval="job/${held}"]`);
    await page.waitForSelector(`tr[data-approval="quota/${quota.id}"]`);
    await shot("approvals");
    await axe("approvals");
    await page.type(`tr[data-approval="job/${held}"] input`, "budget checked");
    await clickText(page, `tr[data-approval="job/${held}"] button`, "Approve");
    await waitText(`job ${held}: approved.`);
    await page.waitForSelector('nav .badge[data-approvals="1"]', { timeout: 20_000 });
    const job = await call(admin, "GET", `/api/v1/jobs/${held}`);
    check(!["awaiting_approval", "rejected"].includes(job.state), `job: ${job.state} ${job.reason}`);
    const audit = (await call(admin, "GET", "/api/v1/audit?limit=1000")).items;
    check(
      audit.some((a) => a.action === "job.approve" && a.target === `job/${held}` && a.result === "ok" && a.detail.comment === "budget checked"),
      "no job.approve record with the comment",
    );
    await clickText(page, `tr[data-approval="quota/${quota.id}"] button`, "Approve");
    await waitText(`quota request ${quota.id}: approved.`);
    await page.waitForFunction(() => document.querySelector("nav .badge") === null, { timeout: 20_000 });
    const decided = await call(admin, "GET", `/api/v1/quota-requests/${quota.id}`);
    check(decided.state === "approved" && decided.diff.after.gpu === 3, `quota request: ${JSON.stringify(decided)}`);
    const queue = await call(admin, "GET", "/api/v1/queues/speech-train");
    check(queue.guaranteed.gpu === 3, `speech-train guaranteed: ${JSON.stringify(queue.guaranteed)}`);
  });

  await step("sign out ends the session", async () => {
    await clickButton("Sign out");
    await page.waitForSelector("#token");
    const status = await page.evaluate(async () => (await fetch("/api/v1/jobs")).status);
    check(status === 401, `after signing out: ${status}`);
  });

  await step("a member of one tenant sees none of another's jobs or queues", async () => {
    await signIn(alice);
    const links = await page.$$eval("nav a", (as) => as.map((a) => a.textContent));
    check(!links.includes("Admin"), "a member sees the Admin link");
    await page.goto(base + "/jobs", { waitUntil: "load" });
    await page.waitForSelector(`a[href="/jobs/${runId}"]`);
    check((await page.$(`a[href="/jobs/${speechJob}"]`)) === null, "alice sees a speech job");
    await page.goto(base + `/jobs/${speechJob}`, { waitUntil: "load" });
    await page.waitForSelector("[role=alert]");
    await page.goto(base + "/queues", { waitUntil: "load" });
    await page.waitForSelector('.queue-bar[data-queue="vision-train"]');
    check(!(await text()).includes("speech-train"), "alice sees speech's queue");
    await clickButton("Sign out");
    await page.waitForSelector("#token");
  });

  await step("Sign in with SSO: through the identity provider and back, as a mapped user", async () => {
    // The test provider (test/idp, oidc-provider); its packages come with the build's
    // integration tests (ninja test_idp_npm).
    const idpDir = new URL("../../test/idp/", import.meta.url).pathname;
    check(existsSync(join(idpDir, "node_modules")), `no ${idpDir}node_modules: run ninja -C BUILD test_idp_npm`);
    const issuer = await h.startProcess(process.execPath, [join(idpDir, "idp.mjs")], /"issuer":"([^"]+)"/);
    await call(
      admin,
      "PUT",
      "/api/v1/config",
      kConfig +
        `identity:
  oidc: {issuer: "${issuer}", audience: arbiter, client_id: arbiter}
  mappings:
    - {group: vision-leads, tenant: vision, role: tenant-admin}
`,
      "application/yaml",
    );
    // A fresh browser context, under the console's own Content-Security-Policy.
    const context = await browser.createBrowserContext();
    const sso = await context.newPage();
    sso.setDefaultTimeout(20_000);
    const errors = [];
    sso.on("pageerror", (e) => errors.push(`${sso.url()}: ${e.message}`));
    await sso.goto(base + "/sign-in", { waitUntil: "load" });
    await sso.waitForSelector("#sso");
    await Promise.all([sso.waitForNavigation({ waitUntil: "load" }), sso.click("#sso")]);
    check(sso.url().startsWith(issuer), `not at the provider: ${sso.url()}`);
    await sso.waitForSelector("#login");
    await sso.type("#login", "carol");
    await sso.click("#submit");
    await sso.waitForSelector("nav a");
    const who = await sso.$eval(".who", (e) => e.textContent);
    check(who.includes("carol") && who.includes("vision") && who.includes("tenant-admin"), `signed in as ${who}`);
    check(!sso.url().includes("code="), `the callback's code stays in the URL: ${sso.url()}`);
    const status = await sso.evaluate(async () => (await fetch("/api/v1/jobs")).status);
    check(status === 200, `the session's API call: ${status}`);
    await sso.screenshot({ path: join(outDir, "sso.png"), fullPage: true });
    check(errors.length === 0, errors.join("\n"));
    await context.close();
  });

  await step("no console errors on any page", async () => {
    check(consoleErrors.length === 0, consoleErrors.join("\n"));
  });
}

await h.run(main);
