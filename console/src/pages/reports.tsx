import { useState } from "preact/hooks";
import { get, Json, query } from "../api";
import { TimeChart } from "../chart";
import { ErrorText, Loading, Table, usePoll } from "../util";

const kReports = ["usage", "wait", "failures", "preemptions", "fairness", "cluster", "fragmentation", "idle-while-queued", "serving"];
const kGroups = ["", "tenant", "queue", "user", "type", "gpu_model"];

export function Reports() {
  const p = new URLSearchParams(location.search);
  const [params, setParams] = useState({
    report: p.get("report") ?? "usage",
    since: p.get("since") ?? "24h",
    group_by: p.get("group_by") ?? "",
    step: p.get("step") ?? "1h",
  });
  const q = { since: params.since, group_by: params.report === "serving" ? undefined : params.group_by, step: params.step };
  const data = usePoll(() => get(`/api/v1/reports/${params.report}${query(q)}`), 30000, [JSON.stringify(params)], false);
  const set = (k: string) => (e: Event) => setParams({ ...params, [k]: (e.target as HTMLInputElement).value });
  const rows: Json[] = data.data?.rows ?? [];
  const columns: string[] = data.data?.columns ?? [];
  // The chart: the first numeric column after the period and the grouping, summed per period.
  const numeric = columns.find((c) => c !== "period_start" && rows.some((r) => typeof r[c] === "number"));
  const starts = [...new Set(rows.map((r) => r.period_start as string).filter(Boolean))].sort();
  return (
    <>
      <h1>Reports</h1>
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <span class="field">
          <label for="report-name">Report</label>
          <select id="report-name" value={params.report} onChange={set("report")}>
            {kReports.map((r) => (
              <option value={r}>{r}</option>
            ))}
          </select>
        </span>
        <span class="field">
          <label for="report-since">Period (e.g. 24h, 7d)</label>
          <input id="report-since" value={params.since} onChange={set("since")} />
        </span>
        <span class="field">
          <label for="report-group">Group by</label>
          <select id="report-group" value={params.group_by} onChange={set("group_by")}>
            {kGroups.map((g) => (
              <option value={g}>{g || "default"}</option>
            ))}
          </select>
        </span>
        <span class="field">
          <label for="report-step">Step (e.g. 1h, 1d)</label>
          <input id="report-step" value={params.step} onChange={set("step")} />
        </span>
        <a class="button" href={`/api/v1/reports/${params.report}${query({ ...q, format: "csv" })}`} download={`${params.report}.csv`}>
          Download CSV
        </a>
      </form>
      <ErrorText error={data.error} />
      {!data.data ? (
        !data.error && <Loading />
      ) : (
        <>
          {numeric && starts.length > 0 && (
            <TimeChart
              title={`${params.report}: ${numeric} per ${params.step}`}
              x={starts.map((s) => Date.parse(s) / 1000)}
              series={[
                {
                  label: numeric,
                  values: starts.map((s) => rows.filter((r) => r.period_start === s).reduce((a, r) => a + (r[numeric] ?? 0), 0)),
                },
              ]}
            />
          )}
          <Table caption={`${params.report} from ${data.data.from} to ${data.data.to}`} columns={columns} rows={rows} empty="No rows in this period." />
        </>
      )}
    </>
  );
}
