import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import "./style.css";
import { api, get, Json, onUnauthenticated, setCsrfToken } from "./api";
import { Link, navigate, startLive, stopLive } from "./util";
import { SignIn } from "./pages/signin";
import { Overview } from "./pages/overview";
import { JobPage, Jobs } from "./pages/jobs";
import { Nodes, Queues, Services } from "./pages/cluster";
import { Reports } from "./pages/reports";
import { Admin } from "./pages/admin";
import { Approvals, useApprovalCount } from "./pages/approvals";

export interface Session {
  user: string;
  tenant: string;
  role: string;
}

const kPages = [
  { path: "/overview", name: "Overview" },
  { path: "/jobs", name: "Jobs" },
  { path: "/queues", name: "Queues" },
  { path: "/nodes", name: "Nodes" },
  { path: "/services", name: "Services" },
  { path: "/reports", name: "Reports" },
  { path: "/approvals", name: "Approvals" },
  { path: "/admin", name: "Admin", admin: true },
];

function usePath() {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const on = () => setPath(location.pathname);
    addEventListener("popstate", on);
    return () => removeEventListener("popstate", on);
  }, []);
  return path;
}

function Page(props: { path: string; session: Session }) {
  const p = props.path;
  const job = p.match(/^\/jobs\/(\d+)$/);
  if (job) return <JobPage id={job[1]} session={props.session} />;
  if (p === "/" || p === "/overview" || p.startsWith("/sign-in")) return <Overview session={props.session} />;
  if (p === "/jobs") return <Jobs session={props.session} />;
  if (p === "/queues") return <Queues session={props.session} />;
  if (p === "/nodes") return <Nodes session={props.session} />;
  if (p === "/services" || p.startsWith("/services/")) return <Services />;
  if (p === "/reports") return <Reports />;
  if (p === "/admin") return <Admin session={props.session} />;
  if (p === "/approvals") return <Approvals session={props.session} />;
  return (
    <>
      <h1>Not found</h1>
      <p>No page at {p}.</p>
    </>
  );
}

// The number of approvals the signed-in user may decide, beside the Approvals link.
function ApprovalBadge(props: { session: Session }) {
  const n = useApprovalCount(props.session);
  if (n === 0) return null;
  return (
    <>
      <span class="badge" data-approvals={n} aria-hidden="true">
        {n}
      </span>
      <span class="visually-hidden">{` (${n} awaiting your decision)`}</span>
    </>
  );
}

function App() {
  const path = usePath();
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  useEffect(() => {
    onUnauthenticated(() => {
      stopLive();
      setSession(null);
    });
    get("/api/v1/session")
      .then((s: Json) => {
        if (s.session) setCsrfToken(s.csrf_token);
        setSession(s.session ? s : null);
      })
      .catch(() => setSession(null));
  }, []);
  useEffect(() => {
    const name = kPages.find((p) => path.startsWith(p.path))?.name ?? "Overview";
    document.title = session ? `${name} · Arbiter` : "Sign in · Arbiter";
  }, [path, session]);

  useEffect(() => {
    if (session) startLive();
  }, [session]);

  if (session === undefined) return <p class="muted">Loading…</p>;
  if (session === null) {
    return (
      <SignIn
        onSignedIn={(s: Json, returnTo?: string) => {
          setCsrfToken(s.csrf_token);
          setSession(s);
          if (returnTo) {
            // The callback's URL (a used code) leaves the history.
            history.replaceState(null, "", returnTo);
            dispatchEvent(new PopStateEvent("popstate"));
          }
          else if (location.pathname.startsWith("/sign-in")) navigate("/overview");
        }}
      />
    );
  }
  const signOut = async () => {
    stopLive();
    try {
      await api("DELETE", "/api/v1/session");
    } finally {
      setCsrfToken("");
      setSession(null);
    }
  };
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header>
        <span class="brand">Arbiter</span>
        <nav aria-label="Main">
          <ul>
            {kPages
              .filter((p) => !p.admin || session.role === "admin")
              .map((p) => (
                <li>
                  <Link href={p.path} current={path.startsWith(p.path) || (p.path === "/overview" && path === "/")}>
                    {p.name}
                    {p.path === "/approvals" && <ApprovalBadge session={session} />}
                  </Link>
                </li>
              ))}
          </ul>
        </nav>
        <span class="who">
          {session.user}
          {session.tenant ? ` · ${session.tenant}` : ""} · {session.role}
        </span>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main id="main">
        <Page path={path} session={session} />
      </main>
    </>
  );
}

render(<App />, document.getElementById("app")!);
