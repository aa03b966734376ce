// The traces screen (the waterfall page): recent traces from the engine's trace store,
// filtered by function id or session id (`#/traces?function_id=…`, `?session_id=…`, as the
// catalog and the agent console link here), and one trace (`?trace_id=…`) as a waterfall — bars
// placed by time, nested by the span tree, coloured by service, errors marked. A span opens to its
// attributes, events and the logs correlated with it. A trace still running refreshes by itself.
import type { LogRecord, LogsListOutput, Span, SpanTreeNode, TracesListOutput, TracesTreeOutput } from "@iii-edge/protocol/telemetry";
import type { BrowserClient } from "@iii-edge/sdk-browser";
import type { ComponentChildren } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import type { ScreenProps } from "../../app/types.ts";
import { sessionTitle, shortId, useSessionNames } from "../../app/sessions.ts";
import {
  fmtMs,
  fmtTime,
  isNoise,
  layout,
  serviceColour,
  serviceColours,
  summarize,
  TURN_FUNCTIONS,
  type TraceSummary,
  type WaterfallRow,
} from "./model.ts";
import { TRACES_CSS } from "./style.ts";
import { Banner } from "../../ui/index.tsx";

/** Spans one list read asks for: enough for the last few dozen turns' traces on one page. */
export const LIST_SPANS = 500;
/** Refresh of the trace list while the screen is open. */
export const LIST_REFRESH_MS = 3_000;
/** Refresh of a waterfall whose trace is still live (a running turn). */
export const TREE_REFRESH_MS = 1_000;
/** A trace counts as live while a span is open or the last one ended less than this ago: a turn's
 * next step can start a moment after the previous one ended (a queue hop, an approval). */
export const LIVE_WINDOW_MS = 20_000;

type Problem = { code?: string; message: string };
const asProblem = (e: unknown): Problem => ({ code: (e as { code?: string })?.code, message: String((e as Error)?.message ?? e) });

function StoreMissing({ problem }: { problem: Problem }) {
  if (problem.code === "function_not_found")
    return (
      <Banner kind="warn" id="traces-unavailable" title="The engine's trace store is not available.">
        <code>engine::traces::list</code> is not registered on this engine.
      </Banner>
    );
  return (
    <p class="tr-error" role="alert">
      {problem.code ? `${problem.code}: ` : ""}
      {problem.message}
    </p>
  );
}

function useNow(active: boolean, ms: number): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!active) return;
    const t = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(t);
  }, [active, ms]);
  return now;
}

export default function TracesScreen({ iii, status, params, navigate }: ScreenProps) {
  const traceId = params.get("trace_id") ?? "";
  const functionId = params.get("function_id") ?? "";
  const sessionId = params.get("session_id") ?? "";
  // `open=turn` (the agent screen's link): open the session's newest turn straight away.
  const openTurn = params.get("open") === "turn";
  const online = status === "open";
  const go = (p: Record<string, string>) => {
    const q = new URLSearchParams(Object.entries(p).filter(([, v]) => v));
    const s = q.toString();
    navigate(`/traces${s ? `?${s}` : ""}`);
  };
  return (
    <div class="tr-screen" id="traces-screen">
      <style>{TRACES_CSS}</style>
      <h2 class="tr-title">Traces</h2>
      {!online && (
        <p class="tr-muted" role="status">
          Not connected to the engine ({status}): what is shown may be out of date.
        </p>
      )}
      {traceId ? (
        <>
          <button
            type="button"
            class="btn btn-link"
            onClick={() => go({ function_id: functionId, session_id: sessionId })}
            id="traces-back"
          >
            ← all traces{functionId || sessionId ? " (filtered)" : ""}
          </button>
          <Waterfall iii={iii} online={online} traceId={traceId} />
        </>
      ) : (
        <TraceList
          iii={iii}
          online={online}
          functionId={functionId}
          sessionId={sessionId}
          openTurn={openTurn}
          onFilter={(f, s) => go({ function_id: f, session_id: s })}
          onOpen={(id) => go({ trace_id: id, function_id: functionId, session_id: sessionId })}
          // In place of the `open=turn` address, so Back returns to the list rather than here again.
          onOpenTurn={(id) => location.replace(`#/traces?${new URLSearchParams({ trace_id: id, session_id: sessionId })}`)}
        />
      )}
    </div>
  );
}

