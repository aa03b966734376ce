// The engine's tracer and telemetry pipeline. Spans are plain objects built in memory on the call
// path; finished ones (the engine's, and what workers send on /otel or by RPC) wait in a bounded
// buffer that is flushed off the call path — at FLUSH_SPANS records or FLUSH_INTERVAL_MS after the
// first, whichever comes first — to the trace store (D1, store.ts) and the OTLP exporter.
//
// Context: each hop the engine makes (a call, a fire, an enqueue, a delivery) is a span whose
// parent is the `traceparent` it was given, and the traceparent it passes on names that span, so
// the next hop — an iii-sdk worker's own `execute <fn>` span included — becomes its child.
// Sampling is parent-based: a sampled parent is recorded, an unsampled one (flags 00) is passed on
// untouched; a trace the engine starts is sampled at TRACE_SAMPLE_RATIO and, when not, passed on
// with flags 00 so the hops after it agree.
import { ENGINE_SERVICE_NAME, IN_PROGRESS_ATTRIBUTE } from "@iii-edge/protocol/telemetry";
import type { Attributes, AttributeValue, LogRecord, Span, SpanKind } from "@iii-edge/protocol/telemetry";
import { IIIError, type ErrorBody } from "@iii-edge/protocol";
import type { EnginePorts } from "../ports.ts";
import type { D1Like } from "../queues/dead-letters.ts";
import { telemetryConfig, type TelemetryConfig, type TelemetryVars } from "./config.ts";
import { OtlpExporter, type ExportFetch } from "./exporter.ts";
import { EngineMetrics } from "./metrics.ts";
import { decodeFrame, decodeLogs, decodeMetrics, decodeSpans } from "./otlp.ts";
import { TraceStore } from "./store.ts";

/** Records per flush: one D1 statement (~256 KiB) holds about this many engine spans. */
export const FLUSH_SPANS = 500;
/** Longest a finished span waits in memory before it is written (and what an eviction can lose). */
export const FLUSH_INTERVAL_MS = 1_000;
/** Spans and logs held in memory waiting for a flush: a store that cannot keep up drops the rest
 * (counted in `iii.telemetry.spans.dropped`), never grows the object's memory. */
export const MAX_PENDING = 10_000;
/** Retention runs at most this often per object (three DELETEs over the store's indexes). */
const PRUNE_INTERVAL_MS = 10_000;
/** The engine's own metrics are exported at most this often (on a flush; an idle object sends none). */
const METRICS_EXPORT_INTERVAL_MS = 10_000;
/** Largest telemetry frame taken by RPC (the socket path is bounded by the frame limit already). */
export const MAX_TELEMETRY_FRAME_BYTES = 4 * 1024 * 1024;

const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})/;

/** Random bytes for span and trace ids, drawn from the CSPRNG a pool at a time: one
 * `getRandomValues` per 256 ids instead of a `randomUUID` per id (on workerd the UUID was the
 * dearest part of starting a span). */
const POOL_BYTES = 2048;
const pool = new Uint8Array(POOL_BYTES);
let poolAt = POOL_BYTES;
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

function randomHex(digits: number): string {
  const bytes = digits >> 1;
  if (poolAt + bytes > POOL_BYTES) {
    crypto.getRandomValues(pool);
    poolAt = 0;
  }
  let out = "";
  for (let i = 0; i < bytes; i++) out += HEX[pool[poolAt++]!];
  return out;
}

/** Built-ins whose calls are never traced: reading traces must not make traces. */
const UNTRACED = new Set([
  "engine::traces::list",
  "engine::traces::tree",
  "engine::traces::group_by",
  "engine::traces::clear",
  "engine::logs::list",
  "engine::metrics::list",
]);

export interface TelemetryOptions {
  vars?: TelemetryVars;
  /** D1 (`DB`): where spans and logs are kept. Without it they are only exported. */
  db?: D1Like;
  /** For the OTLP exporter (the shell passes the global fetch). */
  fetch?: ExportFetch;
}

/** One span being recorded (or, `recording` false, only a context being passed on). */
export class ActiveSpan {
  readonly traceparent: string;
  readonly span: Span | undefined;
  private readonly owner: Telemetry | undefined;

  constructor(traceparent: string, span: Span | undefined, owner: Telemetry | undefined) {
    this.traceparent = traceparent;
    this.span = span;
    this.owner = owner;
  }

