// OTLP/HTTP JSON export to a collector (OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces|logs|metrics),
// off the call path. What a call (or the pipeline's flush inside one) pays is an append of the
// records it already has to a bounded buffer — full, the newest are dropped and counted in
// `iii.telemetry.export.dropped`, so the buffer never grows — and at most one zero-delay timer.
// Encoding and the POST happen in that timer's event: a batch of at most EXPORT_BATCH records is
// encoded straight to the request's text and sent as one request, one request per signal at a time.
// A request that fails with what OTLP calls retryable (no answer, 429, 502, 503, 504) is sent again
// after a backoff, at most EXPORT_ATTEMPTS times in all; then its batch is dropped and counted
// (`iii.telemetry.export.failed`). A slow or dead collector therefore costs a bounded buffer and one
// request in flight per signal, never a call's time and never the object's memory.
import type { LogRecord, Span } from "@iii-edge/protocol/telemetry";
import type { Clock, Log, Timers } from "../ports.ts";
import type { EngineMetrics } from "./metrics.ts";
import { encodeLogs, encodeSpans } from "./otlp.ts";

/** Spans (and, separately, log records) buffered for export: about a second of a busy object. */
export const MAX_EXPORT_BUFFER = 8_192;
/** Records per OTLP request: the OpenTelemetry SDKs' default max export batch size is 512. */
export const EXPORT_BATCH = 512;
/** Raw MTRC bodies (workers' metrics) buffered for export; they arrive about once a minute each. */
const MAX_METRIC_BODIES = 64;
/** A collector that does not answer within this long is given up on for the attempt (the OTel
 * SDKs' default export timeout). */
export const EXPORT_TIMEOUT_MS = 10_000;
/** Tries per batch, the first included. Bounded so a dead collector holds one batch at a time for
 * at most 3 timeouts plus the backoffs, while newer records wait in (or drop at) the buffer. */
export const EXPORT_ATTEMPTS = 3;
/** Backoff before the second try; doubled before each later one (OTLP asks for exponential). */
export const EXPORT_RETRY_MS = 1_000;
/** A failing collector is reported in the log at most this often (the counters say how much). */
const FAILURE_LOG_INTERVAL_MS = 60_000;

export type ExportFetch = (
  url: string,
  init: { method: string; headers: Record<string, string>; body: string; signal?: AbortSignal },
) => Promise<{ ok: boolean; status: number }>;

/** What the exporter takes from the engine's ports: its timers and clock (so tests drive time) and
 * its log. */
export interface ExporterPorts {
  timers: Timers;
  clock: Clock;
  log: Log;
  /** Keep the object alive for a send begun in a timer's event (DO: `ctx.waitUntil`). */
  background(p: Promise<unknown>): void;
}

type Signal = "traces" | "logs" | "metrics";

/** OTLP/HTTP's retryable answers (the spec's "Retryable Response Codes"). */
const RETRYABLE = new Set([429, 502, 503, 504]);

export class OtlpExporter {
  private readonly endpoint: string;
  private readonly headers: Record<string, string>;
  private readonly fetch: ExportFetch;
  private readonly metrics: EngineMetrics;
  private readonly resource: Record<string, string>;
  private readonly ports: ExporterPorts;
  private spans: Span[] = [];
  private logs: LogRecord[] = [];
  private metricBodies: unknown[] = [];
  /** The send loop of each signal while one runs (at most one each). */
  private readonly running: Partial<Record<Signal, Promise<void>>> = {};
  /** Records taken from the buffers and not yet sent or given up on. */
  private pending = 0;
  /** The zero-delay timer that starts the sends, while one is set. */
  private wakeTimer: unknown = null;
  private lastFailureLog = Number.NEGATIVE_INFINITY;

  constructor(
    endpoint: string,
    headers: Record<string, string>,
    fetch: ExportFetch,
    metrics: EngineMetrics,
    resource: Record<string, string>,
    ports: ExporterPorts,
  ) {
    this.endpoint = endpoint;
    this.headers = { "content-type": "application/json", ...headers };
    this.fetch = fetch;
    this.metrics = metrics;
    this.resource = resource;
    this.ports = ports;
  }

  offerSpans(spans: Span[]): void {
    this.spans = this.append(this.spans, spans, MAX_EXPORT_BUFFER);
  }

  offerLogs(logs: LogRecord[]): void {
    this.logs = this.append(this.logs, logs, MAX_EXPORT_BUFFER);
  }

  /** A `resourceMetrics` body (a worker's MTRC frame, or the engine's own), sent as it is. */
  offerMetrics(body: unknown): void {
    this.metricBodies = this.append(this.metricBodies, [body], MAX_METRIC_BODIES);
  }

  /** Records waiting in the buffers (not yet taken into a request). */
  get buffered(): number {
    return this.spans.length + this.logs.length + this.metricBodies.length;
  }

  /** Records in a request being sent, or waiting to be sent again. */
  get inFlight(): number {
    return this.pending;
  }