function TraceList(props: {
  iii: BrowserClient;
  online: boolean;
  functionId: string;
  sessionId: string;
  openTurn: boolean;
  onFilter: (fn: string, sid: string) => void;
  onOpen: (traceId: string) => void;
  onOpenTurn: (traceId: string) => void;
}) {
  const [traces, setTraces] = useState<TraceSummary[]>();
  const [total, setTotal] = useState(0);
  const [problem, setProblem] = useState<Problem>();
  const [fn, setFn] = useState(props.functionId);
  const [sid, setSid] = useState(props.sessionId);
  // Discovery and polling (the console reads a session's tree, state and transcript by its id, each
  // a small trace of its own): hidden unless asked for, or they bury the turns.
  const [showNoise, setShowNoise] = useState(false);
  const names = useSessionNames(props.iii, props.online);
  useEffect(() => (setFn(props.functionId), setSid(props.sessionId)), [props.functionId, props.sessionId]);

  useEffect(() => {
    if (!props.online) return;
    let alive = true;
    const load = async () => {
      try {
        const r = await props.iii.trigger<unknown, TracesListOutput>({
          function_id: "engine::traces::list",
          payload: {
            limit: LIST_SPANS,
            ...(props.functionId ? { function_id: props.functionId } : {}),
            ...(props.sessionId ? { session_id: props.sessionId } : {}),
          },
        });
        if (!alive) return;
        const summaries = summarize(r.spans);
        setTraces(summaries);
        setTotal(r.total);
        const turn = props.openTurn ? summaries.find((t) => t.function_id !== undefined && TURN_FUNCTIONS.has(t.function_id)) : undefined;
        if (turn) props.onOpenTurn(turn.trace_id);
        setProblem(undefined);
      } catch (e) {
        if (alive) setProblem(asProblem(e));
      }
    };
    void load();
    const t = setInterval(() => void load(), LIST_REFRESH_MS);
    return () => {
      alive = false;
      clearInterval(t);
    };
  }, [props.online, props.functionId, props.sessionId, props.openTurn]);

  const now = Date.now();
  const me = props.iii.workerId;
  const filtered = !!(props.functionId || props.sessionId);
  const noise = (t: TraceSummary) => isNoise(t) || (t.span_count === 1 && !!me && t.caller_worker_id === me);
  const shown = traces?.filter((t) => showNoise || !noise(t));
  const hidden = (traces?.length ?? 0) - (shown?.length ?? 0);
  return (
    <section aria-labelledby="tr-list-h">
      <form
        class="tr-filters"
        onSubmit={(e) => {
          e.preventDefault();
          props.onFilter(fn.trim(), sid.trim());
        }}
      >
        <label>
          Function id
          <input
            id="traces-filter-function"
            value={fn}
            onInput={(e) => setFn((e.target as HTMLInputElement).value)}
            placeholder="e.g. run::start"
          />
        </label>
        <label>
          Session id
          <input id="traces-filter-session" value={sid} onInput={(e) => setSid((e.target as HTMLInputElement).value)} />
        </label>
        <button type="submit" class="btn btn-secondary">
          Filter
        </button>
        <label class="tr-check">
          <input
            type="checkbox"
            id="traces-show-noise"
            checked={showNoise}
            onChange={(e) => setShowNoise((e.target as HTMLInputElement).checked)}
          />{" "}
          show discovery and polling{!showNoise && hidden > 0 ? ` (${hidden} hidden)` : ""}
        </label>
        {(props.functionId || props.sessionId) && (
          <button type="button" class="btn btn-link" onClick={() => props.onFilter("", "")}>
            clear
          </button>
        )}
      </form>
      <h3 id="tr-list-h">
        Recent traces{" "}
        {shown && traces && (
          <small class="tr-muted">
            ({shown.length} of {traces.length} traces from the newest {Math.min(total, LIST_SPANS)} of {total} matching spans)
          </small>
        )}
      </h3>
      {problem && <StoreMissing problem={problem} />}
      {props.openTurn && shown && (
        <p class="tr-muted" role="status" id="traces-waiting-turn">
          Waiting for this session's turn to show up…
        </p>
      )}
      {shown && shown.length === 0 && (
        <p class="tr-muted">
          No traces yet{props.functionId || props.sessionId ? " for this filter" : ""}
          {hidden > 0 ? ` (${hidden} discovery and polling traces hidden)` : ""}.
        </p>
      )}
      {shown && shown.length > 0 && (
        <div class="table-wrap">
          <table id="traces-list" class="tr-table">
            <caption class="sr-only">Recent traces, newest first</caption>
            <thead>
              <tr>
                <th scope="col">trace</th>
                <th scope="col">service</th>
                <th scope="col">started</th>
                {/* A filter selects spans, not whole traces: the figures are of the spans that matched. */}
                <th scope="col">{filtered ? "duration (matching spans)" : "duration"}</th>
                <th scope="col">{filtered ? "matching spans" : "spans"}</th>
                <th scope="col">status</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((t) => {
                const live = t.open || now - t.end_ns / 1e6 < LIVE_WINDOW_MS;
                return (
                  <tr key={t.trace_id} data-trace-id={t.trace_id}>
                    <th scope="row">
                      <button type="button" class="btn btn-link" onClick={() => props.onOpen(t.trace_id)} title={t.trace_id}>
                        {t.name}
                      </button>
                      {t.session_id && (
                        <small class="tr-muted" title={t.session_id}>
                          {" "}
                          {names.has(t.session_id)
                            ? `${sessionTitle(names.get(t.session_id), t.session_id)} · ${shortId(t.session_id)}`
                            : `session ${shortId(t.session_id)}`}
                        </small>
                      )}
                    </th>
                    <td>
                      <span class="tr-chip" style={{ background: serviceColour(t.service_name) }} aria-hidden="true" /> {t.service_name}
                    </td>
                    <td>{fmtTime(t.start_ns)}</td>
                    <td>{fmtMs((t.end_ns - t.start_ns) / 1e6)}</td>
                    <td>{t.span_count}</td>
                    <td>
                      {t.error_count > 0 ? (
                        <span class="tr-status tr-status-error">
                          {t.error_count} error{t.error_count === 1 ? "" : "s"}
                        </span>
                      ) : (
                        <span class="tr-status tr-status-ok">ok</span>
                      )}
                      {live && <span class="tr-status tr-live"> live</span>}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function Waterfall(props: { iii: BrowserClient; online: boolean; traceId: string }) {
  const [roots, setRoots] = useState<SpanTreeNode[]>();
  const [problem, setProblem] = useState<Problem>();
  const [selected, setSelected] = useState<string>();
  const [collapsed, setCollapsed] = useState<ReadonlySet<string>>(new Set());
  const [live, setLive] = useState(true);
  const now = useNow(live, TREE_REFRESH_MS);

  useEffect(() => {
    if (!props.online) return;
    let alive = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      let stillLive = true;
      try {
        const r = await props.iii.trigger<unknown, TracesTreeOutput>({
          function_id: "engine::traces::tree",
          payload: { trace_id: props.traceId },
        });
        if (!alive) return;
        setRoots(r.roots);
        setProblem(undefined);
        stillLive = isLive(r.roots, Date.now());
      } catch (e) {
        if (alive) setProblem(asProblem(e));
      }
      if (!alive) return;
      setLive(stillLive);
      if (stillLive) timer = setTimeout(() => void load(), TREE_REFRESH_MS);
    };
    void load();
    return () => {
      alive = false;
      clearTimeout(timer);
    };
  }, [props.online, props.traceId]);

  const { rows, start_ns, end_ns } = useMemo(() => layout(roots ?? [], now * 1e6, collapsed), [roots, now, collapsed]);
  const toggle = (id: string) =>
    setCollapsed((c) => {
      const next = new Set(c);
      if (!next.delete(id)) next.add(id);
      return next;
    });
  const services = useMemo(() => [...new Set(rows.map((r) => r.span.service_name))].sort(), [rows]);
  const colours = useMemo(() => serviceColours(services), [services.join("\n")]);
  const chosen = rows.find((r) => r.span.span_id === selected);

  return (
    <section aria-labelledby="tr-wf-h" class="tr-waterfall-wrap">
      <h3 id="tr-wf-h">
        Trace <code>{props.traceId}</code>{" "}
        {rows.length > 0 && (
          <small class="tr-muted">
            {rows.length} spans · {fmtMs((end_ns - start_ns) / 1e6)} · started {fmtTime(start_ns)}
          </small>
        )}{" "}
        {live && rows.length > 0 && (
          <span class="tr-status tr-live" id="traces-live">
            live
          </span>
        )}
      </h3>
      {problem && <StoreMissing problem={problem} />}
      {roots && rows.length === 0 && <p class="tr-muted">No spans stored for this trace (it may have aged out of the store).</p>}
      {services.length > 0 && (
        <ul class="tr-legend" aria-label="services">
          {services.map((s) => (
            <li key={s}>
              <span class="tr-chip" style={{ background: colours.get(s) }} aria-hidden="true" /> {s}
            </li>
          ))}
        </ul>
      )}
      <ol class="tr-waterfall" id="traces-waterfall" aria-label="spans by start time, nested by parent">
        {rows.map((r) => (
          <Row
            key={r.span.span_id}
            row={r}
            colour={colours.get(r.span.service_name) ?? serviceColour(r.span.service_name)}
            selected={r.span.span_id === selected}
            collapsed={collapsed.has(r.span.span_id)}
            onToggle={() => toggle(r.span.span_id)}
            onSelect={() => setSelected(r.span.span_id === selected ? undefined : r.span.span_id)}
          >
            {chosen && r.span.span_id === selected && <SpanDetail iii={props.iii} span={chosen.span} row={chosen} />}
          </Row>
        ))}
      </ol>
    </section>
  );
}

function isLive(roots: SpanTreeNode[], nowMs: number): boolean {
  let last = 0;
  let open = false;
  const walk = (ns: SpanTreeNode[]) => {
    for (const n of ns) {
      if (!(n.end_time_unix_nano > 0 && n.end_time_unix_nano >= n.start_time_unix_nano)) open = true;
      last = Math.max(last, n.end_time_unix_nano, n.start_time_unix_nano);
      walk(n.children ?? []);
    }
  };
  walk(roots);
  return roots.length === 0 || open || nowMs - last / 1e6 < LIVE_WINDOW_MS;
}

function Row({
  row,
  colour,
  selected,
  collapsed,
  onToggle,
  onSelect,
  children,
}: {
  row: WaterfallRow;
  colour: string;
  selected: boolean;
  collapsed: boolean;
  onToggle: () => void;
  onSelect: () => void;
  children?: ComponentChildren;
}) {
  const s = row.span;
  return (
    <li
      class={`tr-row${selected ? " tr-row-selected" : ""}${s.status === "error" ? " tr-row-error" : ""}`}
      data-span-id={s.span_id}
      data-parent-span-id={s.parent_span_id || undefined}
      data-depth={row.depth}
      data-status={s.status}
      data-orphan={row.orphan ? "true" : undefined}
    >
      {row.childCount > 0 && (
        // Over the row's name column (a button cannot hold another), indented with the name.
        <button
          type="button"
          class="tr-fold"
          style={{ insetInlineStart: `calc(${row.depth * 0.9}rem + .2rem)` }}
          aria-expanded={!collapsed}
          aria-label={`${collapsed ? "show" : "hide"} the ${row.childCount} spans under ${s.name}`}
          onClick={onToggle}
        >
          {collapsed ? "▸" : "▾"}
        </button>
      )}
      <button
        type="button"
        class="tr-row-btn"
        aria-expanded={selected}
        aria-label={`${s.name}, ${s.service_name}, ${fmtMs(row.duration_ms)}${row.open ? ", running" : ""}${row.orphan ? ", parent not stored yet" : ""}${s.status === "error" ? ", error" : ""}, depth ${row.depth}`}
        onClick={onSelect}
      >
        <span class="tr-name" style={{ paddingInlineStart: `calc(${row.depth * 0.9}rem + 1.2rem)` }}>
          <span class="tr-chip" style={{ background: colour }} aria-hidden="true" />
          <span class="tr-span-name">{s.name}</span>
          {row.orphan && (
            <small class="tr-muted tr-orphan" title={`parent ${s.parent_span_id} is not stored yet: it is still running, or aged out`}>
              (parent open)
            </small>
          )}
        </span>
        <span class="tr-track" aria-hidden="true">
          <span
            class={`tr-bar${row.open ? " tr-bar-open" : ""}`}
            style={{ left: `${row.left}%`, width: `${row.width}%`, background: colour }}
          />
        </span>
        <span class="tr-dur">{fmtMs(row.duration_ms)}</span>
      </button>
      {children}
    </li>
  );
}

function Value({ v }: { v: unknown }) {
  return <code class="tr-val">{typeof v === "string" ? v : JSON.stringify(v)}</code>;
}

function SpanDetail({ iii, span, row }: { iii: BrowserClient; span: Span; row: WaterfallRow }) {
  const [logs, setLogs] = useState<LogRecord[]>();
  const [logProblem, setLogProblem] = useState<Problem>();
  useEffect(() => {
    let alive = true;
    setLogs(undefined);
    iii
      .trigger<unknown, LogsListOutput>({
        function_id: "engine::logs::list",
        payload: { trace_id: span.trace_id, span_id: span.span_id, limit: 200 },
      })
      .then(
        (r) => alive && (setLogs(r.logs), setLogProblem(undefined)),
        (e) => alive && setLogProblem(asProblem(e)),
      );
    return () => {
      alive = false;
    };
  }, [span.span_id]);
  const attrs = Object.entries(span.attributes ?? {}).sort(([a], [b]) => a.localeCompare(b));
  return (
    <section class="tr-detail" id="traces-span-detail" aria-labelledby="tr-detail-h" data-span-id={span.span_id}>
      <h4 id="tr-detail-h">
        {span.name} <small class="tr-muted">{span.service_name}</small>
      </h4>
      <dl class="tr-dl">
        <dt>span</dt>
        <dd>
          <code>{span.span_id}</code>
          {span.parent_span_id ? (
            <>
              {" "}
              (parent <code>{span.parent_span_id}</code>)
            </>
          ) : (
            " (root)"
          )}
        </dd>
        <dt>kind</dt>
        <dd>{span.kind ?? "–"}</dd>
        <dt>status</dt>
        <dd class={span.status === "error" ? "tr-error" : undefined}>
          {span.status}
          {span.status_message ? `: ${span.status_message}` : ""}
        </dd>
        <dt>started</dt>
        <dd>{fmtTime(span.start_time_unix_nano)}</dd>
        <dt>duration</dt>
        <dd>
          {fmtMs(row.duration_ms)}
          {row.open ? " (running)" : ""}
        </dd>
      </dl>
      <h5>Attributes</h5>
      {attrs.length === 0 ? (
        <p class="tr-muted">none</p>
      ) : (
        <table class="tr-attrs" id="traces-attributes">
          <caption class="sr-only">Span attributes</caption>
          <tbody>
            {attrs.map(([k, v]) => (
              <tr key={k} data-attr={k}>
                <th scope="row">{k}</th>
                <td>
                  <Value v={v} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h5>Events</h5>
      {span.events?.length ? (
        <ul class="tr-events" id="traces-events">
          {span.events.map((e, i) => (
            <li key={`${e.name}-${i}`}>
              <strong>{e.name}</strong> <small class="tr-muted">+{fmtMs((e.time_unix_nano - span.start_time_unix_nano) / 1e6)}</small>
              {Object.entries(e.attributes ?? {}).map(([k, v]) => (
                <div key={k} class="tr-event-attr">
                  {k}: <Value v={v} />
                </div>
              ))}
            </li>
          ))}
        </ul>
      ) : (
        <p class="tr-muted">none</p>
      )}
      <h5>Logs</h5>
      {logProblem && (
        <p class="tr-muted">
          {logProblem.code === "function_not_found" ? "engine::logs::list is not registered on this engine." : logProblem.message}
        </p>
      )}
      {logs && logs.length === 0 && <p class="tr-muted">No logs correlated with this span.</p>}
      {logs && logs.length > 0 && (
        <ol class="tr-logs" id="traces-logs">
          {[...logs].reverse().map((l, i) => (
            <li key={i} class={`tr-log tr-log-${(l.severity_text || "info").toLowerCase()}`}>
              <small class="tr-muted">{fmtTime(l.time_unix_nano)}</small> <strong>{l.severity_text}</strong>{" "}
              <span class="tr-muted">{l.service_name}</span> <Value v={l.body} />
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