  get recording(): boolean {
    return this.span !== undefined;
  }

  set(key: string, value: AttributeValue | undefined): this {
    if (this.span && value !== undefined) this.span.attributes[key] = value;
    return this;
  }

  event(name: string, attributes: Attributes = {}): this {
    if (this.span) this.span.events.push({ name, time_unix_nano: this.owner!.nowNanos(), attributes });
    return this;
  }

  /** Record an error: status error and an OTel `exception` event. */
  fail(error: ErrorBody | string): this {
    if (!this.span) return this;
    const e: ErrorBody = typeof error === "string" ? { code: "invocation_failed", message: error } : error;
    this.span.status = "error";
    this.span.status_message = e.message;
    const attrs: Attributes = { "exception.type": e.code, "exception.message": e.message };
    if (e.stacktrace) attrs["exception.stacktrace"] = e.stacktrace;
    this.span.attributes["error.type"] = e.code;
    return this.event("exception", attrs);
  }

  /** Status error without an exception (an HTTP 5xx answered, as OTel's HTTP conventions ask). */
  markError(message: string): this {
    if (this.span) {
      this.span.status = "error";
      this.span.status_message = message;
    }
    return this;
  }

  /** End the span: an outcome sets its status (ok, or error with its exception event). */
  end(outcome?: { ok: true } | { ok: false; error: ErrorBody }): void {
    const s = this.span;
    if (s?.end_time_unix_nano !== 0) return;
    if (outcome) {
      if (outcome.ok) {
        if (s.status === "unset") s.status = "ok";
      } else this.fail(outcome.error);
    }
    s.end_time_unix_nano = this.owner!.nowNanos();
    this.owner!.record(s);
  }
}

export interface StartOptions {
  /** The W3C traceparent of what caused this (absent: a new trace). */
  parent?: string;
  kind?: SpanKind;
  attributes?: Attributes;
}

export class Telemetry {
  readonly config: TelemetryConfig;
  readonly metrics: EngineMetrics;
  readonly store: TraceStore | undefined;
  /** The OTLP exporter when OTEL_EXPORTER_OTLP_ENDPOINT is set (its `buffered` and `inFlight`
   * say what waits for the collector). */
  readonly exporter: OtlpExporter | undefined;
  private readonly ports: EnginePorts;
  private pendingSpans: Span[] = [];
  private pendingLogs: LogRecord[] = [];
  private timer: unknown = null;
  /** The chain of store writes, so a query can wait for what was flushed before it. */
  private writing: Promise<void> = Promise.resolve();
  private lastPrune = 0;
  private traceTokens: number;
  private tokensAt: number;
  private lastMetricsExport = 0;

  constructor(ports: EnginePorts, opts: TelemetryOptions = {}) {
    this.ports = ports;
    this.config = telemetryConfig(opts.vars);
    this.metrics = new EngineMetrics(() => ports.clock.now());
    this.traceTokens = this.config.rateLimit;
    this.tokensAt = ports.clock.now();
    if (opts.db && this.config.store) this.store = new TraceStore(opts.db, ports.namespace);
    if (this.config.exportEndpoint && opts.fetch) {
      this.exporter = new OtlpExporter(
        this.config.exportEndpoint,
        this.config.exportHeaders,
        opts.fetch,
        this.metrics,
        { "service.namespace": ports.namespace },
        ports,
      );
    }
  }

  get tracing(): boolean {
    return this.config.tracing;
  }

  nowNanos(): number {
    return this.ports.clock.now() * 1_000_000;
  }

  private spanId(): string {
    return randomHex(16);
  }

  /** A new trace id: the time in seconds, then 24 random hex digits (as AWS X-Ray's ids are; W3C
   * asks only the right-most 7 bytes be random). Time first, a store's trace-id index grows at its
   * end instead of at a random place — what keeps its inserts cheap while a table is large. */
  private traceId(): string {
    const seconds = Math.floor(this.ports.clock.now() / 1000) >>> 0;
    return seconds.toString(16).padStart(8, "0") + randomHex(24);
  }

