import { api, get, Json, query } from "../api";
import type { Session } from "../main";
import { Bar, ErrorText, errorMessage, fmtNum, fmtTime, Link, Loading, StateBadge, usePoll } from "../util";
import { useState } from "preact/hooks";

// One resource of a queue as a bar: used (within the guarantee), borrowed (beyond it), against
// the larger of max and guaranteed.
function QueueBar(props: { q: Json; dim: string; lent?: number }) {
  const { q, dim, lent } = props;
  const g = q.guaranteed?.[dim] ?? 0;
  const u = q.usage?.[dim] ?? 0;
  const b = q.borrowed?.[dim] ?? 0;
  const m = q.max?.[dim];
  const lend = q.lending_limit?.[dim];
  const scale = Math.max(m ?? 0, g, u, 1);
  // The part of the guarantee this queue does not use and may lend (up to its lending limit).
  const idle = Math.min(Math.max(0, g - u), lend ?? Infinity);
  return (
    <div class="queue-bar" data-queue={q.name} data-dim={dim}>
      <Bar
        max={scale}
        parts={[
          { value: u - b, cls: "used" },
          { value: b, cls: "borrowed" },
        ]}
      />
      <span class="bar-text">
        {dim}: used {fmtNum(u)} of guaranteed {fmtNum(g)}
        {b > 0 ? `, borrowed ${fmtNum(b)}` : ""}
        {lend !== undefined ? `, lending limit ${fmtNum(lend)}` : ""}
        {idle > 0 ? `, idle guarantee others may borrow ${fmtNum(idle)}` : ""}
        {lent !== undefined && idle > 0 ? `, about ${fmtNum(lent)} of it lent` : ""}
        {m !== undefined ? `, max ${fmtNum(m)}` : ", no max"}
      </span>
    </div>
  );
}

// What each queue lends, estimated: the API says what each queue borrows, not from whom. The GPUs
// borrowed by all queues (leaves, so that none counts twice) are shared out over the queues' idle
// lendable guarantees in proportion. Only for a caller who sees every queue (an admin): a
// member's view would miss the borrowers of other tenants.
function lentEstimate(items: Json[], dim: string): Map<string, number> {
  const leaves = items.filter((q) => !q.is_tenant && !items.some((c) => c.parent === q.name && c.name !== q.name));
  const idle = (q: Json) =>
    Math.min(Math.max(0, (q.guaranteed?.[dim] ?? 0) - (q.usage?.[dim] ?? 0)), q.lending_limit?.[dim] ?? Infinity);
  const borrowed = leaves.reduce((a, q) => a + (q.borrowed?.[dim] ?? 0), 0);
  const lendable = leaves.reduce((a, q) => a + idle(q), 0);
  const share = lendable > 0 ? Math.min(1, borrowed / lendable) : 0;
  return new Map(leaves.map((q) => [q.name as string, idle(q) * share]));
}

