import { useState } from "preact/hooks";
import { get, Json, query } from "../api";
import { TimeChart } from "../chart";
import type { Session } from "../main";
import { Bar, ErrorText, fmtNum, fmtTime, Link, Loading, usePoll } from "../util";

const kPeriods = [
  { value: "1h", label: "Last hour", step: "5m" },
  { value: "6h", label: "Last 6 hours", step: "30m" },
  { value: "24h", label: "Last day", step: "1h" },
  { value: "7d", label: "Last 7 days", step: "1d" },
];

// GPUs now: from the nodes (allocated) and their reported status (busy: utilisation above zero).
function gpuFigures(nodes: Json[]) {
  let total = 0;
  let allocated = 0;
  let busy = 0;
  for (const n of nodes) {
    total += (n.gpus ?? []).length;
    allocated += n.allocated?.gpus ?? 0;
    for (const g of n.status?.gpus ?? []) if ((g.utilization_pct ?? 0) > 0) busy += 1;
  }
  return { total, allocated, busy };
}

// Tenants with a budget, the closest to their end first: spent at least 80%, or on course (the
// forecast) to spend it all before the period ends.
function BudgetList(props: { rows: Json[] }) {
  const rows = props.rows
    .filter((r) => typeof r.budget_gpu_hours === "number" && r.budget_gpu_hours > 0)
    .sort((a, b) => (b.budget_used_pct ?? 0) - (a.budget_used_pct ?? 0));
  if (rows.length === 0) return <p class="muted">No budgets.</p>;
  return (
    <ul class="budgets">
      {rows.map((r) => {
        const close = (r.budget_used_pct ?? 0) >= 80 || (r.forecast_gpu_hours ?? 0) >= r.budget_gpu_hours;
        return (
          <li data-tenant={r.tenant} data-close={close ? "true" : "false"}>
            <strong>{r.tenant}</strong>: {fmtNum(r.budget_used_gpu_hours ?? 0)} of {fmtNum(r.budget_gpu_hours)} GPU-hours used (
            {fmtNum(r.budget_used_pct ?? 0)}%), forecast {fmtNum(r.forecast_gpu_hours ?? 0)} by the period's end
            {close ? " · close to its end" : ""}
          </li>
        );
      })}
    </ul>
  );
}