  /**
   * Start a span. Undefined when tracing is off or the parent is not sampled: the caller then
   * passes on what it was given, unchanged.
   */
  start(name: string, opts: StartOptions = {}): ActiveSpan | undefined {
    if (!this.config.tracing) return undefined;
    let traceId: string;
    let parentId: string | undefined;
    const m = opts.parent ? TRACEPARENT.exec(opts.parent) : null;
    if (m) {
      // Flags bit 0: sampled. An unsampled trace is passed on untouched.
      if ((parseInt(m[3]!, 16) & 1) === 0) return undefined;
      traceId = m[1]!;
      parentId = m[2]!;
    } else {
      traceId = this.traceId();
      // OTel's TraceIdRatioBased: the trace id's last 8 hex digits (random) against the ratio.
      if (this.config.sampleRatio < 1 && parseInt(traceId.slice(-8), 16) / 0x1_0000_0000 >= this.config.sampleRatio) {
        return new ActiveSpan(`00-${traceId}-${this.spanId()}-00`, undefined, undefined);
      }
      if (this.config.rateLimit > 0 && !this.takeTraceToken()) {
        this.metrics.add("iii.telemetry.traces.rate_limited");
        return new ActiveSpan(`00-${traceId}-${this.spanId()}-00`, undefined, undefined);
      }
    }
    const spanId = this.spanId();
    const span: Span = {
      trace_id: traceId,
      span_id: spanId,
      name,
      start_time_unix_nano: this.nowNanos(),
      end_time_unix_nano: 0,
      status: "unset",
      attributes: opts.attributes ?? {},
      service_name: ENGINE_SERVICE_NAME,
      events: [],
    };
    if (parentId) span.parent_span_id = parentId;
    if (opts.kind) span.kind = opts.kind;
    span.attributes["iii.namespace"] = this.ports.namespace;
    return new ActiveSpan(`00-${traceId}-${spanId}-01`, span, this);
  }

  /** TRACE_RATE_LIMIT's bucket: a new trace takes a token; it refills at the limit a second. */
  private takeTraceToken(): boolean {
    const now = this.ports.clock.now();
    const limit = this.config.rateLimit;
    this.traceTokens = Math.min(limit, this.traceTokens + ((now - this.tokensAt) / 1000) * limit);
    this.tokensAt = now;
    if (this.traceTokens < 1) return false;
    this.traceTokens -= 1;
    return true;
  }

  /** Is this built-in left untraced (the telemetry readers)? */
  untraced(functionId: string): boolean {
    return UNTRACED.has(functionId);
  }

  // ---------------------------------------------------------------- the pipeline

  record(span: Span): void {
    if (this.pendingSpans.length + this.pendingLogs.length >= MAX_PENDING) {
      this.metrics.add("iii.telemetry.spans.dropped");
      return;
    }
    this.pendingSpans.push(span);
    this.scheduleFlush();
  }

  recordLog(log: LogRecord): void {
    if (this.pendingSpans.length + this.pendingLogs.length >= MAX_PENDING) {
      this.metrics.add("iii.telemetry.logs.dropped");
      return;
    }
    this.pendingLogs.push(log);
    this.scheduleFlush();
  }

  private scheduleFlush(): void {
    if (this.pendingSpans.length + this.pendingLogs.length >= FLUSH_SPANS) {
      if (this.timer !== null) {
        this.ports.timers.clear(this.timer);
        this.timer = null;
      }
      this.flush();
      return;
    }
    if (this.timer === null) {
      this.timer = this.ports.timers.set(() => {
        this.timer = null;
        this.flush();
      }, FLUSH_INTERVAL_MS);
    }
  }

  /** Hand what is pending to the store and the exporter (both send in the background: the
   * exporter only appends here, and encodes and posts in a timer's event of its own); the promise
   * settles when the store has it. */
  flush(): Promise<void> {
    const spans = this.pendingSpans;
    const logs = this.pendingLogs;
    this.pendingSpans = [];
    this.pendingLogs = [];
    const now = this.ports.clock.now();
    if (this.exporter) {
      // An in-progress copy is for the store's live view only: a collector gets the finished span.
      const finished = spans.filter((sp) => sp.attributes[IN_PROGRESS_ATTRIBUTE] !== true);
      if (finished.length) this.exporter.offerSpans(finished);
      if (logs.length) this.exporter.offerLogs(logs);
      if (now - this.lastMetricsExport >= METRICS_EXPORT_INTERVAL_MS) {
        this.lastMetricsExport = now;
        this.ports.background(
          this.metrics.list().then((m) => this.exporter!.offerMetrics(metricsBody(m.metrics, this.ports.namespace, now))),
        );
      }
    }
    const store = this.store;
    if (!store || (spans.length === 0 && logs.length === 0)) return this.writing;
    const prune = now - this.lastPrune >= PRUNE_INTERVAL_MS;
    if (prune) this.lastPrune = now;
    const cfg = this.config;
    this.writing = this.writing.then(async () => {
      try {
        if (spans.length) await store.writeSpans(spans);
        if (logs.length) await store.writeLogs(logs);
        this.metrics.add("iii.telemetry.spans.stored", spans.length);
        if (prune) await store.prune(now, cfg);
      } catch (e) {
        this.metrics.add("iii.telemetry.store.failed", spans.length + logs.length);
        this.ports.log.warn("trace store write failed; spans dropped", { error: String(e), spans: spans.length, logs: logs.length });
      }
    });
    this.ports.background(this.writing);
    return this.writing;
  }

