// The console's only way to the server: the public REST API, through the session cookie, with
// the session's CSRF token on every change. Nothing here decides what a user may see or do: the
// API's own checks do.

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
    public field: string,
  ) {
    super(message);
  }
}

let csrfToken = "";
let onSignedOut: () => void = () => {};

export function setCsrfToken(token: string) {
  csrfToken = token;
}

// Called when the API answers 401: the session ended (signed out elsewhere, expired, revoked).
export function onUnauthenticated(fn: () => void) {
  onSignedOut = fn;
}

async function request(method: string, path: string, body?: unknown, type?: string) {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers["Content-Type"] = type ?? "application/json";
  if (method !== "GET") headers["X-CSRF-Token"] = csrfToken;
  const res = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  if (!res.ok) {
    let code = "error";
    let message = `HTTP ${res.status}`;
    let field = "";
    try {
      const e = (await res.json()).error;
      code = e.code ?? code;
      message = e.message ?? message;
      field = e.field ?? "";
    } catch {
      // not an error body
    }
    if (res.status === 401 && path !== "/api/v1/session") onSignedOut();
    throw new ApiError(res.status, code, message, field);
  }
  return res;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export async function api(method: string, path: string, body?: unknown, type?: string): Promise<Json> {
  const res = await request(method, path, body, type);
  return res.json();
}

export async function get(path: string): Promise<Json> {
  return api("GET", path);
}

export async function getText(path: string): Promise<string> {
  const res = await request("GET", path);
  return res.text();
}

export function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}
