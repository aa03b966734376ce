// Observability contracts: the spans, logs and metrics the engine stores, and the
// request/response shapes of its telemetry built-ins, following iii v0.23's own
// (`engine::traces::list|tree|group_by|clear`, `engine::logs::list`, `engine::metrics::list`).
// Shared by the engine (engine-do/src/core/telemetry), the SDKs' tracers and the demo's waterfall.
//
// Shapes as iii's console reads them: ids lower-case hex (trace 32, span 16), times as unix
// nanoseconds in JSON numbers (iii serialises its u64s as numbers; in JS that keeps ~256 ns of
// precision, plenty for a waterfall), `status` a lower-case string, `attributes` a flat object of
// OTel attribute values (iii's older console took `[key, value][]`; its current one reads the
// object).
import { z } from "zod";

/** An OTel attribute value as stored: OTLP's AnyValue flattened to JSON. */
export type AttributeValue = string | number | boolean | null | AttributeValue[] | { [k: string]: AttributeValue };
export type Attributes = Record<string, AttributeValue>;

export const SPAN_STATUSES = ["unset", "ok", "error"] as const;
export type SpanStatus = (typeof SPAN_STATUSES)[number];
export const SPAN_KINDS = ["internal", "server", "client", "producer", "consumer"] as const;
export type SpanKind = (typeof SPAN_KINDS)[number];

export interface SpanEvent {
  name: string;
  time_unix_nano: number;
  attributes: Attributes;
}

export interface Span {
  trace_id: string;
  span_id: string;
  /** Absent (or empty) on a root span. */
  parent_span_id?: string;
  name: string;
  kind?: SpanKind;
  start_time_unix_nano: number;
  end_time_unix_nano: number;
  status: SpanStatus;
  /** The status description (an error's message). */
  status_message?: string;
  attributes: Attributes;
  /** `service.name` of the resource that made it: `iii-engine` for the engine's own spans. */
  service_name: string;
  events: SpanEvent[];
}

export type SpanTreeNode = Span & { children: SpanTreeNode[] };

export interface LogRecord {
  trace_id?: string;
  span_id?: string;
  time_unix_nano: number;
  /** OTel severity number (1–24), when the sender gave one. */
  severity_number?: number;
  severity_text: string;
  body: AttributeValue;
  attributes: Attributes;
  service_name: string;
}

/** The service name of the spans and logs the engine makes itself. */
export const ENGINE_SERVICE_NAME = "iii-engine";

/** Marks an in-progress copy of a long span (a turn's `invoke_agent`), sent when it starts so a
 * running trace has its root: the store keeps it until the finished span (same id, later end)
 * replaces it; exporters never send it. A viewer draws such a span as still running. */
export const IN_PROGRESS_ATTRIBUTE = "iii.span.in_progress";

// ------------------------------------------------------------------ built-ins

const LIST_LIMIT_MAX = 1_000;
const paging = {
  offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  limit: z.number().int().min(1).max(LIST_LIMIT_MAX).optional(),
};
const hexId = (n: number) => z.string().regex(new RegExp(`^[0-9a-f]{${n}}$`), `${n} lower-case hex digits`);
/** Unix time bounds: nanoseconds, as iii takes them (a value below 1e14 is read as milliseconds). */
const timeBound = z.number().min(0).optional();

/** `engine::traces::list`: spans newest first. `start_time`/`end_time` bound a span's start. */
export const tracesListInput = z
  .object({
    trace_id: hexId(32).optional(),
    span_id: hexId(16).optional(),
    service_name: z.string().max(256).optional(),
    /** Substring of the span name. */
    name: z.string().max(512).optional(),
    status: z.enum(SPAN_STATUSES).optional(),
    /** Spans carrying attribute `iii.session.id` (or `session_id`) equal to this. */
    session_id: z.string().max(512).optional(),
    /** Spans carrying attribute `iii.function_id` (or `faas.invoked_name`) equal to this. */
    function_id: z.string().max(512).optional(),
    start_time: timeBound,
    end_time: timeBound,
    ...paging,
  })
  .default({});
