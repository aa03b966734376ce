// The console's shell: a header with the screens' nav and the connection status (always visible),
// the banner that says what is wrong when the link is down, the screen of the current hash route
// (`#/<screen>?<params>`), and this tab's confirmation dialog over whichever screen is open.
import type { ComponentType } from "preact";
import { useEffect, useState } from "preact/hooks";
import AgentScreen from "../screens/agent/index.tsx";
import CatalogScreen from "../screens/catalog/index.tsx";
import QueuesScreen from "../screens/data/index.tsx";
import TabScreen from "../screens/tab/index.tsx";
import TracesScreen from "../screens/traces/index.tsx";
import { Banner, Button, Dialog, Field } from "../ui/index.tsx";
import type { ConsoleConnection, ConnectionSnapshot } from "./connection.ts";
import { useConnection } from "./live.ts";
import type { TabWorker } from "./tab-worker.ts";
import type { ScreenProps } from "./types.ts";

export interface ScreenEntry {
  path: string;
  label: string;
  Screen: ComponentType<ScreenProps>;
}

export const SCREENS: ScreenEntry[] = [
  { path: "catalog", label: "Catalog", Screen: CatalogScreen },
  { path: "tab", label: "This tab is a worker", Screen: TabScreen },
  { path: "agent", label: "Agent", Screen: AgentScreen },
  { path: "queues", label: "Queues & state", Screen: QueuesScreen },
  { path: "traces", label: "Traces", Screen: TracesScreen },
];

interface Route {
  screen: string;
  params: URLSearchParams;
}

function parseHash(): Route {
  const h = location.hash.replace(/^#\/?/, "");
  const [path = "", query = ""] = h.split("?");
  const screen = SCREENS.some((s) => s.path === path) ? path : "catalog";
  return { screen, params: new URLSearchParams(query) };
}

export function navigate(to: string): void {
  location.hash = to.startsWith("/") ? to : `/${to}`;
}

const STATUS_TEXT: Record<ConnectionSnapshot["status"], string> = {
  connecting: "connecting…",
  open: "connected",
  reconnecting: "reconnecting…",
  refused: "token refused",
  unreachable: "engine unreachable",
};

function StatusPill({ snap, conn }: { snap: ConnectionSnapshot; conn: ConsoleConnection }) {
  const workerId = snap.status === "open" ? conn.iii.workerId : undefined;
  return (
    <div class="conn" role="status" aria-live="polite">
      <span id="status" class="pill" data-state={snap.sdkState} data-status={snap.status}>
        {STATUS_TEXT[snap.status]}
      </span>
      {workerId && (
        <code id="worker-id" title="this tab's worker id">
          {conn.workerName}
        </code>
      )}
    </div>
  );
}

function SignIn({ conn }: { conn: ConsoleConnection }) {
  const [credential, setCredential] = useState("");
  const [busy, setBusy] = useState(false);
  return (
    <form
      class="signin"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        await conn.signIn(credential);
        setBusy(false);
      }}
    >
      <Field
        label="Console credential"
        hint="Set on the Worker as CONSOLE_CREDENTIAL; kept for this tab only, exchanged for short-lived tokens."
      >
        {(id, d) => (
          <input
            id={id}
            aria-describedby={d}
            type="password"
            autoComplete="current-password"
            value={credential}
            onInput={(e) => setCredential((e.currentTarget as HTMLInputElement).value)}
            required
          />
        )}
      </Field>
      <Button type="submit" variant="primary" busy={busy}>
        Sign in
      </Button>
    </form>
  );
}

export function ConnectionBanner({ snap, conn }: { snap: ConnectionSnapshot; conn: ConsoleConnection }) {
  const since = snap.lostAt ? snap.lostAt.toLocaleTimeString() : undefined;
  if (snap.status === "open") return null;
  if (snap.status === "refused") {
    return (
      <Banner id="stale" kind="error" title="The engine refused this console's token">
        <p>{snap.message}</p>
        {since && <p>What is shown is from {since} or earlier.</p>}
        {snap.needsCredential && <SignIn conn={conn} />}
        {conn.usesGivenToken && <Button onClick={() => conn.forgetGivenToken()}>Forget the token this page was opened with</Button>}
      </Banner>
    );
  }
  if (snap.status === "unreachable") {
    return (
      <Banner id="stale" kind="error" title={snap.sdkState === "failed" ? "Cannot connect to the engine" : "Engine unreachable"}>
        <p>{snap.message}</p>
        <p>
          {since ? `Lost at ${since}: what is shown below is from before then, marked stale. ` : ""}
          {snap.sdkState === "failed"
            ? "The connection gave up; reload the page once the address is right."
            : "The page reconnects by itself."}
        </p>
      </Banner>
    );
  }
  if (!since) return null; // first connect, nothing shown yet to be stale
  return (
    <Banner id="stale" kind="warn" title={`Reconnecting (lost at ${since})`}>
      <p>What is shown below is from before then, marked stale until it is fetched again.</p>
    </Banner>
  );
}

function ConfirmDialog({ tab }: { tab: TabWorker }) {
  const [, force] = useState(0);
  useEffect(() => tab.subscribe(() => force((n) => n + 1)), [tab]);
  const c = tab.confirm;
  return (
    <Dialog
      id="confirm-dialog"
      open={!!c}
      title="A worker asks you to confirm"
      onClose={() => c?.answer(false)}
      actions={
        <>
          <Button variant="primary" id="confirm-yes" onClick={() => c?.answer(true)}>
            Confirm
          </Button>
          <Button id="confirm-no" onClick={() => c?.answer(false)}>
            Decline
          </Button>
        </>
      }
    >
      <p class="question">{c?.question}</p>
      <p class="hint">
        Called through the engine by <code>{c?.caller ?? "an unknown caller"}</code>; your answer goes back to it. Declined by itself at{" "}
        {c ? new Date(c.deadline).toLocaleTimeString() : ""}.
      </p>
    </Dialog>
  );
}

export function App({ conn, tab }: { conn: ConsoleConnection; tab: TabWorker }) {
  const snap = useConnection();
  const [route, setRoute] = useState(parseHash);
  useEffect(() => {
    const on = () => setRoute(parseHash());
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  const entry = SCREENS.find((s) => s.path === route.screen)!;
  useEffect(() => {
    document.title = `${entry.label} · iii-edge console`;
  }, [entry]);
  const { Screen } = entry;
  return (
    <>
      <a
        class="skip"
        href="#main"
        onClick={(e) => {
          e.preventDefault();
          document.getElementById("main")?.focus();
        }}
      >
        Skip to content
      </a>
      <header class="top">
        <div class="brand">
          <span class="logo" aria-hidden="true">
            ●
          </span>{" "}
          <strong>iii-edge</strong> <span class="sub">console</span>
        </div>
        <nav aria-label="Screens">
          <ul>
            {SCREENS.map((s) => (
              <li key={s.path}>
                <a href={`#/${s.path}`} aria-current={s.path === route.screen ? "page" : undefined}>
                  {s.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <StatusPill snap={snap} conn={conn} />
      </header>
      <ConnectionBanner snap={snap} conn={conn} />
      <main id="main" tabIndex={-1} data-screen={route.screen} data-stale={snap.status === "open" ? undefined : "true"}>
        <Screen iii={conn.iii} status={snap.status} params={route.params} navigate={navigate} />
      </main>
      <footer>
        Engine API: <code>POST /_iii/invoke</code> · health{" "}
        <a href="/healthz">
          <code>/healthz</code>
        </a>{" "}
        · workers dial <code>{`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/`}</code>
      </footer>
      <ConfirmDialog tab={tab} />
    </>
  );
}
