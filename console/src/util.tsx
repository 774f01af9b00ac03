import { useEffect, useRef, useState } from "preact/hooks";
import type { ComponentChildren } from "preact";
import { ApiError, Json } from "./api";

// Navigation without a reload: every page is a URL a person can share.
export function navigate(path: string) {
  if (path === location.pathname + location.search) return;
  history.pushState(null, "", path);
  dispatchEvent(new PopStateEvent("popstate"));
}

export function Link(props: { href: string; children: ComponentChildren; class?: string; current?: boolean }) {
  return (
    <a
      href={props.href}
      class={props.class}
      aria-current={props.current ? "page" : undefined}
      onClick={(e) => {
        if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
        e.preventDefault();
        navigate(props.href);
      }}
    >
      {props.children}
    </a>
  );
}

// Live updates: one stream of the API's server-sent events (GET /api/v1/events: job, node and
// configuration changes the caller may see) while signed in and the page is shown; every change
// makes the pages that listen load their data again (at most every 250 ms). The stream is closed
// when the page is hidden (pagehide), so that a page kept for the back button holds no
// connection.
const listeners = new Set<() => void>();
let source: EventSource | null = null;
let wanted = false;
let notifyTimer = 0;
function notify() {
  if (notifyTimer) return;
  notifyTimer = window.setTimeout(() => {
    notifyTimer = 0;
    listeners.forEach((l) => l());
  }, 250);
}
// After a change the event stream may not report (an approval of a service or a quota request):
// the pages that listen load their data again.
export function notifyChange() {
  notify();
}
function open() {
  if (source || !wanted) return;
  source = new EventSource("/api/v1/events");
  for (const kind of ["job", "node", "config"]) source.addEventListener(kind, notify);
}
function close() {
  source?.close();
  source = null;
}
addEventListener("pagehide", close);
addEventListener("pageshow", open);
export function startLive() {
  wanted = true;
  open();
}
export function stopLive() {
  wanted = false;
  close();
}

// Loads `load()` now, on every change the event stream reports (`live`), again every `everyMs`
// (0: never; for what the stream does not cover, such as logs and samples) and whenever `deps`
// change.
export function usePoll<T>(load: () => Promise<T>, everyMs: number, deps: unknown[] = [], live = true) {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string>("");
  const alive = useRef(true);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    alive.current = true;
    let timer = 0;
    let busy = false;
    const run = async () => {
      if (busy) return;
      busy = true;
      window.clearTimeout(timer);
      try {
        const d = await load();
        if (!alive.current) return;
        setData(d);
        setError("");
      } catch (e) {
        if (!alive.current) return;
        setError(e instanceof Error ? e.message : String(e));
      }
      busy = false;
      if (alive.current && everyMs > 0) timer = window.setTimeout(run, everyMs);
    };
    run();
    if (live) listeners.add(run);
    return () => {
      alive.current = false;
      listeners.delete(run);
      window.clearTimeout(timer);
    };
  }, [...deps, tick]);
  return { data, error, reload: () => setTick((t) => t + 1) };
}

export function ErrorText(props: { error: string }) {
  if (!props.error) return null;
  return (
    <p class="error" role="alert">
      {props.error}
    </p>
  );
}

export function Loading() {
  return <p class="muted">Loading…</p>;
}

export function errorMessage(e: unknown): string {
  if (e instanceof ApiError) return e.field ? `${e.field}: ${e.message}` : e.message;
  return e instanceof Error ? e.message : String(e);
}

export function fmtTime(s: string | null | undefined): string {
  if (!s) return "";
  const d = new Date(s);
  return isNaN(d.getTime()) ? s : d.toLocaleString();
}

export function fmtNum(v: Json, digits = 2): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(digits);
  return String(v);
}

export function StateBadge(props: { state: string }) {
  return <span class={`state state-${props.state}`}>{props.state}</span>;
}

// A horizontal bar of parts of `max`; the numbers are written beside it for every reader.
export function Bar(props: { parts: { value: number; cls: string }[]; max: number }) {
  const max = props.max > 0 ? props.max : 1;
  return (
    <div class="bar" aria-hidden="true">
      {props.parts.map((p) => (
        <span class={p.cls} style={{ width: `${Math.min(100, (100 * Math.max(0, p.value)) / max)}%` }} />
      ))}
    </div>
  );
}

export function Table(props: { columns: string[]; rows: Json[]; caption: string; empty?: string }) {
  if (props.rows.length === 0) return <p class="muted">{props.empty ?? "Nothing to show."}</p>;
  return (
    <div class="table-wrap">
      <table>
        <caption>{props.caption}</caption>
        <thead>
          <tr>
            {props.columns.map((c) => (
              <th scope="col">{c}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.map((r) => (
            <tr>
              {props.columns.map((c) => (
                <td>{typeof r[c] === "object" && r[c] !== null ? JSON.stringify(r[c]) : fmtNum(r[c], 3)}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
