// What the traces screen computes from the engine's trace store (protocol/src/telemetry.ts):
// recent traces from a page of spans, and one trace's tree laid out as waterfall rows. Pure.
import { IN_PROGRESS_ATTRIBUTE, type Span, type SpanTreeNode } from "@iii-edge/protocol/telemetry";

export interface TraceSummary {
  trace_id: string;
  /** The root span's name (or the earliest span's, when the root is not in the page). */
  name: string;
  service_name: string;
  start_ns: number;
  end_ns: number;
  span_count: number;
  error_count: number;
  /** Some span has not ended (end before start, or 0). */
  open: boolean;
  session_id?: string;
  /** The worker whose call started the trace (`iii.caller.worker_id` of the root). */
  caller_worker_id?: string;
  /** The function the root span invoked. */
  function_id?: string;
  /** The trigger type, when the root is a trigger firing (`trigger <type>`). */
  trigger_type?: string;
}

/** Finished: it has an end, and is not the in-progress copy a long span (a turn) is sent as while it runs. */
const ended = (s: Pick<Span, "start_time_unix_nano" | "end_time_unix_nano" | "attributes">) =>
  s.attributes?.[IN_PROGRESS_ATTRIBUTE] !== true && s.end_time_unix_nano > 0 && s.end_time_unix_nano >= s.start_time_unix_nano;

const attr = (s: Span, ...keys: string[]): string | undefined => {
  for (const k of keys) {
    const v = s.attributes?.[k];
    if (typeof v === "string" && v) return v;
  }
  return undefined;
};

/** Spans (any order) grouped into traces, newest first. */
export function summarize(spans: Span[]): TraceSummary[] {
  const by = new Map<string, Span[]>();
  for (const s of spans) {
    const list = by.get(s.trace_id);
    if (list) list.push(s);
    else by.set(s.trace_id, [s]);
  }
  const out: TraceSummary[] = [];
  for (const [trace_id, list] of by) {
    const ids = new Set(list.map((s) => s.span_id));
    const sorted = [...list].sort((a, b) => a.start_time_unix_nano - b.start_time_unix_nano);
    const root = sorted.find((s) => !s.parent_span_id || !ids.has(s.parent_span_id)) ?? sorted[0]!;
    let end = 0;
    for (const s of list) end = Math.max(end, s.end_time_unix_nano, s.start_time_unix_nano);
    out.push({
      trace_id,
      name: root.name,
      service_name: root.service_name,
      start_ns: sorted[0]!.start_time_unix_nano,
      end_ns: end,
      span_count: list.length,
      error_count: list.filter((s) => s.status === "error").length,
      open: list.some((s) => !ended(s)),
      session_id: list.map((s) => attr(s, "iii.session.id", "session_id", "gen_ai.conversation.id")).find(Boolean),
      caller_worker_id: attr(root, "iii.caller.worker_id"),
      function_id: attr(root, "iii.function_id", "iii.function.id") ?? (root.name.startsWith("invoke ") ? root.name.slice(7) : undefined),
      trigger_type: attr(root, "iii.trigger.type"),
    });
  }
  return out.sort((a, b) => b.start_ns - a.start_ns);
}

export interface WaterfallRow {
  span: Span;
  depth: number;
  /** Percent of the trace's width. */
  left: number;
  width: number;
  duration_ms: number;
  open: boolean;
  childCount: number;
  /** Names a parent the tree does not hold: the parent is still running (spans are stored when
   * they end) or aged out; shown at the top level until it arrives. */
  orphan: boolean;
}

/** Narrowest bar drawn (percent): a span of a few µs in a trace of seconds stays visible. */
export const MIN_BAR_PERCENT = 0.4;

/** The tree depth-first (children by start time) as rows, skipping what is under a `collapsed`
 * span (the time axis stays the whole trace's); `now_ns` closes spans still open. */
export function layout(
  roots: SpanTreeNode[],
  nowNs: number,
  collapsed: ReadonlySet<string> = new Set(),
): { rows: WaterfallRow[]; start_ns: number; end_ns: number } {
  const flat: { node: SpanTreeNode; depth: number }[] = [];
  const walk = (nodes: SpanTreeNode[], depth: number) => {
    for (const n of [...nodes].sort((a, b) => a.start_time_unix_nano - b.start_time_unix_nano)) {
      flat.push({ node: n, depth });
      if (!collapsed.has(n.span_id)) walk(n.children ?? [], depth + 1);
    }
  };
  walk(roots, 0);
  if (flat.length === 0) return { rows: [], start_ns: 0, end_ns: 0 };
  let start = Infinity;
  let end = -Infinity;
  for (const { node } of flat) {
    start = Math.min(start, node.start_time_unix_nano);
    end = Math.max(end, ended(node) ? node.end_time_unix_nano : Math.max(nowNs, node.start_time_unix_nano));
  }
  const total = Math.max(end - start, 1);
  const rows = flat.map(({ node, depth }) => {
    const open = !ended(node);
    const e = open ? Math.max(nowNs, node.start_time_unix_nano) : node.end_time_unix_nano;
    const left = ((node.start_time_unix_nano - start) / total) * 100;
    const width = Math.max(((e - node.start_time_unix_nano) / total) * 100, MIN_BAR_PERCENT);
    const { children, ...span } = node;
    return {
      span: span as Span,
      depth,
      left: Math.min(left, 100 - MIN_BAR_PERCENT),
      width: Math.min(width, 100 - Math.min(left, 100 - MIN_BAR_PERCENT)),
      duration_ms: (e - node.start_time_unix_nano) / 1e6,
      open,
      childCount: children?.length ?? 0,
      orphan: depth === 0 && !!node.parent_span_id,
    };
  });
  return { rows, start_ns: start, end_ns: end };
}

