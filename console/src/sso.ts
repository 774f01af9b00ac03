// Sign-in through the company's identity provider (docs/identity.md, "Console: Sign in with
// SSO"): the OAuth 2.0 authorization code flow with PKCE (S256), run in the browser. The verifier
// and state wait in this tab's sessionStorage while the browser is at the provider; back at
// /sign-in/callback the code is traded for tokens at the provider's token endpoint, and the ID
// token becomes a console session (POST /api/v1/session), as an API token does.
import { api, Json } from "./api";

export interface OidcClientConfig {
  issuer: string;
  client_id: string;
  authorization_endpoint: string | null;
  token_endpoint: string | null;
}

const kPending = "arbiter.sso";
export const kCallbackPath = "/sign-in/callback";

function base64url(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomString(): string {
  const b = new Uint8Array(32);
  crypto.getRandomValues(b);
  return base64url(b);
}

function redirectUri(): string {
  return `${location.origin}${kCallbackPath}`;
}

// Sends the browser to the provider; it comes back to /sign-in/callback.
export async function startSso(oidc: OidcClientConfig, returnTo: string): Promise<void> {
  if (!oidc.authorization_endpoint || !oidc.token_endpoint) {
    throw new Error(`the identity provider ${oidc.issuer} could not be reached: try again shortly`);
  }
  const verifier = randomString();
  const state = randomString();
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  sessionStorage.setItem(
    kPending,
    JSON.stringify({ verifier, state, token_endpoint: oidc.token_endpoint, client_id: oidc.client_id, returnTo }),
  );
  const url = new URL(oidc.authorization_endpoint);
  url.searchParams.set("client_id", oidc.client_id);
  url.searchParams.set("response_type", "code");
  url.searchParams.set("redirect_uri", redirectUri());
  url.searchParams.set("scope", "openid profile");
  url.searchParams.set("state", state);
  url.searchParams.set("code_challenge", base64url(new Uint8Array(digest)));
  url.searchParams.set("code_challenge_method", "S256");
  location.assign(url.toString());
}

// At /sign-in/callback: the session made from the provider's answer, and where to go next.
export async function finishSso(): Promise<{ session: Json; returnTo: string }> {
  const params = new URLSearchParams(location.search);
  const pendingText = sessionStorage.getItem(kPending);
  sessionStorage.removeItem(kPending);
  if (params.get("error")) {
    throw new Error(`the identity provider refused: ${params.get("error_description") || params.get("error")}`);
  }
  if (!pendingText) throw new Error("no sign-in was started in this tab: sign in again");
  const pending = JSON.parse(pendingText);
  if (!params.get("state") || params.get("state") !== pending.state) {
    throw new Error("the sign-in's state does not match (another tab's, or forged): sign in again");
  }
  const code = params.get("code");
  if (!code) throw new Error("the identity provider sent no code: sign in again");
  const res = await fetch(pending.token_endpoint, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: redirectUri(),
      client_id: pending.client_id,
      code_verifier: pending.verifier,
    }).toString(),
  });
  const tokens = await res.json().catch(() => ({}));
  if (!res.ok || !tokens.id_token) {
    throw new Error(
      `the identity provider did not issue an ID token: ${tokens.error_description || tokens.error || `HTTP ${res.status}`}`,
    );
  }
  const session = await api("POST", "/api/v1/session", { token: tokens.id_token });
  return { session, returnTo: pending.returnTo || "/overview" };
}
