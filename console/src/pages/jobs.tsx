import { useState } from "preact/hooks";
import { api, ApiError, get, getText, Json, query } from "../api";
import type { Session } from "../main";
import { ErrorText, errorMessage, fmtNum, fmtTime, Link, Loading, navigate, StateBadge, usePoll } from "../util";

const kStates = ["", "pending", "running", "suspended", "succeeded", "failed", "cancelled", "preempted"];
const kTypes = ["", "training", "batch", "interactive", "service"];
const kFilters = ["tenant", "queue", "state", "user", "type", "q"] as const;
// The filters' labels; `q` is the API's text filter (name or command, any case).
const kFilterLabels: Record<string, string> = {
  tenant: "Tenant",
  queue: "Queue",
  state: "State",
  user: "User",
  type: "Type",
  q: "Name or command",
};
const kPageSize = 50;

type SortKey = "id" | "state" | "tenant" | "queue" | "user" | "gpus" | "submitted_at";
const kSortLabels: Record<SortKey, string> = {
  id: "job",
  state: "state",
  tenant: "tenant",
  queue: "queue",
  user: "user",
  gpus: "GPUs",
  submitted_at: "submission time",
};
function sortValue(j: Json, key: SortKey): number | string {
  if (key === "id") return Number(j.id);
  if (key === "gpus") return Number(j.resources?.gpus ?? 0);
  return String(j[key] ?? "");
}

function urlFilters(): Record<string, string> {
  const p = new URLSearchParams(location.search);
  const out: Record<string, string> = {};
  for (const k of kFilters) out[k] = p.get(k) ?? "";
  out.cursor = p.get("cursor") ?? "";
  return out;
}

// "in 1h 20m": seconds from now, for the expected start.
function fmtIn(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  if (h > 0) return `${h}h ${m}m`;
  return m > 0 ? `${m}m` : `${seconds}s`;
}

const kRunTimeSources: Record<string, string> = {
  user: "each user's history of completed runs",
  queue: "the queues' history of completed runs",
  cluster: "the cluster's history of completed runs",
  walltime: "walltimes",
  none: "nothing known: no history, no walltimes",
};

// The Monte Carlo estimate of `why` (docs/console.md): P50 and P90, and what they rest on.
function ExpectedStart(props: { es: Json }) {
  const es = props.es;
  // Null: later than what the replays covered, the horizon or, cut off by the work bound, less.
  const cut = (es.bounds ?? []).includes("work") && typeof es.simulated_s === "number";
  const part = (name: string, share: string) =>
    es[name]
      ? `by ${fmtTime(es[name])} (in ${fmtIn(es[`${name}_s`])}) in ${share}`
      : cut
        ? `later than ${fmtIn(es.simulated_s)} from now in ${share}`
        : `not within the horizon in ${share}`;
  return (
    <p data-expected-start={es.run_time_source}>
      Expected start: {part("p50", "half the replays")}, {part("p90", "nine in ten")}; {es.samples} replays of the
      queue with run times from {kRunTimeSources[es.run_time_source] ?? es.run_time_source}
      {es.reservation_start ? `; the backfill reservation starts ${fmtTime(es.reservation_start)}` : ""}
      {es.bounded ? ` (bounded: ${(es.bounds ?? []).join(", ")})` : ""}.
    </p>
  );
}