  /** Retention now (tests, and engine::traces::clear's neighbours). */
  async prune(): Promise<void> {
    await this.flush();
    if (this.store) await this.store.prune(this.ports.clock.now(), this.config);
  }

  /** Export what is buffered and wait for it (tests). */
  async drainExport(): Promise<void> {
    await this.flush();
    await this.exporter?.settle();
  }

  // ---------------------------------------------------------------- ingest (/otel, RPC)

  /** One `/otel` frame (OTLP / LOGS / MTRC + OTLP/JSON). Malformed: dropped and counted. */
  ingest(frame: string | ArrayBuffer | Uint8Array): boolean {
    if (!this.config.tracing) return false;
    const size = typeof frame === "string" ? frame.length : frame.byteLength;
    if (size > MAX_TELEMETRY_FRAME_BYTES) {
      this.metrics.add("iii.telemetry.frames.refused");
      return false;
    }
    const f = decodeFrame(frame);
    if (!f) {
      this.metrics.add("iii.telemetry.frames.refused");
      return false;
    }
    this.metrics.add(`iii.telemetry.frames.${f.signal}`);
    if (f.signal === "traces") for (const s of decodeSpans(f.body)) this.record(s);
    else if (f.signal === "logs") for (const l of decodeLogs(f.body)) this.recordLog(l);
    else {
      this.metrics.sdkPoints(decodeMetrics(f.body));
      this.exporter?.offerMetrics(f.body);
    }
    return true;
  }

  // ---------------------------------------------------------------- reads

  /** What a query needs first: this object's pending records in the store. */
  async settled(): Promise<TraceStore> {
    if (!this.store) {
      throw new IIIError(
        "function_not_invokable",
        this.config.store
          ? "no trace store is configured (D1 binding DB)"
          : "this engine keeps no traces (TRACE_STORE=off): read them at its OTLP collector",
      );
    }
    await this.flush();
    return this.store;
  }
}

/** The engine's metrics as one OTLP `resourceMetrics` body. */
function metricsBody(metrics: Awaited<ReturnType<EngineMetrics["list"]>>["metrics"], namespace: string, nowMs: number): unknown {
  const t = String(BigInt(nowMs) * 1_000_000n);
  const attrs = (a: Attributes) =>
    Object.entries(a).map(([key, v]) => ({ key, value: typeof v === "number" ? { doubleValue: v } : { stringValue: String(v) } }));
  const out = metrics.map((m) => {
    if (m.type === "histogram") {
      return {
        name: m.name,
        unit: m.unit,
        histogram: {
          aggregationTemporality: 2,
          dataPoints: [
            {
              timeUnixNano: t,
              count: String(m.count),
              sum: m.sum,
              min: m.min,
              max: m.max,
              explicitBounds: m.bounds,
              bucketCounts: m.bucket_counts.map(String),
            },
          ],
        },
      };
    }
    const points = (m.points?.length ? m.points : [{ attributes: {}, value: m.value }]).map((p) => ({
      timeUnixNano: t,
      asDouble: p.value,
      attributes: attrs(p.attributes),
    }));
    return m.type === "counter"
      ? { name: m.name, sum: { aggregationTemporality: 2, isMonotonic: true, dataPoints: points } }
      : { name: m.name, gauge: { dataPoints: points } };
  });
  return {
    resourceMetrics: [
      {
        resource: {
          attributes: [
            { key: "service.name", value: { stringValue: ENGINE_SERVICE_NAME } },
            { key: "service.namespace", value: { stringValue: namespace } },
          ],
        },
        scopeMetrics: [{ scope: { name: "iii-edge" }, metrics: out }],
      },
    ],
  };
}
