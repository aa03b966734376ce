// The agent console: pick a provider and model, start a turn, watch it stream, answer
// approvals (in any tab watching the session — the decision is a harness call and every follower
// sees its events), steer, stop, see the budget, the session tree (fork, switch branch, resume) and
// the sub-agents. It talks only to the engine, through this tab's worker connection and the
// engine's stream socket. `#/agent?session_id=<sid>` opens a session.
import type {
  ApprovalSettings,
  BudgetView,
  PendingApprovalRecord,
  SessionTree,
  SubAgentChildView,
  TurnStateView,
} from "@iii-edge/protocol/harness";
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { sessionTitle, shortId, withFirstTexts } from "../../app/sessions.ts";
import type { ScreenProps } from "../../app/types.ts";
import { harness, problem, type SessionSummary } from "./calls.ts";
import { followSession } from "./follow.ts";
import { emptyView, isRunning, withEvents, withHistory, withState, type CallView, type SessionView } from "./model.ts";
import { loadSettings, saveSettings, SettingsPanel, type RunSettings } from "./settings.tsx";
import { ApprovalsPanel, BudgetPanel, ChildrenPanel, TreePanel } from "./side.tsx";
import { AGENT_CSS } from "./style.ts";
import { Transcript } from "./transcript.tsx";
import { Banner } from "../../ui/index.tsx";

/** The session list is re-read this often (sessions started elsewhere show up without a click). */
const SESSIONS_REFRESH_MS = 10_000;
/** Events this close together (a turn's end, a child's burst) cause one reload of the side panels. */
const SIDE_RELOAD_DEBOUNCE_MS = 200;

