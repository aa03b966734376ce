// A small tracer for workers: spans with W3C ids, attributes, events and status, logs
// correlated with the span they were written in, batched into OTLP/JSON and handed to a transport
// as the engine's telemetry frames (a 4-byte ASCII prefix, `OTLP` or `LOGS`, then the JSON; what
// iii-sdk sends on its `/otel` socket). Over WebSocket the frames go as binary frames on the worker's
// control socket; inside a Worker through the engine stub's `telemetry(frame)` RPC (./worker-edge.ts).
//
// It is not an OpenTelemetry SDK (no processors, no exporters to choose from): one span builder,
// one bounded buffer. The parent of a new span is, in order: the `parent` option, the span made
// current by `withSpan`/`withParent`, the invocation being handled (its `traceparent`), else a new
// trace. Calls made through the worker surface carry the current span as their parent.
import { TELEMETRY_PREFIXES, type AttributeValue, type Attributes, type SpanKind, type SpanStatus } from "@iii-edge/protocol/telemetry";
import { MAX_FRAME_BYTES } from "@iii-edge/protocol";
import type { AmbientTrace, TraceFields } from "./client/trace.ts";

export type { AttributeValue, Attributes, SpanKind, SpanStatus } from "@iii-edge/protocol/telemetry";

/** Finished spans kept until the transport takes them. A worker in a turn ends a few dozen spans a
 * second; 2048 covers a reconnect of several seconds at that rate, and past it the oldest are
 * dropped (counted in `dropped.spans`) so an engine that is away cannot grow memory. */
export const MAX_BUFFERED_SPANS = 2048;
/** Log records kept the same way, for the same reason. */
export const MAX_BUFFERED_LOGS = 2048;
/** Spans (or log records) per frame: one frame per flush in the common case, and far below the
 * engine's frame limit with bounded attributes (a frame that would still exceed it is split). */
export const MAX_BATCH = 256;
/** How long a finished span waits for others before a flush (timer mode): short, so a trace is
 * queryable within a fraction of a second, long enough that one turn step is one frame. */
export const FLUSH_DELAY_MS = 200;
/** How long a batch the transport could not take (not connected) waits before the next try: a
 * reconnect takes a second or more, so trying every FLUSH_DELAY_MS would only spin. */
export const RETRY_DELAY_MS = 1_000;
/** Attributes per span/event/log and events per span: OTel's default span limits (128). */
export const MAX_ATTRIBUTES = 128;
export const MAX_EVENTS = 128;
/** A string attribute longer than this is cut: payloads belong in logs, not in attributes. */
export const MAX_ATTRIBUTE_CHARS = 4096;
/** A log body longer than this is cut. */
export const MAX_LOG_BODY_CHARS = 16_384;

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);

export interface SpanContext {
  trace_id: string;
  span_id: string;
  sampled: boolean;
}

/** A W3C `traceparent` read (version 00 layout; an all-zero id is invalid), or undefined. */
export function parseTraceparent(value: string | undefined | null): SpanContext | undefined {
  if (!value) return undefined;
  const m = TRACEPARENT.exec(value.trim().toLowerCase());
  if (!m || m[1] === "ff" || m[2] === ZERO_TRACE || m[3] === ZERO_SPAN) return undefined;
  return { trace_id: m[2], span_id: m[3], sampled: (parseInt(m[4], 16) & 1) === 1 };
}

export function formatTraceparent(ctx: SpanContext): string {
  return `00-${ctx.trace_id}-${ctx.span_id}-${ctx.sampled ? "01" : "00"}`;
}

function randomHex(bytes: number): string {
  const b = new Uint8Array(bytes);
  crypto.getRandomValues(b);
  let s = "";
  for (const x of b) s += x.toString(16).padStart(2, "0");
  return /^0+$/.test(s) ? randomHex(bytes) : s;
}
export const newTraceId = (): string => randomHex(16);
export const newSpanId = (): string => randomHex(8);

/** A span id derived from a string (FNV-1a 64-bit, as hex): for a span that must be parented from
 * several places before it is ended — e.g. across queue steps — without storing its id. */
