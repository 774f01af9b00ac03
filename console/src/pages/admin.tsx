import { useState } from "preact/hooks";
import { api, ApiError, get, getText, Json } from "../api";
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

// A small form that posts its fields as JSON and shows the API's error under the field it names
// (other errors under the form). `body` turns the fields into the request's body.
function CreateForm(props: {
  id: string;
  title: string;
  path: string;
  fields: { name: string; label: string; options?: string[]; type?: string; hint?: string }[];
  body: (f: Record<string, string>) => Json;
  button: string;
  onCreated: (r: Json) => string;
}) {
  const empty = Object.fromEntries(props.fields.map((f) => [f.name, f.options ? f.options[0] : ""]));
  const [form, setForm] = useState<Record<string, string>>(empty);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [error, setError] = useState("");
  const [done, setDone] = useState("");
  const submit = async (e: Event) => {
    e.preventDefault();
    setErrors({});
    setError("");
    setDone("");
    try {
      const r = await api("POST", props.path, props.body(form));
      setDone(props.onCreated(r));
      setForm(empty);
    } catch (err) {
      if (err instanceof ApiError && err.field && props.fields.some((f) => f.name === err.field)) {
        setErrors({ [err.field]: err.message });
      } else {
        setError(errorMessage(err));
      }
    }
  };
  return (
    <form class="submit" onSubmit={submit} aria-labelledby={props.id}>
      <h3 id={props.id}>{props.title}</h3>
      {props.fields.map((f) => {
        const id = `${props.id}-${f.name}`;
        const invalid = errors[f.name] ? { "aria-describedby": `${id}-error`, "aria-invalid": true } : {};
        const set = (e: Event) => setForm({ ...form, [f.name]: (e.target as HTMLInputElement).value });
        return (
          <span class="field">
            <label for={id}>{f.label}</label>
            {f.options ? (
              <select id={id} value={form[f.name]} onChange={set} {...invalid}>
                {f.options.map((o) => (
                  <option value={o}>{o || "as the user's"}</option>
                ))}
              </select>
            ) : (
              <input id={id} type={f.type ?? "text"} value={form[f.name]} onInput={set} placeholder={f.hint} {...invalid} />
            )}
            {errors[f.name] && (
              <span class="error" id={`${id}-error`} role="alert">
                {errors[f.name]}
              </span>
            )}
          </span>
        );
      })}
      <button type="submit">{props.button}</button>
      <ErrorText error={error} />
      {done && (
        <p role="status" class="created">
          {done}
        </p>
      )}
    </form>
  );
}

const kRoles = ["member", "viewer", "tenant-admin", "admin"];

function Access() {
  const data = usePoll(async () => {
    const [users, tokens] = await Promise.all([get("/api/v1/users"), get("/api/v1/tokens")]);
    return { users: users.items as Json[], tokens: tokens.items as Json[] };
  }, 0, [], false);
  return (
    <section aria-labelledby="access">
      <h2 id="access">Users and tokens</h2>
      <div class="create-forms">
        <CreateForm
          id="new-user"
          title="Create a user"
          path="/api/v1/users"
          button="Create user"
          fields={[
            { name: "name", label: "User name" },
            { name: "tenant", label: "Tenant" },
            { name: "role", label: "Role", options: kRoles },
          ]}
          body={(f) => ({ name: f.name, role: f.role, ...(f.tenant ? { tenant: f.tenant } : {}) })}
          onCreated={(r) => {
            data.reload();
            return `Created user ${r.name ?? ""}.`;
          }}
        />
        <CreateForm
          id="new-token"
          title="Create a token"
          path="/api/v1/tokens"
          button="Create token"
          fields={[
            { name: "user", label: "For user" },
            { name: "role", label: "Token role", options: ["", ...kRoles] },
            { name: "expires_in_seconds", label: "Expires in (seconds)", type: "number", hint: "never" },
          ]}
          body={(f) => ({
            user: f.user,
            ...(f.role ? { role: f.role } : {}),
            ...(f.expires_in_seconds ? { expires_in_seconds: Number(f.expires_in_seconds) } : {}),
          })}
          onCreated={(r) => {
            data.reload();
            return `Created token ${r.id ?? ""}: ${r.token} (shown once: copy it now).`;
          }}
        />
      </div>
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
