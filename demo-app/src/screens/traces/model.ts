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
export function layout(roots: SpanTreeNode[], nowNs: number, collapsed: ReadonlySet<string> = new Set()): { rows: WaterfallRow[]; start_ns: number; end_ns: number } {
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
    return { span: span as Span, depth, left: Math.min(left, 100 - MIN_BAR_PERCENT), width: Math.min(width, 100 - Math.min(left, 100 - MIN_BAR_PERCENT)), duration_ms: (e - node.start_time_unix_nano) / 1e6, open, childCount: children?.length ?? 0, orphan: depth === 0 && !!node.parent_span_id };
  });
  return { rows, start_ns: start, end_ns: end };
}

/** A stable colour per service (hue from the name), so one service reads the same everywhere. */
export function serviceColour(service: string): string {
  let h = 0;
  for (let i = 0; i < service.length; i++) h = (h * 31 + service.charCodeAt(i)) >>> 0;
  return `hsl(${h % 360} 65% 45%)`;
}

export function fmtMs(ms: number): string {
  const us = Math.round(ms * 1000);
  if (us < 1000) return `${us} µs`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 2 : 1)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}
export const fmtTime = (ns: number): string => `${new Date(ns / 1e6).toLocaleTimeString(undefined, { hour12: false })}.${String(Math.floor((ns / 1e6) % 1000)).padStart(3, "0")}`;
