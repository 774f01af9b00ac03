import { useState } from "preact/hooks";
import { api, get, Json } from "../api";
import type { Session } from "../main";
import { ErrorText, errorMessage, Link, Loading, notifyChange, usePoll } from "../util";

// What awaits the signed-in user's decision (docs/approvals.md): the jobs and services
// GET /api/v1/approvals lists for them, and for admins the pending quota requests they may decide.
export async function loadApprovals(admin: boolean): Promise<{ items: Json[]; quota: Json[] }> {
  const items = (await get("/api/v1/approvals")).items as Json[];
  const quota = admin ? ((await get("/api/v1/quota-requests")).items as Json[]).filter((q) => q.may_decide) : [];
  return { items, quota };
}

// The number the navigation's badge shows.
export function useApprovalCount(session: Session): number {
  const { data } = usePoll(() => loadApprovals(session.role === "admin"), 10_000, [session.user]);
  return data ? data.items.length + data.quota.length : 0;
}

function ago(ms: number | null | undefined): string {
  if (!ms) return "";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

function expires(ms: number | null | undefined): string {
  if (!ms) return "never";
  const left = ms - Date.now();
  return left <= 0 ? "now" : `in ${ago(Date.now() - left)}`;
}

function amounts(m: Json): string {
  if (!m) return "";
  return Object.entries(m)
    .map(([k, v]) => `${k} ${v === null ? "none" : v}`)
    .join(", ");
}

// One decision: a comment field and the Approve and Reject buttons; `path` is the object's
// route (POST PATH/approve|reject).
function Decide(props: { path: string; label: string; onDone: (msg: string) => void }) {
  const [comment, setComment] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const id = `comment-${props.path.replace(/[^a-z0-9]+/gi, "-")}`;
  const decide = async (action: "approve" | "reject") => {
    setBusy(true);
    setError("");
    try {
      await api("POST", `${props.path}/${action}`, comment ? { comment } : {});
      props.onDone(`${props.label}: ${action === "approve" ? "approved" : "rejected"}.`);
      notifyChange();
    } catch (e) {
      setError(errorMessage(e));
    }
    setBusy(false);
  };
  return (
    <div class="decide">
      <label for={id}>Comment on {props.label}</label>
      <input id={id} type="text" placeholder="Comment (optional)" maxLength={1000} value={comment} onInput={(e) => setComment((e.target as HTMLInputElement).value)} />
      <button type="button" disabled={busy} onClick={() => decide("approve")}>
        Approve
      </button>
      <button type="button" disabled={busy} onClick={() => decide("reject")}>
        Reject
      </button>
      <ErrorText error={error} />
    </div>
  );
}

export function Approvals(props: { session: Session }) {
  const admin = props.session.role === "admin";
  const { data, error, reload } = usePoll(() => loadApprovals(admin), 10_000, [props.session.user]);
  const [done, setDone] = useState("");
  const onDone = (msg: string) => {
    setDone(msg);
    reload();
  };
  return (
    <>
      <h1>Approvals</h1>
      <p class="muted">
        What awaits your decision: big jobs and services an approval rule holds{admin ? ", and quota requests" : ""}. Nobody decides
        on their own.
      </p>
      <ErrorText error={error} />
      {done && (
        <p class="done" role="status">
          {done}
        </p>
      )}
      {!data ? (
        <Loading />
      ) : (
        <>
          <section aria-labelledby="approvals-work">
            <h2 id="approvals-work">Jobs and services</h2>
            {data.items.length === 0 ? (
              <p class="muted">Nothing awaits your approval.</p>
            ) : (
              <div class="table-wrap">
                <table>
                  <caption>Jobs and services awaiting your approval</caption>
                  <thead>
                    <tr>
                      {["Kind", "Name", "Tenant", "User", "Rule", "GPUs", "Waiting", "Expires", "Decision"].map((c) => (
                        <th scope="col">{c}</th>
                      ))}
                    </tr>
                  </thead>
                  <tbody>
                    {data.items.map((i: Json) => {
                      const job = i.kind !== "service";
                      const label = job ? `job ${i.job}` : `service ${i.id}`;
                      return (
                        <tr data-approval={job ? `job/${i.job}` : `service/${i.id}`}>
                          <td>{job ? "job" : "service"}</td>
                          <td>{job ? <Link href={`/jobs/${i.job}`}>{`${i.job} ${i.name ?? ""}`.trim()}</Link> : i.name}</td>
                          <td>{i.tenant}</td>
                          <td>{i.user}</td>
                          <td>{i.rule}</td>
                          <td>{i.gpus}</td>
                          <td>{ago(i.requested_at_ms)}</td>
                          <td>{expires(i.expires_at_ms)}</td>
                          <td>
                            <Decide path={job ? `/api/v1/jobs/${i.job}` : `/api/v1/services/${i.id}`} label={label} onDone={onDone} />
                          </td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
              </div>
            )}
          </section>
          {admin && (
            <section aria-labelledby="approvals-quota">
              <h2 id="approvals-quota">Quota requests</h2>
              {data.quota.length === 0 ? (
                <p class="muted">No quota request awaits your decision.</p>
              ) : (
                <div class="table-wrap">
                  <table>
                    <caption>Quota requests awaiting an admin's decision</caption>
                    <thead>
                      <tr>
                        {["Request", "Queue", "Tenant", "User", "Guaranteed", "Until", "Reason", "Decision"].map((c) => (
                          <th scope="col">{c}</th>
                        ))}
                      </tr>
                    </thead>
                    <tbody>
                      {data.quota.map((q: Json) => (
                        <tr data-approval={`quota/${q.id}`}>
                          <td>{q.id}</td>
                          <td>{q.queue}</td>
                          <td>{q.tenant}</td>
                          <td>{q.user}</td>
                          <td>{amounts(q.guaranteed)}</td>
                          <td>{new Date(q.until_ms).toLocaleString()}</td>
                          <td>{q.reason}</td>
                          <td>
                            <Decide path={`/api/v1/quota-requests/${q.id}`} label={`quota request ${q.id}`} onDone={onDone} />
                          </td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
              )}
            </section>
          )}
        </>
      )}
    </>
  );
}
