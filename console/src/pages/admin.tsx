import { useState } from "preact/hooks";
import { api, get, getText, Json } from "../api";
import type { Session } from "../main";
import { ErrorText, errorMessage, fmtTime, Table, usePoll } from "../util";

export function Admin(props: { session: Session }) {
  if (props.session.role !== "admin") {
    return (
      <>
        <h1>Admin</h1>
        <p>Only admins may see this page.</p>
      </>
    );
  }
  return (
    <>
      <h1>Admin</h1>
      <Config />
      <Access />
      <Audit />
    </>
  );
}

function Config() {
  const [yaml, setYaml] = useState<string | null>(null);
  const [diff, setDiff] = useState<Json>(null);
  const [error, setError] = useState("");
  const [done, setDone] = useState("");
  const load = async () => {
    try {
      setYaml(await getText("/api/v1/config"));
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  if (yaml === null && !error) load();
  const put = async (dry: boolean) => {
    setError("");
    setDone("");
    try {
      const r = await api("PUT", `/api/v1/config?dry_run=${dry}`, yaml ?? "", "application/yaml");
      if (dry) setDiff(r);
      else {
        setDiff(null);
        setDone("Applied.");
      }
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  return (
    <section aria-labelledby="config">
      <h2 id="config">Configuration</h2>
      <label for="config-yaml">Configuration (YAML)</label>
      <textarea id="config-yaml" rows={16} value={yaml ?? ""} onInput={(e) => setYaml((e.target as HTMLTextAreaElement).value)} />
      <div class="actions">
        <button type="button" onClick={() => put(true)}>
          Dry run
        </button>
        <button type="button" disabled={diff === null} onClick={() => put(false)}>
          Apply
        </button>
      </div>
      <ErrorText error={error} />
      {done && <p role="status">{done}</p>}
      {diff && (
        <pre class="diff" tabIndex={0} role="region" aria-label="What the configuration would change">
          {JSON.stringify(diff, null, 2)}
        </pre>
      )}
    </section>
  );
}

function Access() {
  const data = usePoll(async () => {
    const [users, tokens] = await Promise.all([get("/api/v1/users"), get("/api/v1/tokens")]);
    return { users: users.items as Json[], tokens: tokens.items as Json[] };
  }, 0, [], false);
  return (
    <section aria-labelledby="access">
      <h2 id="access">Users and tokens</h2>
      <ErrorText error={data.error} />
      {data.data && (
        <>
          <Table caption="Users" columns={Object.keys(data.data.users[0] ?? { name: 0 })} rows={data.data.users} />
          <Table caption="Tokens" columns={["id", "user", "role", "tenant", "state", "created_at", "expires_at"]} rows={data.data.tokens} />
        </>
      )}
    </section>
  );
}

function Audit() {
  const [search, setSearch] = useState("");
  const data = usePoll(() => get("/api/v1/audit?limit=1000"), 10000, [], false);
  const needle = search.trim().toLowerCase();
  const rows: Json[] = (data.data?.items ?? [])
    .filter((a: Json) => !needle || JSON.stringify(a).toLowerCase().includes(needle))
    .slice(-200)
    .reverse()
    .map((a: Json) => ({ ...a, at: fmtTime(a.at) }));
  return (
    <section aria-labelledby="audit">
      <h2 id="audit">Audit log</h2>
      <label for="audit-search">Search the audit log</label> <input id="audit-search" type="search" value={search} onInput={(e) => setSearch((e.target as HTMLInputElement).value)} />
      <ErrorText error={data.error} />
      <Table caption="Latest audit records, newest first" columns={["seq", "at", "actor", "action", "target", "result"]} rows={rows} />
    </section>
  );
}