export function derivedSpanId(seed: string): string {
  let h = 0xcbf29ce484222325n;
  for (let i = 0; i < seed.length; i++) {
    h ^= BigInt(seed.charCodeAt(i));
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  const s = h.toString(16).padStart(16, "0");
  return s === ZERO_SPAN ? "0000000000000001" : s;
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  /** The parent: a `traceparent` (or a span), `null` for a new trace; default: the current one. */
  parent?: string | Span | null;
  /** Start time in ms since the epoch (default: now): for a span that began in an earlier step. */
  startTimeMs?: number;
  /** This span's own id (default: random): see `derivedSpanId`. */
  spanId?: string;
  /** The trace id of a span without a parent (default: a new one): a root made in several steps. */
  traceId?: string;
}

export interface Span {
  readonly traceId: string;
  readonly spanId: string;
  /** This span as a parent, for a call or a stored context. */
  readonly traceparent: string;
  readonly recording: boolean;
  setAttribute(key: string, value: AttributeValue | undefined): Span;
  setAttributes(attributes: Attributes): Span;
  addEvent(name: string, attributes?: Attributes, timeMs?: number): Span;
  /** An `exception` event (OTel's exception.* attributes) and status error. */
  recordException(error: unknown): Span;
  setStatus(status: Exclude<SpanStatus, "unset">, message?: string): Span;
  /** Ends the span (once; later calls do nothing) and queues it for the transport. */
  end(endTimeMs?: number): void;
}

export type LogSeverity = "debug" | "info" | "warn" | "error";

export interface Tracer {
  startSpan(name: string, options?: SpanOptions): Span;
  /** Run `fn` with a new span as the current one; the span ends when `fn` settles (a throw is
   * recorded on it and rethrown). */
  withSpan<T>(name: string, options: SpanOptions, fn: (span: Span) => T | Promise<T>): Promise<T>;
  /** Run `fn` with `parent` (a span or a traceparent) as the current context. */
  withParent<T>(parent: Span | string, fn: () => T): T;
  /** The trace context calls made now carry (the current span, else the invocation's). */
  current(): TraceFields | undefined;
  /** A log record, correlated with the current span. */
  log(severity: LogSeverity, message: string, attributes?: Attributes): void;
  /** Hand everything buffered to the transport now. */
  flush(): Promise<void>;
  /** Spans and log records dropped: buffer full, or too large for one frame. */
  readonly dropped: { spans: number; logs: number };
}

/** Takes one frame (`OTLP…` or `LOGS…`): true (or a promise that resolves) once taken, false when it
 * cannot be sent now (not connected): the batch stays buffered. */
export type TelemetryTransport = (frame: string) => boolean | Promise<boolean>;

export interface TracerOptions {
  /** `service.name` of the resource (the worker's name). */
  serviceName: string;
  /** Where the current context lives (AsyncLocalStorage in Node and workerd). */
  store: AmbientTrace;
  transport: TelemetryTransport;
  /** "timer": flush FLUSH_DELAY_MS after a span ends (a long-running process); "manual": the host
   * calls `flush()` (a Worker, at the end of each invocation). */
  flush: "timer" | "manual";
  /** Resource attributes besides service.name. */
  resource?: Attributes;
  /** Whether a new trace (a span with no parent) is recorded; default always. A child follows its
   * parent's sampled flag. */
  sample?: () => boolean;
  /** false: spans are made and propagate (with their sampled flag) but nothing is kept or sent —
   * for an engine with tracing off, which would drop them anyway. Default true. */
  enabled?: boolean;
  now?: () => number;
}

interface FinishedSpan {
  trace_id: string;
  span_id: string;
  parent_span_id?: string;
  name: string;
  kind: SpanKind;
  start_ms: number;
  end_ms: number;
  attributes: Attributes;
  events: { name: string; time_ms: number; attributes: Attributes }[];
  status: SpanStatus;
  status_message?: string;
}

interface PendingLog {
  time_ms: number;
  severity: LogSeverity;
  body: string;
  attributes: Attributes;
  trace_id?: string;
  span_id?: string;
}

const SEVERITY_NUMBER: Record<LogSeverity, number> = { debug: 5, info: 9, warn: 13, error: 17 };
const SEVERITY_TEXT: Record<LogSeverity, string> = { debug: "DEBUG", info: "INFO", warn: "WARN", error: "ERROR" };
const KIND_NUMBER: Record<SpanKind, number> = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 };
const STATUS_CODE: Record<SpanStatus, number> = { unset: 0, ok: 1, error: 2 };

function boundValue(v: AttributeValue): AttributeValue {
  if (typeof v === "string") return v.length > MAX_ATTRIBUTE_CHARS ? v.slice(0, MAX_ATTRIBUTE_CHARS) : v;
  if (Array.isArray(v)) return v.slice(0, MAX_ATTRIBUTES).map(boundValue);
  return v;
}

function putAttribute(into: Attributes, key: string, value: AttributeValue | undefined): void {
  if (value === undefined || typeof key !== "string" || key === "") return;
  if (typeof value === "number" && !Number.isFinite(value)) return;
  if (!(key in into) && Object.keys(into).length >= MAX_ATTRIBUTES) return;
  into[key] = boundValue(value);
}