  private append<T>(buffer: T[], items: T[], max: number): T[] {
    const room = max - buffer.length;
    const take = Math.min(Math.max(room, 0), items.length);
    if (take < items.length) this.metrics.add("iii.telemetry.export.dropped", items.length - take);
    if (take === 0) return buffer;
    if (buffer.length === 0 && take === items.length) buffer = items.slice();
    else for (let i = 0; i < take; i++) buffer.push(items[i]!);
    this.wake();
    return buffer;
  }

  /** Start the sends in an event of their own, never inside the caller's. */
  private wake(): void {
    if (this.wakeTimer !== null) return;
    this.wakeTimer = this.ports.timers.set(() => {
      this.wakeTimer = null;
      this.ports.background(this.drain());
    }, 0);
  }

  /** Send what is buffered (a loop per signal not already sending); resolves when those loops end. */
  async drain(): Promise<void> {
    const sends: Promise<void>[] = [];
    if (!this.running.traces && this.spans.length) sends.push(this.sendLoop("traces"));
    if (!this.running.logs && this.logs.length) sends.push(this.sendLoop("logs"));
    if (!this.running.metrics && this.metricBodies.length) sends.push(this.sendLoop("metrics"));
    await Promise.all(sends);
  }

  /** Resolves once nothing is buffered or in flight (tests, and a shutdown that must export all). */
  async settle(): Promise<void> {
    for (;;) {
      await this.drain();
      const running = Object.values(this.running).filter((p): p is Promise<void> => p !== undefined);
      if (running.length === 0 && this.buffered === 0) return;
      await Promise.all(running);
    }
  }

  private sendLoop(signal: Signal): Promise<void> {
    const run = this.sendAll(signal).finally(() => {
      if (this.running[signal] === run) delete this.running[signal];
    });
    this.running[signal] = run;
    return run;
  }

  /** Take the next batch of a signal off its buffer, encoded: the body and how many records. */
  private nextBatch(signal: Signal): { body: string; n: number } | undefined {
    if (signal === "metrics") {
      const b = this.metricBodies.shift();
      return b === undefined ? undefined : { body: JSON.stringify(b), n: 1 };
    }
    const buffer: (Span | LogRecord)[] = signal === "traces" ? this.spans : this.logs;
    if (buffer.length === 0) return undefined;
    let batch: (Span | LogRecord)[];
    if (buffer.length <= EXPORT_BATCH) {
      batch = buffer;
      if (signal === "traces") this.spans = [];
      else this.logs = [];
    } else batch = buffer.splice(0, EXPORT_BATCH);
    const body = signal === "traces" ? encodeSpans(batch as Span[], this.resource) : encodeLogs(batch as LogRecord[], this.resource);
    return { body, n: batch.length };
  }

  private async sendAll(signal: Signal): Promise<void> {
    for (;;) {
      const batch = this.nextBatch(signal);
      if (!batch) return;
      this.pending += batch.n;
      try {
        await this.send(`/v1/${signal}`, batch.body, batch.n);
      } finally {
        this.pending -= batch.n;
      }
    }
  }

  /** One batch: tried until it is taken, refused for good, or EXPORT_ATTEMPTS are spent. */
  private async send(path: string, body: string, n: number): Promise<void> {
    let why = "";
    for (let attempt = 1; ; attempt++) {
      const status = await this.post(path, body);
      if (status === 200) {
        this.metrics.add("iii.telemetry.export.sent", n);
        return;
      }
      why = status === 0 ? "no answer" : `HTTP ${status}`;
      const retryable = status === 0 || RETRYABLE.has(status);
      if (!retryable || attempt >= EXPORT_ATTEMPTS) break;
      this.metrics.add("iii.telemetry.export.retried", n);
      await this.sleep(EXPORT_RETRY_MS * 2 ** (attempt - 1));
    }
    this.metrics.add("iii.telemetry.export.failed", n);
    const now = this.ports.clock.now();
    if (now - this.lastFailureLog >= FAILURE_LOG_INTERVAL_MS) {
      this.lastFailureLog = now;
      this.ports.log.warn("OTLP export failed; batch dropped", { path, records: n, reason: why });
    }
  }

  /** One POST: 200 when taken (any 2xx), the status when refused, 0 when there was no answer. */
  private async post(path: string, body: string): Promise<number> {
    const ctl = typeof AbortController === "function" ? new AbortController() : undefined;
    const timer = ctl ? this.ports.timers.set(() => ctl.abort(), EXPORT_TIMEOUT_MS) : undefined;
    try {
      const init: Parameters<ExportFetch>[1] = { method: "POST", headers: this.headers, body };
      if (ctl) init.signal = ctl.signal;
      const res = await this.fetch(`${this.endpoint}${path}`, init);
      return res.ok ? 200 : res.status || 0;
    } catch {
      return 0;
    } finally {
      if (timer !== undefined) this.ports.timers.clear(timer);
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.ports.timers.set(resolve, ms));
  }
}
