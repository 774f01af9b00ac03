import { useEffect, useState } from "preact/hooks";
import { api, get, Json } from "../api";
import { errorMessage } from "../util";
import { finishSso, kCallbackPath, OidcClientConfig, startSso } from "../sso";

export function SignIn(props: { onSignedIn: (s: Json, returnTo?: string) => void }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const [oidc, setOidc] = useState<OidcClientConfig | null>(null);
  const callback = location.pathname === kCallbackPath;
  useEffect(() => {
    if (callback) {
      setBusy(true);
      finishSso()
        .then(({ session, returnTo }) => props.onSignedIn(session, returnTo))
        .catch((err) => {
          history.replaceState(null, "", "/sign-in");
          setError(errorMessage(err));
          setBusy(false);
        });
    }
    get("/api/v1/auth/config")
      .then((c: Json) => setOidc(c.oidc ?? null))
      .catch(() => setOidc(null));
  }, []);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError("");
    try {
      props.onSignedIn(await api("POST", "/api/v1/session", { token: token.trim() }));
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };
  const sso = async () => {
    setBusy(true);
    setError("");
    try {
      const here = location.pathname.startsWith("/sign-in") ? "/overview" : location.pathname + location.search;
      await startSso(oidc!, here);
    } catch (err) {
      setError(errorMessage(err));
      setBusy(false);
    }
  };
  return (
    <main id="main" class="signin">
      <h1>Sign in to Arbiter</h1>
      {oidc && (
        <>
          <button id="sso" type="button" disabled={busy} onClick={sso}>
            Sign in with SSO
          </button>
          <p class="muted">Through {oidc.issuer}</p>
        </>
      )}
      {callback && busy && <p class="muted">Signing in…</p>}
      <form onSubmit={submit}>
        <label for="token">Token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="off"
          required
          value={token}
          onInput={(e) => setToken((e.target as HTMLInputElement).value)}
          aria-describedby="token-help"
        />
        <p id="token-help" class="muted">
          An API token (arb_…): `arbiter token create`, or DATA_DIR/admin.token for the first admin.
        </p>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}