function boundedAttributes(attrs: Attributes | undefined): Attributes {
  const out: Attributes = {};
  if (attrs) for (const [k, v] of Object.entries(attrs)) putAttribute(out, k, v);
  return out;
}

// ------------------------------------------------------------------ OTLP/JSON encoding

type AnyValue =
  | { stringValue: string }
  | { boolValue: boolean }
  | { intValue: string }
  | { doubleValue: number }
  | { arrayValue: { values: AnyValue[] } }
  | { kvlistValue: { values: { key: string; value: AnyValue }[] } };

function anyValue(v: AttributeValue): AnyValue {
  if (v === null) return { stringValue: "" };
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (typeof v === "number") return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  if (Array.isArray(v)) return { arrayValue: { values: v.map(anyValue) } };
  return { kvlistValue: { values: Object.entries(v).map(([key, value]) => ({ key, value: anyValue(value) })) } };
}

const keyValues = (attrs: Attributes) => Object.entries(attrs).map(([key, value]) => ({ key, value: anyValue(value) }));
/** Unix ms → nanoseconds as a decimal string (OTLP/JSON writes 64-bit integers as strings). */
const nanos = (ms: number): string => (BigInt(Math.floor(ms)) * 1_000_000n + BigInt(Math.round((ms % 1) * 1e6))).toString();

const SCOPE = { name: "@iii-edge/sdk-edge", version: "0.1.0" };

function encodeSpans(resource: Attributes, spans: FinishedSpan[]): string {
  return JSON.stringify({
    resourceSpans: [
      {
        resource: { attributes: keyValues(resource) },
        scopeSpans: [
          {
            scope: SCOPE,
            spans: spans.map((s) => ({
              traceId: s.trace_id,
              spanId: s.span_id,
              ...(s.parent_span_id ? { parentSpanId: s.parent_span_id } : {}),
              name: s.name,
              kind: KIND_NUMBER[s.kind],
              startTimeUnixNano: nanos(s.start_ms),
              endTimeUnixNano: nanos(s.end_ms),
              attributes: keyValues(s.attributes),
              events: s.events.map((e) => ({ name: e.name, timeUnixNano: nanos(e.time_ms), attributes: keyValues(e.attributes) })),
              status: { code: STATUS_CODE[s.status], ...(s.status_message ? { message: s.status_message } : {}) },
            })),
          },
        ],
      },
    ],
  });
}

function encodeLogs(resource: Attributes, logs: PendingLog[]): string {
  return JSON.stringify({
    resourceLogs: [
      {
        resource: { attributes: keyValues(resource) },
        scopeLogs: [
          {
            scope: SCOPE,
            logRecords: logs.map((l) => ({
              timeUnixNano: nanos(l.time_ms),
              observedTimeUnixNano: nanos(l.time_ms),
              severityNumber: SEVERITY_NUMBER[l.severity],
              severityText: SEVERITY_TEXT[l.severity],
              body: { stringValue: l.body },
              attributes: keyValues(l.attributes),
              ...(l.trace_id ? { traceId: l.trace_id } : {}),
              ...(l.span_id ? { spanId: l.span_id } : {}),
            })),
          },
        ],
      },
    ],
  });
}

/** Past the engine's frame limit in UTF-8 bytes (counted only when the characters alone could be). */
const tooLarge = (frame: string): boolean =>
  frame.length * 3 > MAX_FRAME_BYTES && new TextEncoder().encode(frame).byteLength > MAX_FRAME_BYTES;

// ------------------------------------------------------------------ the tracer

/** A span; one that is not recording (its parent was not sampled, or the tracer is off) still has
 * ids and propagates. */
class SpanImpl implements Span {
  readonly traceId: string;
  readonly spanId: string;
  readonly recording: boolean;
  private readonly sampled: boolean;
  private readonly parentSpanId: string | undefined;
  private readonly startMs: number;
  private readonly attributes: Attributes;
  private readonly events: FinishedSpan["events"] = [];
  private status: SpanStatus = "unset";
  private statusMessage: string | undefined;
  private ended = false;
  private readonly name: string;
  private readonly kind: SpanKind;
  private readonly finish: (span: FinishedSpan) => void;
  private readonly now: () => number;

