// OTLP/HTTP JSON export to a collector (OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces|logs|metrics),
// off the call path: spans and logs are offered to a bounded buffer (full: dropped and counted in
// `iii.telemetry.export.dropped`), and sent in batches, one request per signal at a time, from the
// pipeline's flush. A failed request drops its batch (counted): a dead collector costs a bounded
// buffer, never memory or retries on the call path.
import type { LogRecord, Span } from "@iii-edge/protocol/telemetry";
import type { EngineMetrics } from "./metrics.ts";
import { encodeLogs, encodeSpans } from "./otlp.ts";

/** Spans (and, separately, log records) buffered for export: about a second of a busy object. */
export const MAX_EXPORT_BUFFER = 8_192;
/** Records per OTLP request: the OpenTelemetry SDKs' default max export batch size is 512. */
const EXPORT_BATCH = 512;
/** Raw MTRC bodies (workers' metrics) buffered for export; they arrive about once a minute each. */
const MAX_METRIC_BODIES = 64;
/** A collector that does not answer within this long is given up on for the batch. */
const EXPORT_TIMEOUT_MS = 10_000;

export type ExportFetch = (
  url: string,
  init: { method: string; headers: Record<string, string>; body: string; signal?: AbortSignal },
) => Promise<{ ok: boolean; status: number }>;

export class OtlpExporter {
  private readonly endpoint: string;
  private readonly headers: Record<string, string>;
  private readonly fetch: ExportFetch;
  private readonly metrics: EngineMetrics;
  private readonly resource: Record<string, string>;
  private spans: Span[] = [];
  private logs: LogRecord[] = [];
  private metricBodies: unknown[] = [];
  /** The send loop of each signal while one runs (at most one each). */
  private readonly running: Partial<Record<"traces" | "logs" | "metrics", Promise<void>>> = {};

  constructor(
    endpoint: string,
    headers: Record<string, string>,
    fetch: ExportFetch,
    metrics: EngineMetrics,
    resource: Record<string, string>,
  ) {
    this.endpoint = endpoint;
    this.headers = { "content-type": "application/json", ...headers };
    this.fetch = fetch;
    this.metrics = metrics;
    this.resource = resource;
  }

  offerSpans(spans: Span[]): void {
    const room = MAX_EXPORT_BUFFER - this.spans.length;
    if (spans.length > room) this.metrics.add("iii.telemetry.export.dropped", spans.length - Math.max(room, 0));
    if (room > 0) for (let i = 0; i < Math.min(room, spans.length); i++) this.spans.push(spans[i]!);
  }

  offerLogs(logs: LogRecord[]): void {
    const room = MAX_EXPORT_BUFFER - this.logs.length;
    if (logs.length > room) this.metrics.add("iii.telemetry.export.dropped", logs.length - Math.max(room, 0));
    if (room > 0) for (let i = 0; i < Math.min(room, logs.length); i++) this.logs.push(logs[i]!);
  }

  /** A `resourceMetrics` body (a worker's MTRC frame, or the engine's own), sent as it is. */
  offerMetrics(body: unknown): void {
    if (this.metricBodies.length >= MAX_METRIC_BODIES) {
      this.metrics.add("iii.telemetry.export.dropped");
      return;
    }
    this.metricBodies.push(body);
  }

  get buffered(): number {
    return this.spans.length + this.logs.length + this.metricBodies.length;
  }

  /** Send what is buffered (a batch per signal not already in flight); resolves when sent. */
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

  private sendLoop(signal: "traces" | "logs" | "metrics"): Promise<void> {
    const run = this.sendAll(signal).finally(() => {
      if (this.running[signal] === run) delete this.running[signal];
    });
    this.running[signal] = run;
    return run;
  }

  private async sendAll(signal: "traces" | "logs" | "metrics"): Promise<void> {
    for (;;) {
      let body: unknown;
      let n: number;
      if (signal === "traces") {
        const batch = this.spans.splice(0, EXPORT_BATCH);
        n = batch.length;
        body = n ? encodeSpans(batch, this.resource) : undefined;
      } else if (signal === "logs") {
        const batch = this.logs.splice(0, EXPORT_BATCH);
        n = batch.length;
        body = n ? encodeLogs(batch, this.resource) : undefined;
      } else {
        const b = this.metricBodies.shift();
        n = b === undefined ? 0 : 1;
        body = b;
      }
      if (!n) return;
      await this.post(`/v1/${signal}`, body, n);
    }
  }

  private async post(path: string, body: unknown, n: number): Promise<void> {
    const ctl = typeof AbortController === "function" ? new AbortController() : undefined;
    const timer = ctl ? setTimeout(() => ctl.abort(), EXPORT_TIMEOUT_MS) : undefined;
    try {
      const init: Parameters<ExportFetch>[1] = { method: "POST", headers: this.headers, body: JSON.stringify(body) };
      if (ctl) init.signal = ctl.signal;
      const res = await this.fetch(`${this.endpoint}${path}`, init);
      if (res.ok) this.metrics.add("iii.telemetry.export.sent", n);
      else {
        this.metrics.add("iii.telemetry.export.failed", n);
      }
    } catch {
      this.metrics.add("iii.telemetry.export.failed", n);
    } finally {
      if (timer !== undefined) clearTimeout(timer);
    }
  }
}
