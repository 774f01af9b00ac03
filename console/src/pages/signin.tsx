import { useState } from "preact/hooks";
import { api, Json } from "../api";
import { errorMessage } from "../util";

export function SignIn(props: { onSignedIn: (s: Json) => void }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
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
  return (
    <main id="main" class="signin">
      <h1>Sign in to Arbiter</h1>
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