  constructor(
    name: string,
    kind: SpanKind,
    ctx: SpanContext,
    parentSpanId: string | undefined,
    startMs: number,
    attributes: Attributes,
    finish: (span: FinishedSpan) => void,
    now: () => number,
    enabled: boolean,
  ) {
    this.name = name;
    this.kind = kind;
    this.finish = finish;
    this.now = now;
    this.traceId = ctx.trace_id;
    this.spanId = ctx.span_id;
    this.sampled = ctx.sampled;
    this.recording = ctx.sampled && enabled;
    this.parentSpanId = parentSpanId;
    this.startMs = startMs;
    this.attributes = attributes;
  }

  get traceparent(): string {
    return formatTraceparent({ trace_id: this.traceId, span_id: this.spanId, sampled: this.sampled });
  }

  setAttribute(key: string, value: AttributeValue | undefined): Span {
    if (!this.ended) putAttribute(this.attributes, key, value);
    return this;
  }

  setAttributes(attributes: Attributes): Span {
    for (const [k, v] of Object.entries(attributes)) this.setAttribute(k, v);
    return this;
  }

  addEvent(name: string, attributes?: Attributes, timeMs?: number): Span {
    if (!this.ended && this.events.length < MAX_EVENTS)
      this.events.push({ name, time_ms: timeMs ?? this.now(), attributes: boundedAttributes(attributes) });
    return this;
  }

  recordException(error: unknown): Span {
    const e = error instanceof Error ? error : undefined;
    const code = error && typeof error === "object" ? (error as { code?: unknown }).code : undefined;
    const message = e ? e.message : typeof error === "string" ? error : (JSON.stringify(error) ?? String(error));
    const attrs: Attributes = { "exception.type": typeof code === "string" ? code : (e?.name ?? "Error"), "exception.message": message };
    if (e?.stack) attrs["exception.stacktrace"] = e.stack;
    this.addEvent("exception", attrs);
    this.setStatus("error", message);
    return this;
  }

  setStatus(status: Exclude<SpanStatus, "unset">, message?: string): Span {
    if (this.ended) return this;
    // OTel: ok is final; an error description only goes with error.
    if (this.status === "ok") return this;
    this.status = status;
    this.statusMessage = status === "error" && message ? message.slice(0, MAX_ATTRIBUTE_CHARS) : undefined;
    return this;
  }

  end(endTimeMs?: number): void {
    if (this.ended) return;
    this.ended = true;
    if (!this.recording) return;
    this.finish({
      trace_id: this.traceId,
      span_id: this.spanId,
      parent_span_id: this.parentSpanId,
      name: this.name,
      kind: this.kind,
      start_ms: this.startMs,
      end_ms: Math.max(this.startMs, endTimeMs ?? this.now()),
      attributes: this.attributes,
      events: this.events,
      status: this.status,
      status_message: this.statusMessage,
    });
  }
}