export type TracesListInput = z.input<typeof tracesListInput>;
export interface TracesListOutput {
  spans: Span[];
  total: number;
  offset: number;
  limit: number;
}

export const tracesTreeInput = z.object({ trace_id: hexId(32) });
export type TracesTreeInput = z.input<typeof tracesTreeInput>;
export interface TracesTreeOutput {
  roots: SpanTreeNode[];
}

/** `engine::traces::group_by` (iii's): spans grouped by one attribute's value (`attribute`, e.g.
 * `iii.session.id`, `iii.function_id`), or by a span field (`field`: name, service_name, status). */
export const tracesGroupByInput = z
  .object({
    attribute: z.string().min(1).max(256).optional(),
    field: z.enum(["name", "service_name", "status", "trace_id"]).optional(),
    start_time: timeBound,
    end_time: timeBound,
    limit: z.number().int().min(1).optional(),
    /** Accepted for iii compatibility; the engine's own spans are always included. */
    include_internal: z.boolean().optional(),
  })
  .refine((v) => (v.attribute === undefined) !== (v.field === undefined), { message: "give exactly one of attribute or field" });
export type TracesGroupByInput = z.input<typeof tracesGroupByInput>;
export interface TraceGroup {
  value: string;
  trace_ids: string[];
  span_count: number;
  error_count: number;
  first_seen_ms: number;
  last_seen_ms: number;
  /** last_seen − first_seen (spans' start to end). */
  duration_ms: number;
  /** Mean span duration in the group. */
  avg_duration_ms: number;
}
export interface TracesGroupByOutput {
  groups: TraceGroup[];
}

export const tracesClearInput = z.unknown();
export interface TracesClearOutput {
  success: true;
}

/** `engine::logs::list`: log records newest first. */
export const logsListInput = z
  .object({
    trace_id: hexId(32).optional(),
    span_id: hexId(16).optional(),
    service_name: z.string().max(256).optional(),
    severity_text: z.string().max(32).optional(),
    /** Records at or above this OTel severity number. */
    severity_min: z.number().int().min(0).max(24).optional(),
    start_time: timeBound,
    end_time: timeBound,
    ...paging,
  })
  .default({});
export type LogsListInput = z.input<typeof logsListInput>;
export interface LogsListOutput {
  logs: LogRecord[];
  total: number;
  offset: number;
  limit: number;
}

// ------------------------------------------------------------------ metrics

export interface CounterMetric {
  name: string;
  type: "counter";
  value: number;
  /** Per-attribute-set values, e.g. by `iii.function_id` and `status`. */
  points?: { attributes: Attributes; value: number }[];
  unit?: string;
  description?: string;
}
export interface GaugeMetric {
  name: string;
  type: "gauge";
  value: number;
  points?: { attributes: Attributes; value: number }[];
  unit?: string;
  description?: string;
}
export interface HistogramMetric {
  name: string;
  type: "histogram";
  count: number;
  sum: number;
  min: number;
  max: number;
  /** Upper bounds (ms) and the count in each bucket (one more than bounds: the overflow). */
  bounds: number[];
  bucket_counts: number[];
  p50: number;
  p95: number;
  p99: number;
  unit: string;
  description?: string;
}
export type Metric = CounterMetric | GaugeMetric | HistogramMetric;

/**
 * `engine::metrics::list` → the engine's current metrics: `iii.invocations.total` (counter, by
 * function and status), `iii.invocation.duration` (histogram, ms), `iii.queue.depth`,
 * `iii.queue.dlq.size`, `iii.invocations.open`, `iii.connections` (gauges), and the telemetry
 * pipeline's own (`iii.telemetry.spans.dropped`, `iii.telemetry.export.dropped`, …). Metrics that
 * workers sent on `/otel` (`MTRC` frames) are listed under `sdk_metrics`, latest value per name
 * and service.
 */
