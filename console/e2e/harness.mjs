// What the console's end-to-end tests share: a real `arbiter server` with its built-in node on a
// kernel-chosen port in a temporary folder, Debian's headless chromium through puppeteer-core,
// named steps, a watchdog, and cleanup that leaves nothing running, pass or fail.
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import puppeteer from "puppeteer-core";

export function chromiumPath() {
  const candidates = process.env.ARBITER_CHROMIUM ? [process.env.ARBITER_CHROMIUM] : ["/usr/bin/chromium", "/usr/bin/chromium-browser"];
  return candidates.find((p) => existsSync(p));
}

export function check(cond, what) {
  if (!cond) throw new Error(what);
}

export class Harness {
  constructor(name, limitMs) {
    this.dir = mkdtempSync(join(tmpdir(), `arbiter-${name}-`));
    chmodSync(this.dir, 0o711); // tasks run as their own users and must reach their folders
    this.server = null;
    this.others = [];
    this.browser = null;
    this.passed = 0;
    this.failed = 0;
    this.watchdog = setTimeout(async () => {
      console.error(`FAIL: the test ran past its ${limitMs / 1000} s limit`);
      await this.cleanup();
      process.exit(1);
    }, limitMs);
  }

  // Starts `binary server` with the built-in node and `extra` flags; resolves to its base URL.
  async startServer(binary, extra = []) {
    const args = [
      "server",
      "--data-dir", join(this.dir, "data"),
      "--listen", "127.0.0.1:0",
      "--local-node", "local",
      "--local-work-dir", join(this.dir, "node"),
      "--orphan-timeout-ms", "30000",
      ...extra,
    ];
    this.server = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    this.server.stderr.on("data", (d) => (out += d));
    const port = await new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`the server did not start: ${out}`)), 20_000);
      this.server.stdout.on("data", (d) => {
        out += d;
        const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)\n/);
        if (m) {
          clearTimeout(t);
          resolve(Number(m[1]));
        }
      });
      this.server.on("exit", (code) => reject(new Error(`the server exited (${code}): ${out}`)));
    });
    this.base = `http://127.0.0.1:${port}`;
    this.admin = readFileSync(join(this.dir, "data", "admin.token"), "utf8").trim();
    return this.base;
  }

  // Starts another process for the test (killed at cleanup); resolves to the first match of
  // `ready` (its first group) in its output.
  async startProcess(command, args, ready) {
    const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
    this.others.push(child);
    let out = "";
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${args.join(" ")} did not start: ${out}`)), 30_000);
      const on = (d) => {
        out += d;
        const m = out.match(ready);
        if (m) {
          clearTimeout(t);
          resolve(m[1]);
        }
      };
      child.stdout.on("data", on);
      child.stderr.on("data", on);
      child.on("exit", (code) => reject(new Error(`${args.join(" ")} exited (${code}): ${out}`)));
    });
  }

  // A call to the API with a bearer token; the parsed JSON answer, or an error naming the status.
  async call(token, method, path, body, type = "application/json") {
    const r = await fetch(this.base + path, {
      method,
      headers: { Authorization: `Bearer ${token}`, "Content-Type": type },
      body,
    });
    const text = await r.text();
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
    return JSON.parse(text);
  }

  async launch(chromium) {
    this.browser = await puppeteer.launch({
      executablePath: chromium,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-background-networking"],
      protocolTimeout: 60_000,
    });
    return this.browser;
  }

  async step(name, fn) {
    const t0 = Date.now();
    try {
      await fn();
      this.passed += 1;
      console.log(`[ OK ] ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      this.failed += 1;
      console.log(`[FAIL] ${name}: ${e && e.stack ? e.stack : e}`);
    }
  }

  // Kills what the built-in node started (the shims its pid files name).
  killTasks() {
    const jobs = join(this.dir, "node", "jobs");
    if (!existsSync(jobs)) return;
    for (const job of readdirSync(jobs)) {
      let files = [];
      try {
        files = readdirSync(join(jobs, job));
      } catch {
        continue;
      }
      for (const f of files.filter((f) => f.endsWith(".pid"))) {
        const pid = Number(readFileSync(join(jobs, job, f), "utf8").trim());
        try {
          if (pid > 1) process.kill(pid, "SIGKILL");
        } catch {
          // gone already
        }
      }
    }
  }

  async cleanup() {
    if (this.browser) await this.browser.close().catch(() => {});
    this.browser = null;
    if (this.server) this.server.kill("SIGKILL");
    this.server = null;
    for (const p of this.others) p.kill("SIGKILL");
    this.others = [];
    this.killTasks();
    rmSync(this.dir, { recursive: true, force: true });
  }

  // Runs `main`, cleans up, prints the closing line and exits with the result.
  async run(main) {
    try {
      await main();
    } catch (e) {
      this.failed += 1;
      console.log(`[FAIL] ${e && e.stack ? e.stack : e}`);
    } finally {
      clearTimeout(this.watchdog);
      await this.cleanup();
    }
    console.log(`${this.passed} passed, ${this.failed} failed`);
    process.exit(this.failed === 0 ? 0 : 1);
  }
}