const newSessionId = () => `console-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;

export default function AgentScreen({ iii, status, params, navigate }: ScreenProps) {
  const api = useMemo(() => harness(iii), [iii]);
  const sessionId = params.get("session_id") ?? "";
  const online = status === "open";
  const [settings, setSettingsState] = useState<RunSettings>(loadSettings);
  const [configured, setConfigured] = useState<string[] | undefined>();
  const setSettings = (s: RunSettings) => {
    setSettingsState(s);
    saveSettings(s);
  };
  const open = useCallback((sid: string) => navigate(`/agent?session_id=${encodeURIComponent(sid)}`), [navigate]);

  return (
    <div class="ac-screen" id="agent-screen">
      <style>{AGENT_CSS}</style>
      <h2 class="ac-title">Agent console</h2>
      {configured !== undefined && configured.length === 0 && (
        <Banner kind="warn" id="agent-no-provider" title="No model provider is configured.">
          Store an API key below (the credentials worker keeps it encrypted; it never comes back to this page), or start the engine with{" "}
          <code>OPENAI_API_KEY</code> / <code>ANTHROPIC_API_KEY</code> set.
        </Banner>
      )}
      {!online && (
        <p class="ac-muted" role="status">
          Not connected to the engine ({status}): what is shown may be out of date.
        </p>
      )}
      <SettingsPanel api={api} online={online} settings={settings} onChange={setSettings} onConfigured={setConfigured} />
      <div class="ac-layout">
        <SessionList api={api} online={online} current={sessionId} onOpen={open} onNew={() => navigate("/agent")} />
        {sessionId ? (
          <SessionPane
            key={sessionId}
            sessionId={sessionId}
            api={api}
            iii={iii}
            online={online}
            settings={settings}
            onOpen={open}
            navigate={navigate}
          />
        ) : (
          <NewSession api={api} settings={settings} onStarted={open} ready={online && !!settings.provider && !!settings.model} />
        )}
      </div>
    </div>
  );
}

interface ListedSession extends SessionSummary {
  /** The run's state (`turn::get_state`), or null before the session's first run. */
  state: TurnStateView | null;
}

function SessionList(props: {
  api: ReturnType<typeof harness>;
  online: boolean;
  current: string;
  onOpen: (sid: string) => void;
  onNew: () => void;
}) {
  const [sessions, setSessions] = useState<ListedSession[]>([]);
  const [err, setErr] = useState<string>();
  useEffect(() => {
    if (!props.online) return;
    let alive = true;
    const load = async () => {
      try {
        const list = await withFirstTexts(props.api.iii, (await props.api.sessions())?.sessions ?? []);
        // Each session's status beside it: one read per listed session, side by side.
        const states = await Promise.all(list.map((s) => props.api.state(s.session_id).catch(() => null)));
        if (!alive) return;
        setSessions(list.map((s, i) => ({ ...s, state: states[i] ?? null })));
        setErr(undefined);
      } catch (e) {
        if (alive) setErr(problem(e));
      }
    };
    void load();
    const t = setInterval(() => void load(), SESSIONS_REFRESH_MS);
    return () => {
      alive = false;
      clearInterval(t);
    };
  }, [props.online, props.current]);
  return (
    <nav class="ac-sessions" aria-label="sessions">
      <button type="button" class="btn btn-secondary" id="agent-new-session" onClick={props.onNew}>
        New session
      </button>
      {err && <p class="ac-error">{err}</p>}
      <ul id="agent-sessions">
        {sessions.map((s) => {
          const state = s.state?.state ?? "no run";
          const started = new Date(s.created_at);
          return (
            <li key={s.session_id} data-session={s.session_id}>
              <button
                type="button"
                class="btn btn-link ac-session-btn"
                aria-current={s.session_id === props.current ? "page" : undefined}
                onClick={() => props.onOpen(s.session_id)}
                title={s.session_id}
              >
                <span class="ac-session-title">{sessionTitle(s, s.session_id)}</span>
                <span class="ac-session-meta">
                  <code class="ac-session-id">{shortId(s.session_id)}</code> ·{" "}
                  <time dateTime={started.toISOString()}>{fmtStarted(started)}</time> ·{" "}
                  <span class={`ac-status ac-status-${state.replace(/\s/g, "_")}`} data-state={state}>
                    {state}
                  </span>
                </span>
              </button>
            </li>
          );
        })}
      </ul>
    </nav>
  );
}

/** A start time: the time alone today, with the date otherwise. */
function fmtStarted(d: Date): string {
  const time = d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
  return d.toDateString() === new Date().toDateString() ? time : `${d.toLocaleDateString()} ${time}`;
}

function NewSession(props: { api: ReturnType<typeof harness>; settings: RunSettings; ready: boolean; onStarted: (sid: string) => void }) {
  const [text, setText] = useState("");
  const [err, setErr] = useState<string>();
  const [busy, setBusy] = useState(false);
  const send = async (e: Event) => {
    e.preventDefault();
    if (!text.trim()) return;
    setBusy(true);
    setErr(undefined);
    const sid = newSessionId();
    try {
      const r = await props.api.start({
        session_id: sid,
        provider: props.settings.provider,
        model: props.settings.model,
        text: text.trim(),
        budget_id: props.settings.budget_id || undefined,
      });
      if (!r.started) throw new Error(`not started: ${r.reason ?? "unknown"}`);
      setText("");
      props.onStarted(sid);
    } catch (x) {
      setErr(problem(x));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="ac-main">
      <form class="ac-composer" onSubmit={(e) => void send(e)} aria-label="start a turn">
        <label for="agent-input">Message</label>
        <textarea
          id="agent-input"
          rows={3}
          value={text}
          onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
          placeholder="Ask the agent…"
        />
        <button type="submit" class="btn btn-primary" id="agent-send" disabled={!props.ready || busy || !text.trim()}>
          Start turn
        </button>
        {err && (
          <p role="alert" class="ac-error">
            {err}
          </p>
        )}
      </form>
    </main>
  );
}

function SessionPane(props: {
  sessionId: string;
  api: ReturnType<typeof harness>;
  iii: ScreenProps["iii"];
  online: boolean;
  settings: RunSettings;
  onOpen: (sid: string) => void;
  navigate: (to: string) => void;
}) {
  const { sessionId: sid, api } = props;
  const [view, setView] = useState<SessionView>(emptyView);
  const [mode, setMode] = useState<string>("connecting");
  const [err, setErr] = useState<string>();
  const [tree, setTree] = useState<SessionTree | null>();
  const [origin, setOrigin] = useState<{ source_session_id: string } | null>(null);
  const [budgetId, setBudgetId] = useState<string>();
  const [budget, setBudget] = useState<BudgetView | null>();
  const [budgetErr, setBudgetErr] = useState<string>();
  const [parent, setParent] = useState<string>();
  const [children, setChildren] = useState<SubAgentChildView[]>([]);
  const [approvalSettings, setApprovalSettings] = useState<ApprovalSettings | null>();
  const [pending, setPending] = useState<PendingApprovalRecord[]>([]);
  const [sideTick, setSideTick] = useState(0);
  const sideTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const bumpSide = () => {
    clearTimeout(sideTimer.current);
    sideTimer.current = setTimeout(() => setSideTick((n) => n + 1), SIDE_RELOAD_DEBOUNCE_MS);
  };

  // Live events, from the start of the session's log (catch-up) and then pushed.
  // After a reconnect the follower starts again after the last event this view applied.
  const lastApplied = useRef<string | null>(null);
  lastApplied.current = view.lastItemId;
  useEffect(() => {
    if (!props.online) return;
    const stop = followSession(
      props.iii,
      sid,
      {
        events: (items) => setView((v) => withEvents(v, items)),
        child: () => bumpSide(),
        mode: setMode,
      },
      lastApplied.current,
    );
    return stop;
  }, [sid, props.online]);

  // The stored transcript and the state: on open, on reconnect and whenever a turn or run ended.
  useEffect(() => {
    if (!props.online) return;
    let alive = true;
    (async () => {
      try {
        const [stored, state] = await Promise.all([api.transcript(sid), api.state(sid)]);
        if (!alive) return;
        setView((v) => withState(withHistory(v, stored), state));
      } catch (e) {
        if (alive) setErr(problem(e));
      }
    })();
    bumpSide();
    return () => {
      alive = false;
    };
  }, [sid, props.online, view.historyDirty]);

  // A call starts or stops waiting: the approvals panel reads the inbox again.
  const waitingIds = (view.state?.awaiting_approval ?? []).map((a) => `${a.function_call_id}:${a.args_hash ?? ""}`).join(",");
  useEffect(() => bumpSide(), [waitingIds]);

  // Tree, budget, parent, children and approvals.
  useEffect(() => {
    if (!props.online) return;
    let alive = true;
    api.tree(sid).then(
      (t) => alive && setTree(t ?? null),
      () => alive && setTree(null),
    );
    api.meta(sid).then(
      (m) => alive && setOrigin(m?.origin ? { source_session_id: m.origin.source_session_id } : null),
      () => undefined,
    );
    api.children(sid).then(
      (c) => alive && setChildren(c?.children ?? []),
      () => alive && setChildren([]),
    );
    api.approvalSettings(sid).then(
      (r) => alive && setApprovalSettings(r.settings),
      () => alive && setApprovalSettings(null),
    );
    api.pending(sid).then(
      (r) => alive && setPending(r.pending),
      () => alive && setPending([]),
    );
    api.runRequest(sid).then(
      async (r) => {
        if (!alive) return;
        setParent(r?.parent?.session_id);
        setBudgetId(r?.budget_id);
        if (!r?.budget_id) return setBudget(null);
        try {
          const b = await api.budget(r.budget_id);
          if (alive) setBudget(b), setBudgetErr(undefined);
        } catch (e) {
          if (alive) setBudgetErr(problem(e));
        }
      },
      () => undefined,
    );
    return () => {
      alive = false;
    };
  }, [sid, props.online, sideTick]);

  const running = isRunning(view.state);
  const decide = async (call: CallView, decision: "allow" | "deny") => {
    const r = await api.resolve(sid, call.id, decision);
    if (!r.ok) throw new Error(r.error ?? "the approval was not accepted");
  };
  const fork = async (entryId: string) => {
    setErr(undefined);
    try {
      const r = await api.fork(sid, entryId);
      props.onOpen(r.session_id);
    } catch (e) {
      setErr(problem(e));
    }
  };
  const switchBranch = async (entryId: string) => {
    setErr(undefined);
    try {
      await api.switchBranch(sid, entryId);
      setView((v) => ({ ...v, live: [], historyDirty: v.historyDirty + 1 }));
    } catch (e) {
      setErr(problem(e));
    }
  };
  const resume = async () => {
    setErr(undefined);
    try {
      const r = await api.resume({
        session_id: sid,
        provider: props.settings.provider || undefined,
        model: props.settings.model || undefined,
      });
      if (!r.started) setErr(`not resumed: ${r.reason}`);
    } catch (e) {
      setErr(problem(e));
    }
  };

  return (
    <>
      <main class="ac-main" aria-labelledby="ac-session-h">
        <div class="ac-session-head">
          <h3 id="ac-session-h">
            Session <code>{sid}</code>
          </h3>
          <span class={`ac-status ac-status-${view.state?.state ?? "none"}`} id="agent-state" data-state={view.state?.state ?? "none"}>
            {view.state?.state ?? "no run yet"}
          </span>
          {view.state && (
            <span class="ac-muted">
              {view.state.turn_count} round{view.state.turn_count === 1 ? "" : "s"}
            </span>
          )}
          <span class="ac-muted" title="how this tab receives the session's events" id="agent-follow-mode">
            {mode}
          </span>
          <button
            type="button"
            class="btn btn-link"
            id="agent-trace-link"
            onClick={() => props.navigate(`/traces?session_id=${encodeURIComponent(sid)}&open=turn`)}
          >
            trace of the last turn
          </button>
          {parent && (
            <span class="ac-muted">
              sub-agent of{" "}
              <button type="button" class="btn btn-link" onClick={() => props.onOpen(parent)}>
                {parent}
              </button>
            </span>
          )}
        </div>
        {view.state?.state === "function_awaiting_approval" &&
          (view.state.awaiting_approval ?? []).some((a) => !(a as { child_session_id?: string }).child_session_id) && (
            <Banner kind="info" id="agent-awaiting" title="The agent is waiting for your approval." />
          )}
        {view.state?.error && (
          <p class="ac-error" role="alert">
            The run failed: {view.state.error.message}
          </p>
        )}
        <Transcript view={view} onDecide={decide} onFork={(e) => void fork(e)} onOpenSession={props.onOpen} />
        <Composer api={api} sid={sid} running={running} settings={props.settings} online={props.online} onError={setErr} />
        {err && (
          <p role="alert" class="ac-error" id="agent-error">
            {err}
          </p>
        )}
      </main>
      <aside class="ac-aside" aria-label="session details">
        <ApprovalsPanel
          settings={approvalSettings}
          pending={pending}
          onMode={(m) =>
            void api.setMode(sid, m).then(
              (r) => setApprovalSettings(r.settings),
              (e) => setErr(problem(e)),
            )
          }
          onRemoveTrusted={(f) =>
            void api.removeAlwaysAllow(sid, f).then(
              (r) => setApprovalSettings(r.settings),
              (e) => setErr(problem(e)),
            )
          }
          onApproveAlways={(p) =>
            void api
              .approveAlways(sid, p.function_id)
              .then((r) => (setApprovalSettings(r.settings), api.resolve(sid, p.function_call_id, "allow", undefined, p.args_hash)))
              .then(bumpSide, (e) => setErr(problem(e)))
          }
        />
        <BudgetPanel budget={budget} budgetId={budgetId} error={budgetErr} />
        <ChildrenPanel
          children={children}
          onOpen={props.onOpen}
          onDecide={(child, callId, d) => void api.resolve(child, callId, d).then(bumpSide, (e) => setErr(problem(e)))}
        />
        <TreePanel
          tree={tree}
          origin={origin}
          onFork={(e) => void fork(e)}
          onSwitch={(e) => void switchBranch(e)}
          onResume={!running && view.state ? () => void resume() : undefined}
          onOpenSession={props.onOpen}
        />
      </aside>
    </>
  );
}

function Composer(props: {
  api: ReturnType<typeof harness>;
  sid: string;
  running: boolean;
  settings: RunSettings;
  online: boolean;
  onError: (e: string | undefined) => void;
}) {
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const send = async (e: Event) => {
    e.preventDefault();
    const t = text.trim();
    if (!t) return;
    setBusy(true);
    props.onError(undefined);
    try {
      if (props.running) {
        const r = await props.api.steer(props.sid, t);
        if (!r.ok) throw new Error("the steering inbox is full; wait for the next round");
      } else {
        const r = await props.api.resume({
          session_id: props.sid,
          text: t,
          provider: props.settings.provider || undefined,
          model: props.settings.model || undefined,
          budget_id: props.settings.budget_id || undefined,
        });
        if (!r.started) throw new Error(`not started: ${r.reason}`);
      }
      setText("");
    } catch (x) {
      props.onError(problem(x));
    } finally {
      setBusy(false);
    }
  };
  const stop = async () => {
    props.onError(undefined);
    try {
      await props.api.stop(props.sid);
    } catch (x) {
      props.onError(problem(x));
    }
  };
  return (
    <form class="ac-composer" onSubmit={(e) => void send(e)} aria-label={props.running ? "steer the running turn" : "send a message"}>
      <label for="agent-input">{props.running ? "Steer the running turn" : "Message"}</label>
      <textarea id="agent-input" rows={2} value={text} onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />
      <div class="ac-row">
        <button type="submit" class="btn btn-primary" id="agent-send" disabled={!props.online || busy || !text.trim()}>
          {props.running ? "Steer" : "Send"}
        </button>
        {props.running && (
          <button type="button" class="btn btn-danger" id="agent-stop" onClick={() => void stop()}>
            Stop
          </button>
        )}
      </div>
    </form>
  );
}