export function Queues(props: { session: Session }) {
  const admin = props.session.role === "admin";
  const queues = usePoll(() => get("/api/v1/queues"), 10000);
  // GPU-hours used against the guarantee's GPU-hours over the last day, per queue.
  const fairness = usePoll(() => get("/api/v1/reports/fairness?since=24h&group_by=queue"), 30000, [], false);
  const fair = new Map<string, Json>((fairness.data?.rows ?? []).map((r: Json) => [r.queue as string, r]));
  if (!queues.data) return <>{queues.error ? <ErrorText error={queues.error} /> : <Loading />}</>;
  const items: Json[] = queues.data.items;
  const tenants = [...new Set(items.map((q) => q.tenant as string))];
  const dims = (q: Json) =>
    Object.keys({ ...(q.guaranteed ?? {}), ...(q.max ?? {}) }).filter(
      (d) => d.startsWith("gpu") && ((q.guaranteed?.[d] ?? 0) > 0 || q.max?.[d] !== undefined || (q.usage?.[d] ?? 0) > 0),
    );
  const lentByDim = new Map<string, Map<string, number>>();
  const lent = (d: string) => {
    if (!lentByDim.has(d)) lentByDim.set(d, lentEstimate(items, d));
    return lentByDim.get(d)!;
  };
  const children = (parent: string) => items.filter((q) => q.parent === parent && q.name !== parent);
  const render = (q: Json, depth: number): preact.JSX.Element => (
    <li>
      <h3 class="queue-name">
        {q.name}
        {q.is_tenant ? " (tenant)" : ""}
      </h3>
      <p class="muted">
        {q.pending} pending, {q.running} running, weight {fmtNum(q.weight)}
      </p>
      {fair.get(q.name) && (
        <p class="fair-share" data-queue={q.name}>
          Fair share, last day: {fmtNum(fair.get(q.name).gpu_hours ?? 0)} GPU-hours used of {fmtNum(fair.get(q.name).entitled_gpu_hours ?? 0)} entitled
          {fair.get(q.name).share_of_entitlement !== null && fair.get(q.name).share_of_entitlement !== undefined
            ? ` (${Math.round(100 * fair.get(q.name).share_of_entitlement)}% of its entitlement)`
            : " (no guarantee)"}
        </p>
      )}
      {(dims(q).length ? dims(q) : ["gpu"]).map((d) => (
        <QueueBar q={q} dim={d} lent={admin ? lent(d).get(q.name) : undefined} />
      ))}
      {children(q.name).length > 0 && <ul class="tree">{children(q.name).map((c) => render(c, depth + 1))}</ul>}
    </li>
  );
  return (
    <>
      <h1>Queues</h1>
      <ErrorText error={queues.error} />
      <p class="legend" aria-hidden="true">
        <span class="swatch used" /> used within the guarantee <span class="swatch borrowed" /> borrowed
      </p>
      {tenants.map((t) => {
        const roots = items.filter((q) => q.tenant === t && (q.parent === t || q.parent === "" || q.parent === null) && q.name !== t);
        const tenantNode = items.find((q) => q.name === t && q.is_tenant);
        return (
          <section aria-labelledby={`tenant-${t}`}>
            <h2 id={`tenant-${t}`}>{t}</h2>
            {tenantNode && (dims(tenantNode).length ? dims(tenantNode) : []).map((d) => <QueueBar q={tenantNode} dim={d} />)}
            <ul class="tree">{roots.map((q) => render(q, 0))}</ul>
          </section>
        );
      })}
    </>
  );
}

// Free GPUs per model on ready nodes (healthy GPUs less those allocated; a node's allocation is
// counted against its GPUs' model), the largest free block on one node, and the rest: free GPUs
// that a job needing more than one node's block cannot use together.
function fragmentation(nodes: Json[]) {
  const per = new Map<string, { model: string; free: number; nodes: number; largest: number }>();
  for (const n of nodes) {
    const gpus: Json[] = n.gpus ?? [];
    const models = [...new Set(gpus.map((g) => g.model as string))];
    for (const m of models) {
      const f = per.get(m) ?? { model: m, free: 0, nodes: 0, largest: 0 };
      per.set(m, f);
      if (n.state !== "ready") continue;
      const healthy = gpus.filter((g) => g.model === m && g.healthy).length;
      const free = Math.max(0, healthy - (models.length === 1 ? (n.allocated?.gpus ?? 0) : 0));
      if (free <= 0) continue;
      f.free += free;
      f.nodes += 1;
      f.largest = Math.max(f.largest, free);
    }
  }
  return [...per.values()].sort((a, b) => a.model.localeCompare(b.model));
}