export function Overview(props: { session: Session }) {
  const [period, setPeriod] = useState("1h");
  const admin = props.session.role === "admin";
  const now = usePoll(
    async () => {
      const [nodes, queues, pending] = await Promise.all([
        get("/api/v1/nodes"),
        get("/api/v1/queues"),
        get("/api/v1/jobs?state=pending&limit=5"),
      ]);
      return { nodes: nodes.items as Json[], queues: queues.items as Json[], pending: pending.items as Json[] };
    },
    10000,
  );
  const step = kPeriods.find((p) => p.value === period)!.step;
  const history = usePoll(
    () =>
      admin
        ? get(`/api/v1/reports/cluster${query({ since: period, step })}`)
        : get(`/api/v1/reports/usage${query({ since: period, step, group_by: "queue" })}`),
    15000,
    [period],
    false,
  );
  const failures = usePoll(() => get("/api/v1/reports/failures?since=24h"), 30000, [], false);
  // The usage report by tenant carries each budget's use in its current period and a forecast to
  // the period's end at the same rate.
  const budgets = usePoll(() => get("/api/v1/reports/usage?since=24h&group_by=tenant"), 30000, [], false);

  let chart = null;
  if (history.data) {
    const rows: Json[] = history.data.rows ?? [];
    const starts = [...new Set(rows.map((r) => r.period_start as string))].sort();
    const x = starts.map((s) => Date.parse(s) / 1000);
    if (admin) {
      chart = (
        <TimeChart
          title={`GPU-hours per ${step}: allocated and total`}
          x={x}
          series={[
            { label: "allocated", values: starts.map((s) => rows.find((r) => r.period_start === s)?.gpu_hours_allocated ?? null) },
            { label: "total", values: starts.map((s) => rows.find((r) => r.period_start === s)?.gpu_hours_total ?? null) },
          ]}
        />
      );
    } else {
      const sum = (s: string) => rows.filter((r) => r.period_start === s).reduce((a, r) => a + (r.gpu_hours ?? 0), 0);
      chart = <TimeChart title={`GPU-hours used per ${step}`} x={x} series={[{ label: "GPU-hours", values: starts.map(sum) }]} />;
    }
  }

  const figures = now.data ? gpuFigures(now.data.nodes) : null;
  const backlog = (now.data?.queues ?? []).filter((q) => !q.is_tenant);
  return (
    <>
      <h1>Overview</h1>
      <ErrorText error={now.error} />
      {!figures ? (
        <Loading />
      ) : (
        <section aria-labelledby="gpus-now">
          <h2 id="gpus-now">GPUs now</h2>
          <dl class="figures">
            <div>
              <dt>Total</dt>
              <dd data-figure="total">{figures.total}</dd>
            </div>
            <div>
              <dt>Allocated</dt>
              <dd data-figure="allocated">{fmtNum(figures.allocated)}</dd>
            </div>
            <div>
              <dt>Busy</dt>
              <dd data-figure="busy">{figures.busy}</dd>
            </div>
            <div>
              <dt>Idle while jobs wait</dt>
              <dd data-figure="idle-while-queued">
                {backlog.some((q) => q.pending > 0) ? fmtNum(Math.max(0, figures.total - figures.allocated)) : 0}
              </dd>
            </div>
          </dl>
        </section>
      )}
      <section aria-labelledby="history">
        <h2 id="history">History</h2>
        <label for="period">Period</label>{" "}
        <select id="period" value={period} onChange={(e) => setPeriod((e.target as HTMLSelectElement).value)}>
          {kPeriods.map((p) => (
            <option value={p.value}>{p.label}</option>
          ))}
        </select>
        <ErrorText error={history.error} />
        {chart}
      </section>
      <section aria-labelledby="backlog">
        <h2 id="backlog">Backlog by queue</h2>
        {backlog.length === 0 ? (
          <p class="muted">No queues.</p>
        ) : (
          <table>
            <caption>Pending and running jobs per queue</caption>
            <thead>
              <tr>
                <th scope="col">Queue</th>
                <th scope="col">Tenant</th>
                <th scope="col">Pending</th>
                <th scope="col">Running</th>
                <th scope="col">GPUs used</th>
              </tr>
            </thead>
            <tbody>
              {backlog.map((q) => (
                <tr>
                  <td>
                    <Link href={`/jobs?queue=${encodeURIComponent(q.name)}`}>{q.name}</Link>
                  </td>
                  <td>{q.tenant}</td>
                  <td>{q.pending}</td>
                  <td>{q.running}</td>
                  <td>
                    {fmtNum(q.usage?.gpu ?? 0)}
                    <Bar max={q.max?.gpu ?? q.guaranteed?.gpu ?? 0} parts={[{ value: q.usage?.gpu ?? 0, cls: "used" }]} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
      <section aria-labelledby="waits">
        <h2 id="waits">Longest waits now</h2>
        {(now.data?.pending ?? []).length === 0 ? (
          <p class="muted">No job is waiting.</p>
        ) : (
          <ul>
            {now.data!.pending.map((j) => (
              <li>
                <Link href={`/jobs/${j.id}`}>Job {j.id}</Link> in {j.queue}, since {fmtTime(j.submitted_at)}: {j.reason}
              </li>
            ))}
          </ul>
        )}
      </section>
      <section aria-labelledby="budgets">
        <h2 id="budgets">Budgets</h2>
        <ErrorText error={budgets.error} />
        {budgets.data && <BudgetList rows={budgets.data.rows ?? []} />}
      </section>
      <section aria-labelledby="failures">
        <h2 id="failures">Failures in the last day</h2>
        <ErrorText error={failures.error} />
        {failures.data && (
          <p>
            {(failures.data.rows ?? []).reduce((a: number, r: Json) => a + (r.failed ?? r.jobs ?? 0), 0)} failed jobs
            (<Link href="/reports?report=failures&since=24h">report</Link>)
          </p>
        )}
      </section>
    </>
  );
}