export const metricsListInput = z.object({ name: z.string().max(256).optional() }).default({});
export type MetricsListInput = z.input<typeof metricsListInput>;
export interface MetricsListOutput {
  metrics: Metric[];
  sdk_metrics: { name: string; service_name: string; value: number; time_unix_nano: number; attributes: Attributes }[];
  timestamp: number;
}

// ------------------------------------------------------------------ output schemas
// What the built-ins answer, as schemas (BUILTINS in builtins.ts publishes them as response_format).
// Attribute values are any JSON (OTLP's AnyValue flattened).

const attributes = z.record(z.string(), z.unknown());
const nanos = z.number().min(0);
export const spanSchema = z.object({
  trace_id: z.string(),
  span_id: z.string(),
  parent_span_id: z.string().optional(),
  name: z.string(),
  kind: z.enum(SPAN_KINDS).optional(),
  start_time_unix_nano: nanos,
  end_time_unix_nano: nanos,
  status: z.enum(SPAN_STATUSES),
  status_message: z.string().optional(),
  attributes,
  service_name: z.string(),
  events: z.array(z.object({ name: z.string(), time_unix_nano: nanos, attributes })),
});
export const spanTreeNodeSchema = spanSchema.extend({
  get children() {
    return z.array(spanTreeNodeSchema);
  },
});
const count = z.number().int().min(0);
export const tracesListOutput = z.object({ spans: z.array(spanSchema), total: count, offset: count, limit: count });
export const tracesTreeOutput = z.object({ roots: z.array(spanTreeNodeSchema) });
export const tracesGroupByOutput = z.object({
  groups: z.array(
    z.object({
      value: z.string(),
      trace_ids: z.array(z.string()),
      span_count: count,
      error_count: count,
      first_seen_ms: z.number(),
      last_seen_ms: z.number(),
      duration_ms: z.number(),
      avg_duration_ms: z.number(),
    }),
  ),
});
export const tracesClearOutput = z.object({ success: z.literal(true) });
export const logRecordSchema = z.object({
  trace_id: z.string().optional(),
  span_id: z.string().optional(),
  time_unix_nano: nanos,
  severity_number: z.number().int().optional(),
  severity_text: z.string(),
  body: z.unknown(),
  attributes,
  service_name: z.string(),
});
export const logsListOutput = z.object({ logs: z.array(logRecordSchema), total: count, offset: count, limit: count });
const points = z.array(z.object({ attributes, value: z.number() })).optional();
/** A counter's or a gauge's reading: one value, with per-attribute points when it has any. */
const scalarMetric = <T extends "counter" | "gauge">(type: T) =>
  z.object({
    name: z.string(),
    type: z.literal(type),
    value: z.number(),
    points,
    unit: z.string().optional(),
    description: z.string().optional(),
  });
export const metricSchema = z.discriminatedUnion("type", [
  scalarMetric("counter"),
  scalarMetric("gauge"),
  z.object({
    name: z.string(),
    type: z.literal("histogram"),
    count,
    sum: z.number(),
    min: z.number(),
    max: z.number(),
    bounds: z.array(z.number()),
    bucket_counts: z.array(count),
    p50: z.number(),
    p95: z.number(),
    p99: z.number(),
    unit: z.string(),
    description: z.string().optional(),
  }),
]);
export const metricsListOutput = z.object({
  metrics: z.array(metricSchema),
  sdk_metrics: z.array(z.object({ name: z.string(), service_name: z.string(), value: z.number(), time_unix_nano: nanos, attributes })),
  timestamp: z.number(),
});

// ------------------------------------------------------------------ /otel framing

/** The 4-byte ASCII prefixes of a telemetry frame (protocol/README.md §11): OTLP/JSON after them. */
export const TELEMETRY_PREFIXES = { traces: "OTLP", logs: "LOGS", metrics: "MTRC" } as const;
export type TelemetrySignal = keyof typeof TELEMETRY_PREFIXES;
