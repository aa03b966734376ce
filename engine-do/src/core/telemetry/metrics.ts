// The engine's own metrics, in memory (counters since the object started): iii's
// `iii.invocations.total` by function and status and `iii.invocation.duration`, gauges read when
// asked (queue depth, open calls, connections — registered by whoever knows them), and the
// telemetry pipeline's own counters. Recording is a map update: nothing on the call path waits.
import type { Attributes, HistogramMetric, Metric, MetricsListOutput } from "@iii-edge/protocol/telemetry";
import type { MetricPoint } from "./otlp.ts";

/** Upper bounds (ms) of iii.invocation.duration's buckets: a routed call is ~1 ms, a model call
 * tens of seconds. */
const DURATION_BOUNDS_MS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000];
/** Most (function, status) series of iii.invocations.total: past it calls count under
 * function `_other`, so a flood of distinct ids cannot grow memory. */
const MAX_SERIES = 1_000;
/** Most SDK metric series (name, service, attributes) kept from `/otel` MTRC frames. */
const MAX_SDK_SERIES = 1_000;

export type GaugeReader = () =>
  | number
  | { attributes: Attributes; value: number }[]
  | Promise<number | { attributes: Attributes; value: number }[]>;

export class EngineMetrics {
  private readonly invocations = new Map<string, { fn: string; status: string; n: number }>();
  private total = 0;
  private readonly buckets = new Array<number>(DURATION_BOUNDS_MS.length + 1).fill(0);
  private count = 0;
  private sum = 0;
  private min = Infinity;
  private max = 0;
  /** Pipeline counters (spans dropped, export failures, …), by metric name. */
  readonly counters = new Map<string, number>();
  private readonly gauges = new Map<string, { read: GaugeReader; description: string }>();
  private readonly sdk = new Map<string, MetricPoint>();
  private readonly now: () => number;

  constructor(now: () => number) {
    this.now = now;
  }

  invocation(functionId: string, ok: boolean, ms: number): void {
    this.total++;
    const status = ok ? "ok" : "error";
    let fn = functionId;
    let key = `${fn}\u0000${status}`;
    let s = this.invocations.get(key);
    if (!s) {
      if (this.invocations.size >= MAX_SERIES) {
        fn = "_other";
        key = `${fn}\u0000${status}`;
        s = this.invocations.get(key);
      }
      if (!s) this.invocations.set(key, (s = { fn, status, n: 0 }));
    }
    s.n++;
    const d = Math.max(ms, 0);
    this.count++;
    this.sum += d;
    if (d < this.min) this.min = d;
    if (d > this.max) this.max = d;
    let i = 0;
    while (i < DURATION_BOUNDS_MS.length && d > DURATION_BOUNDS_MS[i]!) i++;
    this.buckets[i]!++;
  }

  add(name: string, by = 1): void {
    this.counters.set(name, (this.counters.get(name) ?? 0) + by);
  }

  gauge(name: string, description: string, read: GaugeReader): void {
    this.gauges.set(name, { read, description });
  }

  sdkPoints(points: MetricPoint[]): void {
    for (const p of points) {
      const key = `${p.service_name}\u0000${p.name}\u0000${JSON.stringify(p.attributes)}`;
      if (!this.sdk.has(key) && this.sdk.size >= MAX_SDK_SERIES) {
        this.add("iii.telemetry.metrics.dropped");
        continue;
      }
      this.sdk.set(key, p);
    }
  }

  private quantile(q: number): number {
    if (this.count === 0) return 0;
    const rank = q * this.count;
    let acc = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      acc += this.buckets[i]!;
      if (acc >= rank) return i < DURATION_BOUNDS_MS.length ? Math.min(DURATION_BOUNDS_MS[i]!, this.max) : this.max;
    }
    return this.max;
  }

  async list(name?: string): Promise<MetricsListOutput> {
    const metrics: Metric[] = [];
    metrics.push({
      name: "iii.invocations.total",
      type: "counter",
      value: this.total,
      unit: "{invocation}",
      description: "Invocations the engine handled, by function and status",
      points: [...this.invocations.values()].map((s) => ({ attributes: { "iii.function_id": s.fn, status: s.status }, value: s.n })),
    });
    const hist: HistogramMetric = {
      name: "iii.invocation.duration",
      type: "histogram",
      count: this.count,
      sum: this.sum,
      min: this.count ? this.min : 0,
      max: this.max,
      bounds: DURATION_BOUNDS_MS,
      bucket_counts: [...this.buckets],
      p50: this.quantile(0.5),
      p95: this.quantile(0.95),
      p99: this.quantile(0.99),
      unit: "ms",
      description: "Invocation duration as the engine saw it (ms; workerd's clock moves on I/O only)",
    };
    metrics.push(hist);
    for (const [g, { read, description }] of this.gauges) {
      try {
        const v = await read();
        if (typeof v === "number") metrics.push({ name: g, type: "gauge", value: v, description });
        else metrics.push({ name: g, type: "gauge", value: v.reduce((a, p) => a + p.value, 0), points: v, description });
      } catch {
        // a gauge whose source is unavailable (no such table yet) is left out
      }
    }
    for (const [c, v] of this.counters) metrics.push({ name: c, type: "counter", value: v });
    const filtered = name ? metrics.filter((m) => m.name === name) : metrics;
    const sdk_metrics = [...this.sdk.values()].filter((p) => !name || p.name === name);
    return { metrics: filtered, sdk_metrics, timestamp: this.now() };
  }
}