export function createTracer(opts: TracerOptions): Tracer {
  const now = opts.now ?? Date.now;
  const resource: Attributes = {
    "service.name": opts.serviceName,
    "telemetry.sdk.name": "iii-edge",
    "telemetry.sdk.language": "webjs",
    ...opts.resource,
  };
  let spans: FinishedSpan[] = [];
  let logs: PendingLog[] = [];
  const dropped = { spans: 0, logs: 0 };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let flushing: Promise<void> | undefined;

  const schedule = (delayMs = FLUSH_DELAY_MS) => {
    if (opts.flush !== "timer" || timer !== undefined) return;
    timer = setTimeout(() => {
      timer = undefined;
      void tracer.flush();
    }, delayMs);
    // Never the reason a Node process stays alive.
    (timer as { unref?: () => void }).unref?.();
  };

  const finish = (span: FinishedSpan) => {
    if (spans.length >= MAX_BUFFERED_SPANS) {
      spans.shift();
      dropped.spans++;
    }
    spans.push(span);
    schedule();
  };

  const currentContext = (): SpanContext | undefined => parseTraceparent(opts.store.get()?.traceparent);

  const resolveParent = (parent: SpanOptions["parent"]): SpanContext | undefined => {
    if (parent === null) return undefined;
    if (parent === undefined) return currentContext();
    if (typeof parent === "string") return parseTraceparent(parent);
    return parseTraceparent(parent.traceparent);
  };

  /** Send `items` as frames of at most MAX_BATCH, halving a batch whose frame is too large; false
   * when the transport cannot take them now (the untaken rest is returned to the buffer). */
  async function sendAll<T>(items: T[], encode: (batch: T[]) => string, prefix: string, countDropped: (n: number) => void): Promise<T[]> {
    let rest = items;
    while (rest.length > 0) {
      let n = Math.min(MAX_BATCH, rest.length);
      let frame = prefix + encode(rest.slice(0, n));
      while (tooLarge(frame) && n > 1) {
        n = Math.ceil(n / 2);
        frame = prefix + encode(rest.slice(0, n));
      }
      if (tooLarge(frame)) {
        countDropped(1);
        rest = rest.slice(1);
        continue;
      }
      let taken: boolean;
      try {
        taken = await opts.transport(frame);
      } catch {
        taken = false;
      }
      if (!taken) return rest;
      rest = rest.slice(n);
    }
    return rest;
  }

  const tracer: Tracer = {
    dropped,
    startSpan(name, options = {}) {
      const parent = resolveParent(options.parent);
      const ctx: SpanContext = {
        trace_id: parent?.trace_id ?? options.traceId ?? newTraceId(),
        span_id: options.spanId ?? newSpanId(),
        sampled: parent ? parent.sampled : (opts.sample?.() ?? true),
      };
      return new SpanImpl(
        name,
        options.kind ?? "internal",
        ctx,
        parent?.span_id,
        options.startTimeMs ?? now(),
        boundedAttributes(options.attributes),
        finish,
        now,
        opts.enabled !== false,
      );
    },
    async withSpan(name, options, fn) {
      const span = tracer.startSpan(name, options);
      try {
        const result = await tracer.withParent(span, () => fn(span));
        span.end();
        return result;
      } catch (e) {
        span.recordException(e);
        span.end();
        throw e;
      }
    },
    withParent(parent, fn) {
      const traceparent = typeof parent === "string" ? parent : parent.traceparent;
      const baggage = opts.store.get()?.baggage;
      return opts.store.run(baggage ? { traceparent, baggage } : { traceparent }, fn);
    },
    current() {
      const f = opts.store.get();
      return f && (f.traceparent || f.baggage) ? f : undefined;
    },
    log(severity, message, attributes) {
      if (opts.enabled === false) return;
      const ctx = currentContext();
      const body = String(message).slice(0, MAX_LOG_BODY_CHARS);
      if (logs.length >= MAX_BUFFERED_LOGS) {
        logs.shift();
        dropped.logs++;
      }
      logs.push({
        time_ms: now(),
        severity,
        body,
        attributes: boundedAttributes(attributes),
        ...(ctx ? { trace_id: ctx.trace_id, span_id: ctx.span_id } : {}),
      });
      schedule();
    },
    flush() {
      // One flush at a time; a flush asked for meanwhile runs after it (it may have new items).
      const run = async () => {
        const s = spans;
        const l = logs;
        spans = [];
        logs = [];
        const leftSpans = await sendAll(
          s,
          (b) => encodeSpans(resource, b),
          TELEMETRY_PREFIXES.traces,
          (n) => (dropped.spans += n),
        );
        const leftLogs = await sendAll(
          l,
          (b) => encodeLogs(resource, b),
          TELEMETRY_PREFIXES.logs,
          (n) => (dropped.logs += n),
        );
        // Not taken (not connected): back in front of what ended meanwhile, within the bound.
        if (leftSpans.length > 0) {
          const all = [...leftSpans, ...spans];
          dropped.spans += Math.max(0, all.length - MAX_BUFFERED_SPANS);
          spans = all.slice(-MAX_BUFFERED_SPANS);
        }
        if (leftLogs.length > 0) {
          const all = [...leftLogs, ...logs];
          dropped.logs += Math.max(0, all.length - MAX_BUFFERED_LOGS);
          logs = all.slice(-MAX_BUFFERED_LOGS);
        }
        if (leftSpans.length + leftLogs.length > 0) schedule(RETRY_DELAY_MS);
      };
      const next: Promise<void> = (flushing ?? Promise.resolve()).then(run, run).finally(() => {
        if (flushing === next) flushing = undefined;
      });
      flushing = next;
      return next;
    },
  };
  return tracer;
}

/** A tracer that records and sends nothing; its spans still have ids (a new trace each). */
export const noopTracer: Tracer = {
  ...createTracer({
    serviceName: "none",
    store: { run: (_fields, fn) => fn(), get: () => undefined },
    transport: () => true,
    flush: "manual",
    sample: () => false,
  }),
  log: () => undefined,
};

/** The trace fields to send with `request`: its own, else the tracer's current context. */
export function withCurrentTrace<R extends { traceparent?: string; baggage?: string }>(tracer: Tracer, request: R): R {
  if (!request || request.traceparent || request.baggage) return request;
  const cur = tracer.current();
  if (!cur?.traceparent) return request;
  return { ...request, traceparent: cur.traceparent, ...(cur.baggage ? { baggage: cur.baggage } : {}) };
}