export function Jobs(props: { session: Session }) {
  const [filters, setFilters] = useState(urlFilters);
  const [draft, setDraft] = useState(filters);
  const [text, setText] = useState("");
  const [previous, setPrevious] = useState<string[]>([]);
  const list = usePoll(() => get(`/api/v1/jobs${query({ ...filters, limit: kPageSize })}`), 10000, [JSON.stringify(filters)]);
  const apply = (f: Record<string, string>) => {
    setFilters(f);
    navigate(`/jobs${query(f)}`);
  };
  const canSubmit = props.session.role !== "viewer";
  const needle = text.trim().toLowerCase();
  // The API pages jobs oldest first and has no other order: a column's sort orders this page only.
  const [sort, setSort] = useState<{ key: SortKey; desc: boolean }>({ key: "id", desc: false });
  const items: Json[] = (list.data?.items ?? [])
    .filter(
      (j: Json) => !needle || `${j.id} ${j.user} ${j.queue} ${j.state} ${j.reason} ${(j.command ?? []).join(" ")}`.toLowerCase().includes(needle),
    )
    .sort((a: Json, b: Json) => {
      const x = sortValue(a, sort.key);
      const y = sortValue(b, sort.key);
      const c = x < y ? -1 : x > y ? 1 : Number(a.id) - Number(b.id);
      return sort.desc ? -c : c;
    });
  const header = (key: SortKey, label: string) => (
    <th scope="col" aria-sort={sort.key === key ? (sort.desc ? "descending" : "ascending") : "none"}>
      <button
        type="button"
        class="sort"
        data-sort={key}
        onClick={() => setSort({ key, desc: sort.key === key ? !sort.desc : false })}
      >
        {label}
        {sort.key === key ? (sort.desc ? " ▼" : " ▲") : ""}
      </button>
    </th>
  );
  const sortLabel = kSortLabels[sort.key];
  return (
    <>
      <h1>Jobs</h1>
      {canSubmit && <SubmitForm />}
      <section aria-labelledby="job-list">
        <h2 id="job-list">All jobs you may see</h2>
        <form
          class="filters"
          onSubmit={(e) => {
            e.preventDefault();
            setPrevious([]);
            apply({ ...draft, cursor: "" });
          }}
        >
          {kFilters.map((k) => (
            <span class="field">
              <label for={`filter-${k}`}>{kFilterLabels[k]}</label>
              {k === "state" || k === "type" ? (
                <select id={`filter-${k}`} value={draft[k]} onChange={(e) => setDraft({ ...draft, [k]: (e.target as HTMLSelectElement).value })}>
                  {(k === "state" ? kStates : kTypes).map((s) => (
                    <option value={s}>{s || "any"}</option>
                  ))}
                </select>
              ) : (
                <input id={`filter-${k}`} value={draft[k]} onInput={(e) => setDraft({ ...draft, [k]: (e.target as HTMLInputElement).value })} />
              )}
            </span>
          ))}
          <button type="submit">Filter</button>
          <span class="field">
            <label for="filter-text">Search this page</label>
            <input id="filter-text" type="search" value={text} onInput={(e) => setText((e.target as HTMLInputElement).value)} />
          </span>
        </form>
        <ErrorText error={list.error} />
        {!list.data ? (
          <Loading />
        ) : items.length === 0 ? (
          <p class="muted">No jobs.</p>
        ) : (
          <div class="table-wrap">
            <table>
              <caption>
                Jobs ({items.length} on this page; pages go oldest first), this page sorted by {sortLabel}
                {sort.desc ? ", descending" : ""}
              </caption>
              <thead>
                <tr>
                  {header("id", "Job")}
                  {header("state", "State")}
                  {header("tenant", "Tenant")}
                  {header("queue", "Queue")}
                  {header("user", "User")}
                  {header("gpus", "GPUs")}
                  {header("submitted_at", "Submitted")}
                  <th scope="col">Reason</th>
                </tr>
              </thead>
              <tbody>
                {items.map((j) => (
                  <tr>
                    <td>
                      <Link href={`/jobs/${j.id}`}>{j.id}</Link>
                    </td>
                    <td>
                      <StateBadge state={j.state} />
                    </td>
                    <td>{j.tenant}</td>
                    <td>{j.queue}</td>
                    <td>{j.user}</td>
                    <td>{fmtNum(j.resources?.gpus ?? 0)}</td>
                    <td>{fmtTime(j.submitted_at)}</td>
                    <td>{j.reason}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        <div class="pager">
          <button
            type="button"
            disabled={previous.length === 0}
            onClick={() => {
              const p = [...previous];
              const cursor = p.pop() ?? "";
              setPrevious(p);
              apply({ ...filters, cursor });
            }}
          >
            Previous page
          </button>
          <button
            type="button"
            disabled={!list.data?.next_cursor}
            onClick={() => {
              setPrevious([...previous, filters.cursor]);
              apply({ ...filters, cursor: String(list.data.next_cursor) });
            }}
          >
            Next page
          </button>
        </div>
      </section>
    </>
  );
}

// The form's fields and the API's names for them, so an error names the right control.
const kFieldOf: Record<string, string> = {
  queue: "queue",
  command: "command",
  "resources.gpus": "gpus",
  gpus: "gpus",
  gpu_models: "model",
  walltime_seconds: "walltime",
  "retry.max_retries": "retries",
};

function SubmitForm() {
  const queues = usePoll(() => get("/api/v1/queues"), 0, [], false);
  const [form, setForm] = useState({ queue: "", command: "", gpus: "1", model: "", walltime: "", retries: "0" });
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [general, setGeneral] = useState("");
  const [busy, setBusy] = useState(false);
  const leafQueues: Json[] = (queues.data?.items ?? []).filter((q: Json) => !q.is_tenant);
  const models = [...new Set((queues.data?.items ?? []).flatMap((q: Json) => Object.keys(q.guaranteed ?? {}).filter((k) => k.startsWith("gpu:")).map((k) => k.slice(4))))] as string[];
  const set = (k: string) => (e: Event) => setForm({ ...form, [k]: (e.target as HTMLInputElement).value });
  const submit = async (e: Event) => {
    e.preventDefault();
    setErrors({});
    setGeneral("");
    const body: Json = {
      queue: form.queue || (leafQueues[0]?.name ?? ""),
      command: form.command.trim() === "" ? [] : ["sh", "-c", form.command],
      resources: { gpus: Number(form.gpus) },
      retry: { max_retries: Number(form.retries || "0") },
    };
    if (form.model) body.gpu_models = [form.model];
    if (form.walltime) body.walltime_seconds = Number(form.walltime);
    setBusy(true);
    try {
      const job = await api("POST", "/api/v1/jobs", body);
      navigate(`/jobs/${job.id}`);
    } catch (err) {
      if (err instanceof ApiError && err.field && kFieldOf[err.field]) {
        setErrors({ [kFieldOf[err.field]]: err.message });
      } else {
        setGeneral(errorMessage(err));
      }
    } finally {
      setBusy(false);
    }
  };
  const field = (name: string, label: string, input: preact.JSX.Element) => (
    <span class="field">
      <label for={`submit-${name}`}>{label}</label>
      {input}
      {errors[name] && (
        <span class="error" id={`submit-${name}-error`} role="alert">
          {errors[name]}
        </span>
      )}
    </span>
  );
  const described = (name: string) => (errors[name] ? { "aria-describedby": `submit-${name}-error`, "aria-invalid": true } : {});
  return (
    <section aria-labelledby="submit-job">
      <h2 id="submit-job">Submit a job</h2>
      <form class="submit" onSubmit={submit}>
        {field(
          "queue",
          "Queue",
          <select id="submit-queue" value={form.queue} onChange={set("queue")} {...described("queue")}>
            {leafQueues.map((q) => (
              <option value={q.name}>{q.name}</option>
            ))}
          </select>,
        )}
        {field("command", "Command", <input id="submit-command" value={form.command} onInput={set("command")} placeholder="python train.py" {...described("command")} />)}
        {field("gpus", "GPUs", <input id="submit-gpus" type="number" min="0" value={form.gpus} onInput={set("gpus")} {...described("gpus")} />)}
        {field(
          "model",
          "GPU model",
          <select id="submit-model" value={form.model} onChange={set("model")} {...described("model")}>
            <option value="">any</option>
            {models.map((m) => (
              <option value={m}>{m}</option>
            ))}
          </select>,
        )}
        {field("walltime", "Walltime (seconds)", <input id="submit-walltime" type="number" min="0" value={form.walltime} onInput={set("walltime")} {...described("walltime")} />)}
        {field("retries", "Retries", <input id="submit-retries" type="number" min="0" value={form.retries} onInput={set("retries")} {...described("retries")} />)}
        <button type="submit" disabled={busy}>
          Submit
        </button>
        <ErrorText error={general} />
      </form>
    </section>
  );
}

const kActions = [
  { verb: "cancel", label: "Cancel", when: (s: string) => !["succeeded", "failed", "cancelled"].includes(s) },
  { verb: "suspend", label: "Suspend", when: (s: string) => ["pending", "running"].includes(s) },
  { verb: "resume", label: "Resume", when: (s: string) => s === "suspended" },
  { verb: "retry", label: "Retry", when: (s: string) => ["failed", "cancelled"].includes(s) },
];

export function JobPage(props: { id: string; session: Session }) {
  const id = props.id;
  const job = usePoll(
    async () => {
      const [j, events] = await Promise.all([get(`/api/v1/jobs/${id}`), get(`/api/v1/jobs/${id}/events`)]);
      const why = j.state === "pending" ? await get(`/api/v1/jobs/${id}/why`) : null;
      return { j, events: events.items as Json[], why };
    },
    2000,
    [id],
  );
  const [task, setTask] = useState(0);
  const logs = usePoll(
    async () => {
      try {
        return await getText(`/api/v1/jobs/${id}/logs${query({ task, stream: "combined" })}`);
      } catch (e) {
        if (e instanceof ApiError && (e.status === 503 || e.status === 409 || e.status === 404)) return `(${e.message})`;
        throw e;
      }
    },
    2000,
    [id, task],
  );
  const [actionError, setActionError] = useState("");
  const act = async (verb: string) => {
    setActionError("");
    try {
      await api("POST", `/api/v1/jobs/${id}/${verb}`);
      job.reload();
    } catch (e) {
      setActionError(errorMessage(e));
    }
  };
  if (job.error && !job.data) {
    return (
      <>
        <h1>Job {id}</h1>
        <ErrorText error={job.error} />
      </>
    );
  }
  if (!job.data) return <Loading />;
  const { j, events, why } = job.data;
  const viewer = props.session.role === "viewer";
  return (
    <>
      <h1>
        Job {j.id} <StateBadge state={j.state} />
      </h1>
      <p>
        {j.type} job of {j.user} in {j.tenant} / {j.queue}: {j.reason}
      </p>
      {!viewer && (
        <div class="actions" role="group" aria-label="Actions">
          {kActions
            .filter((a) => a.when(j.state))
            .map((a) => (
              <button type="button" onClick={() => act(a.verb)}>
                {a.label}
              </button>
            ))}
        </div>
      )}
      <ErrorText error={actionError} />
      {why && (
        <section aria-labelledby="why" class="why">
          <h2 id="why">Why it is pending</h2>
          <p data-verdict={why.code}>{why.message}</p>
          <p class="muted">
            {why.code}
            {why.position ? `; position ${why.position} in its queue` : ""}
            {why.estimated_start ? `; expected start ${fmtTime(why.estimated_start)}` : "; no expected start yet"}
          </p>
          {why.expected_start && <ExpectedStart es={why.expected_start} />}
        </section>
      )}
      <section aria-labelledby="spec">
        <h2 id="spec">Specification</h2>
        <dl class="spec">
          <dt>Command</dt>
          <dd>
            <code>{(j.command ?? []).join(" ")}</code>
          </dd>
          <dt>Resources</dt>
          <dd>
            {fmtNum(j.resources?.gpus)} GPUs × {j.tasks} task(s), {fmtNum((j.resources?.cpu_milli ?? 0) / 1000)} CPUs,{" "}
            {j.resources?.memory_mib} MiB{j.gpu_models?.length ? `, models ${j.gpu_models.join(", ")}` : ""}
          </dd>
          <dt>Walltime</dt>
          <dd>{j.walltime_seconds ? `${j.walltime_seconds} s` : "none"}</dd>
          <dt>Retries</dt>
          <dd>
            {j.restarts} of {j.retry?.max_retries ?? 0}
          </dd>
          <dt>Submitted</dt>
          <dd>{fmtTime(j.submitted_at)}</dd>
          <dt>Exit code</dt>
          <dd>{j.exit_code ?? ""}</dd>
        </dl>
      </section>
      <section aria-labelledby="placement">
        <h2 id="placement">Placement</h2>
        {(j.placement ?? []).length === 0 ? (
          <p class="muted">Not placed.</p>
        ) : (
          <table>
            <caption>Nodes and GPU indices per task ({j.gpu_model ?? ""})</caption>
            <thead>
              <tr>
                <th scope="col">Task</th>
                <th scope="col">Node</th>
                <th scope="col">GPUs</th>
              </tr>
            </thead>
            <tbody>
              {j.placement.map((p: Json, i: number) => (
                <tr>
                  <td>{i}</td>
                  <td>{p.node}</td>
                  <td>{(p.gpus ?? []).join(", ")}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
      <section aria-labelledby="timeline">
        <h2 id="timeline">Timeline</h2>
        <ol class="timeline">
          {events.map((e) => (
            <li>
              <time dateTime={e.at}>{fmtTime(e.at)}</time> {e.from ? `${e.from} → ` : ""}
              <strong>{e.to}</strong>: {e.reason}
            </li>
          ))}
        </ol>
      </section>
      <section aria-labelledby="logs">
        <h2 id="logs">Logs</h2>
        {j.tasks > 1 && (
          <>
            <label for="log-task">Task</label>{" "}
            <select id="log-task" value={task} onChange={(e) => setTask(Number((e.target as HTMLSelectElement).value))}>
              {Array.from({ length: j.tasks }, (_, i) => (
                <option value={i}>{i}</option>
              ))}
            </select>
          </>
        )}
        <ErrorText error={logs.error} />
        <pre class="logs" tabIndex={0} role="region" aria-label={`Output of task ${task}`}>
          {logs.data ?? ""}
        </pre>
      </section>
    </>
  );
}
