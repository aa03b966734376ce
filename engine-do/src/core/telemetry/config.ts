// What a deployment tunes of telemetry (wrangler.toml [vars]; `npm start` passes the OTEL_* ones
// through from its environment), parsed once with the defaults and bounds stated here.

export interface TelemetryConfig {
  /** TRACING=on|off (default on): off, the engine makes no spans and stores nothing workers send;
   * trace context is still carried exactly as before. */
  tracing: boolean;
  /** TRACE_STORE=on|off (default on): off, spans and logs are not kept in D1 — only exported (a
   * deployment whose collector is where traces are read), and the engine::traces readers say so. */
  store: boolean;
  /** TRACE_SAMPLE_RATIO (0…1, default 1): head sampling of traces the engine starts; a trace that
   * arrives with a `traceparent` keeps its own sampled flag (parent-based, as OTel's default). */
  sampleRatio: number;
  /** TRACE_RATE_LIMIT (traces a second, default 100; 0: no limit): the most new traces one engine
   * object records each second, after the ratio (a token bucket holding one second's worth). Past
   * it a trace it starts is passed on unsampled and counted (`iii.telemetry.traces.rate_limited`);
   * one that arrives sampled is always recorded, so a trace once started keeps every hop. 100 is
   * what Datadog's tracers default to (DD_TRACE_RATE_LIMIT): enough to see every kind of call a
   * namespace makes, while a flood of calls costs a bounded ~100 spans a second. */
  rateLimit: number;
  /** TRACES_MAX_AGE_MS (default 24 h): spans and logs older than this are dropped. */
  maxAgeMs: number;
  /** TRACES_MAX_SPANS (default 100 000): past it the oldest spans are dropped (logs: the same
   * number of records). */
  maxSpans: number;
  /** TRACES_MAX_BYTES (default 64 MiB): past it (stored JSON bytes) the oldest spans are dropped
   * (logs: the same bound of their own). */
  maxBytes: number;
  /** OTEL_EXPORTER_OTLP_ENDPOINT: base URL of an OTLP/HTTP collector (`/v1/traces`, `/v1/logs`,
   * `/v1/metrics` are appended); absent, nothing is exported. */
  exportEndpoint?: string;
  /** OTEL_EXPORTER_OTLP_HEADERS: `k=v,k2=v2` (values URL-encoded), sent with every export. */
  exportHeaders: Record<string, string>;
}

export const DEFAULT_TRACE_RATE_LIMIT = 100;
export const DEFAULT_MAX_AGE_MS = 24 * 3_600_000;
export const DEFAULT_MAX_SPANS = 100_000;
export const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;
/** Upper bounds of the vars: D1's database limit is 10 GB; one namespace's traces stay far below. */
const MAX_AGE_LIMIT_MS = 90 * 24 * 3_600_000;
const MAX_SPANS_LIMIT = 10_000_000;
const MAX_BYTES_LIMIT = 4 * 1024 * 1024 * 1024;
const MAX_RATE_LIMIT = 1_000_000;

export interface TelemetryVars {
  TRACING?: string;
  TRACE_STORE?: string;
  TRACE_SAMPLE_RATIO?: string;
  TRACE_RATE_LIMIT?: string;
  TRACES_MAX_AGE_MS?: string;
  TRACES_MAX_SPANS?: string;
  TRACES_MAX_BYTES?: string;
  OTEL_EXPORTER_OTLP_ENDPOINT?: string;
  OTEL_EXPORTER_OTLP_HEADERS?: string;
}

const OFF = /^(off|false|0|no)$/i;

function intVar(v: string | undefined, dflt: number, min: number, max: number): number {
  if (!v || !/^\d+$/.test(v.trim())) return dflt;
  const n = Number(v.trim());
  return n >= min && n <= max ? n : dflt;
}

/** `k=v,k2=v2` as OTel's OTEL_EXPORTER_OTLP_HEADERS (W3C baggage-like, values URL-encoded). */
export function parseHeaders(v: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (v ?? "").split(",")) {
    const i = part.indexOf("=");
    if (i <= 0) continue;
    const k = part.slice(0, i).trim();
    let val = part.slice(i + 1).trim();
    try {
      val = decodeURIComponent(val);
    } catch {
      // kept as written
    }
    if (k) out[k] = val;
  }
  return out;
}

export function telemetryConfig(vars: TelemetryVars = {}): TelemetryConfig {
  const ratio = Number(vars.TRACE_SAMPLE_RATIO ?? "1");
  const endpoint = vars.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const cfg: TelemetryConfig = {
    tracing: !OFF.test((vars.TRACING ?? "on").trim()),
    store: !OFF.test((vars.TRACE_STORE ?? "on").trim()),
    sampleRatio: Number.isFinite(ratio) && ratio >= 0 && ratio <= 1 ? ratio : 1,
    rateLimit: intVar(vars.TRACE_RATE_LIMIT, DEFAULT_TRACE_RATE_LIMIT, 0, MAX_RATE_LIMIT),
    maxAgeMs: intVar(vars.TRACES_MAX_AGE_MS, DEFAULT_MAX_AGE_MS, 1_000, MAX_AGE_LIMIT_MS),
    maxSpans: intVar(vars.TRACES_MAX_SPANS, DEFAULT_MAX_SPANS, 1, MAX_SPANS_LIMIT),
    maxBytes: intVar(vars.TRACES_MAX_BYTES, DEFAULT_MAX_BYTES, 1_024, MAX_BYTES_LIMIT),
    exportHeaders: parseHeaders(vars.OTEL_EXPORTER_OTLP_HEADERS),
  };
  if (endpoint && /^https?:\/\//i.test(endpoint)) cfg.exportEndpoint = endpoint.replace(/\/+$/, "");
  return cfg;
}