export function Nodes(props: { session: Session }) {
  const nodes = usePoll(() => get("/api/v1/nodes"), 10000);
  const frag = usePoll(() => get("/api/v1/reports/fragmentation?since=24h"), 30000, [], false);
  const [filter, setFilter] = useState({ model: "", state: "", rack: "" });
  const [error, setError] = useState("");
  const admin = props.session.role === "admin";
  if (!nodes.data) return <>{nodes.error ? <ErrorText error={nodes.error} /> : <Loading />}</>;
  const items: Json[] = nodes.data.items;
  const models = [...new Set(items.flatMap((n) => (n.gpus ?? []).map((g: Json) => g.model as string)))];
  const states = [...new Set(items.map((n) => n.state as string))];
  const racks = [...new Set(items.map((n) => (n.rack ?? "") as string).filter((r) => r))].sort();
  const shown = items.filter(
    (n) =>
      (!filter.model || (n.gpus ?? []).some((g: Json) => g.model === filter.model)) &&
      (!filter.state || n.state === filter.state) &&
      (!filter.rack || n.rack === filter.rack),
  );
  const fragRow: Json = frag.data?.rows?.[0];
  const act = async (name: string, verb: string) => {
    setError("");
    try {
      await api("POST", `/api/v1/nodes/${encodeURIComponent(name)}/${verb}`);
      nodes.reload();
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  return (
    <>
      <h1>Nodes</h1>
      <div class="filters">
        <span class="field">
          <label for="node-model">GPU model</label>
          <select id="node-model" value={filter.model} onChange={(e) => setFilter({ ...filter, model: (e.target as HTMLSelectElement).value })}>
            <option value="">any</option>
            {models.map((m) => (
              <option value={m}>{m}</option>
            ))}
          </select>
        </span>
        <span class="field">
          <label for="node-rack">Rack</label>
          <select id="node-rack" value={filter.rack} onChange={(e) => setFilter({ ...filter, rack: (e.target as HTMLSelectElement).value })}>
            <option value="">any</option>
            {racks.map((r) => (
              <option value={r}>{r}</option>
            ))}
          </select>
        </span>
        <span class="field">
          <label for="node-state">State</label>
          <select id="node-state" value={filter.state} onChange={(e) => setFilter({ ...filter, state: (e.target as HTMLSelectElement).value })}>
            <option value="">any</option>
            {states.map((s) => (
              <option value={s}>{s}</option>
            ))}
          </select>
        </span>
      </div>
      <ErrorText error={error || nodes.error} />
      <section aria-labelledby="fragmentation">
        <h2 id="fragmentation">Fragmentation per GPU model</h2>
        <div class="table-wrap">
          <table>
            <caption>Free GPUs now, on ready nodes: a job needing more than the largest block on one node waits</caption>
            <thead>
              <tr>
                <th scope="col">GPU model</th>
                <th scope="col">Free GPUs</th>
                <th scope="col">Nodes with free GPUs</th>
                <th scope="col">Largest free on one node</th>
                <th scope="col">Fragmented</th>
              </tr>
            </thead>
            <tbody>
              {fragmentation(items).map((f) => (
                <tr data-model={f.model}>
                  <td>{f.model}</td>
                  <td>{fmtNum(f.free)}</td>
                  <td>{f.nodes}</td>
                  <td>{fmtNum(f.largest)}</td>
                  <td>{f.free > 0 ? `${fmtNum(f.free - f.largest)} (${Math.round((100 * (f.free - f.largest)) / f.free)}%)` : "none free"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {fragRow && (
          <p class="frag-day">
            Last day, whole cluster: {fmtNum(fragRow.fragmented_gpu_hours ?? 0)} of {fmtNum(fragRow.free_gpu_hours ?? 0)} free GPU-hours fragmented,
            at most {fmtNum(fragRow.max_fragmented_gpus ?? 0)} GPUs (<Link href="/reports?report=fragmentation&since=24h">report</Link>)
          </p>
        )}
      </section>
      <div class="table-wrap">
        <table>
          <caption>Nodes and their GPUs</caption>
          <thead>
            <tr>
              <th scope="col">Node</th>
              <th scope="col">State</th>
              <th scope="col">Rack</th>
              <th scope="col">GPUs allocated</th>
              <th scope="col">GPUs (utilisation, memory used)</th>
              {admin && <th scope="col">Actions</th>}
            </tr>
          </thead>
          <tbody>
            {shown.map((n) => {
              const status = new Map<number, Json>((n.status?.gpus ?? []).map((g: Json) => [g.index, g]));
              return (
                <tr>
                  <td>{n.name}</td>
                  <td>
                    <StateBadge state={n.state} />
                  </td>
                  <td>{n.rack}</td>
                  <td>
                    {fmtNum(n.allocated?.gpus ?? 0)} of {(n.gpus ?? []).length}
                  </td>
                  <td>
                    <ul class="gpus">
                      {(n.gpus ?? []).map((g: Json) => {
                        const s = status.get(g.index) ?? {};
                        return (
                          <li class={`gpu ${g.healthy ? "" : "unhealthy"}`} title={`${g.model} #${g.index}`}>
                            {g.index}: {s.utilization_pct ?? 0}% · {s.memory_used_mib ?? 0} MiB{g.healthy ? "" : " · unhealthy"}
                          </li>
                        );
                      })}
                    </ul>
                  </td>
                  {admin && (
                    <td>
                      {n.state === "cordoned" || n.state === "draining" ? (
                        <button type="button" onClick={() => act(n.name, "uncordon")}>
                          Uncordon {n.name}
                        </button>
                      ) : (
                        <>
                          <button type="button" onClick={() => act(n.name, "cordon")}>
                            Cordon {n.name}
                          </button>{" "}
                          <button type="button" onClick={() => act(n.name, "drain")}>
                            Drain {n.name}
                          </button>
                        </>
                      )}
                    </td>
                  )}
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </>
  );
}

// The last hour of a service's traffic (the serving report, whole service and per revision)
// against its SLO: requests, errors, p99 latency and whether the SLO held.
function ServingFigures(props: { name: string; slo: Json }) {
  const report = usePoll(() => get(`/api/v1/reports/serving${query({ service: props.name, since: "1h" })}`), 30000, [props.name], false);
  const slo = props.slo;
  if (!report.data) return <ErrorText error={report.error} />;
  const rows: Json[] = (report.data.rows ?? []).filter((r: Json) => r.service === props.name);
  return (
    <>
      <h3>Requests, last hour</h3>
      <p class="muted">
        {slo
          ? `SLO: p${fmtNum(slo.percentile)} within ${fmtNum(slo.latency_ms)} ms, availability ${fmtNum(slo.availability)}`
          : "No SLO is set."}
      </p>
      {rows.length === 0 ? (
        <p class="muted">No requests in the last hour.</p>
      ) : (
        <table class="serving" data-service={props.name}>
          <caption>Requests of {props.name} in the last hour</caption>
          <thead>
            <tr>
              <th scope="col">Revision</th>
              <th scope="col">Requests</th>
              <th scope="col">Errors</th>
              <th scope="col">p99 (ms)</th>
              <th scope="col">SLO met (latency and availability)</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => {
              const over = slo && typeof r.p99_ms === "number" && r.p99_ms > slo.latency_ms;
              return (
                <tr>
                  <td>{r.revision === null || r.revision === undefined ? "all" : r.revision}</td>
                  <td>{fmtNum(r.requests)}</td>
                  <td>
                    {fmtNum(r.errors)}
                    {typeof r.error_rate === "number" ? ` (${fmtNum(100 * r.error_rate)}%)` : ""}
                  </td>
                  <td>
                    {fmtNum(r.p99_ms)}
                    {over ? ` (over the SLO's ${fmtNum(slo.latency_ms)})` : ""}
                  </td>
                  <td>{typeof r.slo_met === "number" ? `${Math.round(100 * r.slo_met)}% of minutes` : "no SLO"}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </>
  );
}

export function Services() {
  const services = usePoll(() => get("/api/v1/services"), 10000);
  if (!services.data) return <>{services.error ? <ErrorText error={services.error} /> : <Loading />}</>;
  const items: Json[] = services.data.items ?? [];
  return (
    <>
      <h1>Services</h1>
      {items.length === 0 && <p class="muted">No services.</p>}
      {items.map((s) => (
        <section aria-labelledby={`svc-${s.name}`} class="service">
          <h2 id={`svc-${s.name}`}>{s.name}</h2>
          <p>
            {s.tenant} / {s.queue}: {s.status?.ready ?? 0} ready of {s.status?.desired ?? 0} desired
            {s.status?.blocked ? ` (blocked: ${s.status.blocked})` : ""}
          </p>
          <ServingFigures name={s.name} slo={s.slo} />
          <h3>Traffic</h3>
          <ul>
            {(s.traffic ?? []).map((t: Json) => (
              <li>
                revision {t.revision}: {t.percent}%
              </li>
            ))}
          </ul>
          <table>
            <caption>Replicas of {s.name}</caption>
            <thead>
              <tr>
                <th scope="col">Job</th>
                <th scope="col">Revision</th>
                <th scope="col">State</th>
                <th scope="col">Node</th>
                <th scope="col">Reason</th>
              </tr>
            </thead>
            <tbody>
              {(s.status?.replicas ?? []).map((r: Json) => (
                <tr>
                  <td>{r.job}</td>
                  <td>{r.revision}</td>
                  <td>
                    <StateBadge state={r.state} />
                  </td>
                  <td>{r.node}</td>
                  <td>{r.reason}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {s.status?.autoscaling && (
            <>
              <h3>Autoscaling</h3>
              <p>
                desired {s.status.autoscaling.desired}, concurrency {fmtNum(s.status.autoscaling.concurrency)}, {fmtNum(s.status.autoscaling.rps)}{" "}
                requests/s{s.status.autoscaling.panicking ? ", panicking" : ""}
              </p>
              <ul>
                {(s.status.autoscaling.decisions ?? []).map((d: Json) => (
                  <li>
                    {fmtTime(new Date(d.at_ms).toISOString())}: {d.from} → {d.to}: {d.reason}
                  </li>
                ))}
              </ul>
            </>
          )}
          <h3>Events</h3>
          <ul>
            {(s.status?.events ?? []).slice(-10).map((e: Json) => (
              <li>
                {fmtTime(new Date(e.at_ms).toISOString())}: {e.message}
              </li>
            ))}
          </ul>
        </section>
      ))}
    </>
  );
}