const hueOf = (service: string): number => {
  let h = 0;
  for (let i = 0; i < service.length; i++) h = (h * 31 + service.charCodeAt(i)) >>> 0;
  return h % 360;
};
const colourOf = (hue: number) => `hsl(${Math.round(hue)} 65% 45%)`;

/** A stable colour per service (hue from the name), so one service reads the same everywhere. */
export const serviceColour = (service: string): string => colourOf(hueOf(service));

/** Hues closer than this read as the same colour on a thin bar. */
export const MIN_HUE_GAP = 40;
const GOLDEN_ANGLE = 137.5;

/** The gap a trace of `n` services is held to: MIN_HUE_GAP while the wheel has room, else what
 * placing each hue in the middle of the widest free arc can always keep (180° / (n − 1)). */
export const hueGapFor = (n: number): number => (n <= 1 ? MIN_HUE_GAP : Math.min(MIN_HUE_GAP, Math.floor(180 / (n - 1))));

const hueDistance = (a: number, b: number) => Math.min(Math.abs(a - b), 360 - Math.abs(a - b));

/** The middle of the widest arc between taken hues. */
function widestArcMiddle(taken: readonly number[]): number {
  const sorted = [...taken].sort((a, b) => a - b);
  let best = { width: -1, middle: 0 };
  sorted.forEach((h, i) => {
    const next = i + 1 < sorted.length ? sorted[i + 1]! : sorted[0]! + 360;
    if (next - h > best.width) best = { width: next - h, middle: (h + (next - h) / 2) % 360 };
  });
  return best.middle;
}

/** Colours for the services of one trace: each its own `serviceColour` unless a service before it
 * (by name) already holds a hue within the gap, then moved round the wheel by the golden angle
 * until clear, or, failing that, into the middle of the widest free arc. Stable for a given set of
 * names; every pair at least `hueGapFor(n)` apart. */
export function serviceColours(services: readonly string[]): Map<string, string> {
  const names = [...new Set(services)].sort();
  const gap = hueGapFor(names.length);
  const taken: number[] = [];
  const out = new Map<string, string>();
  const clear = (hue: number) => taken.every((t) => hueDistance(t, hue) >= gap);
  for (const s of names) {
    let hue = hueOf(s);
    for (let tries = 0; tries < 12 && !clear(hue); tries++) hue = (hue + GOLDEN_ANGLE) % 360;
    if (!clear(hue)) hue = widestArcMiddle(taken);
    taken.push(hue);
    out.set(s, colourOf(hue));
  }
  return out;
}

/** The engine's discovery chatter: what a worker connecting and the catalog changing cause (as
 * functions called, or as the trigger types that fire on it). */
export const DISCOVERY_FUNCTIONS: ReadonlySet<string> = new Set([
  "engine::functions-available",
  "engine::workers-available",
  "engine::triggers-available",
  "engine::workers::register",
  "engine::channels::create",
]);
/** Function names that only read (the console's and SDKs' polling): `…::list`, `…::get_state`,
 * `…::info`, a session's `run::events` catch-up. */
const READ_NAME =
  /::(list|list_[a-z_]+|get|get_[a-z_]+|info|tree|messages|events|status|children|jobs|dlq_topics|dlq_messages|list_topics|list_groups|list_keys)$/;
/** A read that fans out further than this is work worth seeing. */
export const MAX_NOISE_SPANS = 3;

/** Not what a person looks for in a trace list: discovery, or a small read-only call (a screen
 * polling, a worker looking something up). Hidden by default, behind a toggle. */
export function isNoise(t: TraceSummary): boolean {
  const fn = t.function_id ?? "";
  if (DISCOVERY_FUNCTIONS.has(fn) || DISCOVERY_FUNCTIONS.has(t.trigger_type ?? "")) return true;
  return (
    t.error_count === 0 &&
    t.span_count <= MAX_NOISE_SPANS &&
    (READ_NAME.test(fn) || fn.startsWith("engine::traces::") || fn.startsWith("engine::logs::"))
  );
}

/** The functions that start an agent turn: a session's "trace" link opens the newest of these. */
export const TURN_FUNCTIONS: ReadonlySet<string> = new Set(["run::start", "run::resume", "run::fork"]);

export function fmtMs(ms: number): string {
  const us = Math.round(ms * 1000);
  if (us < 1000) return `${us} µs`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 2 : 1)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}
export const fmtTime = (ns: number): string =>
  `${new Date(ns / 1e6).toLocaleTimeString(undefined, { hour12: false })}.${String(Math.floor((ns / 1e6) % 1000)).padStart(3, "0")}`;
