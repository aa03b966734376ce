// A local OTLP/HTTP collector for the suites: a real HTTP server on a free loopback port taking
// OTLP/HTTP JSON on /v1/traces, /v1/logs and /v1/metrics (as the OpenTelemetry Collector's otlphttp
// receiver does: 200 with an empty ExportServiceResponse), decoding what arrives into flat spans,
// log records and metric points a test can assert on. Protobuf bodies are refused with 415 (the
// engine exports JSON). `fail(n)` makes the next n requests answer 503 (or another status), to show
// a failing collector; `stall()` holds every request unanswered until `release()`, a slow one.
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface ReceivedSpan {
  trace_id: string;
  span_id: string;
  parent_span_id?: string;
  name: string;
  kind: number;
  start_time_unix_nano: string;
  end_time_unix_nano: string;
  status_code: number;
  status_message?: string;
  attributes: Record<string, unknown>;
  events: { name: string; attributes: Record<string, unknown> }[];
  service_name: string;
  resource: Record<string, unknown>;
}
export interface ReceivedLog {
  trace_id?: string;
  span_id?: string;
  severity_text?: string;
  severity_number?: number;
  body: unknown;
  attributes: Record<string, unknown>;
  service_name: string;
}
export interface ReceivedMetric {
  name: string;
  service_name: string;
  kind: "gauge" | "sum" | "histogram";
  points: { attributes: Record<string, unknown>; value?: number; count?: number }[];
}

export interface OtlpReceiver {
  /** Base URL for OTEL_EXPORTER_OTLP_ENDPOINT (`http://127.0.0.1:<port>`). */
  url: string;
  spans: ReceivedSpan[];
  logs: ReceivedLog[];
  metrics: ReceivedMetric[];
  /** Every request: path, headers, and the status answered. */
  requests: { path: string; headers: http.IncomingHttpHeaders; status: number }[];
  /** Answer the next `n` requests with `status` (default 503; nothing recorded). */
  fail(n: number, status?: number): void;
  /** Hold every request from now on, read but unanswered, until `release()`. */
  stall(): void;
  /** Answer the held requests (as they would have been) and stop holding. */
  release(): void;
  /** Requests held unanswered now, by path. */
  held(path?: string): number;
  close(): Promise<void>;
}

type Json = Record<string, unknown>;
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const obj = (v: unknown): Json => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : {});

function anyValue(v: unknown): unknown {
  const o = obj(v);
  if ("stringValue" in o) return o.stringValue;
  if ("boolValue" in o) return o.boolValue;
  if ("intValue" in o) return Number(o.intValue);
  if ("doubleValue" in o) return Number(o.doubleValue);
  if ("arrayValue" in o) return arr(obj(o.arrayValue).values).map(anyValue);
  if ("kvlistValue" in o) return attrs(obj(o.kvlistValue).values);
  return null;
}
function attrs(list: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of arr(list)) out[String(obj(kv).key)] = anyValue(obj(kv).value);
  return out;
}

/** Most bytes of one request body (the collector's default is 20 MiB; ours needs far less). */
const MAX_BODY_BYTES = 20 * 1024 * 1024;

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  let failing = 0;
  let failStatus = 503;
  let stalled = false;
  const holding: { path: string; answer: () => void }[] = [];
  const r: OtlpReceiver = {
    url: "",
    spans: [],
    logs: [],
    metrics: [],
    requests: [],
    fail: (n, status = 503) => {
      failing = n;
      failStatus = status;
    },
    stall: () => {
      stalled = true;
    },
    release: () => {
      stalled = false;
      for (const h of holding.splice(0)) h.answer();
    },
    held: (path) => holding.filter((h) => path === undefined || h.path === path).length,
    close: () => {
      r.release();
      return new Promise<void>((res) => server.close(() => res()));
    },
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY_BYTES) chunks.push(c);
    });
    req.on("end", () => {
      const path = (req.url ?? "").split("?")[0]!;
      if (stalled) holding.push({ path, answer: () => handle(path) });
      else handle(path);
    });
    const handle = (path: string) => {
      const answer = (status: number, body = "{}") => {
        r.requests.push({ path, headers: req.headers, status });
        res.writeHead(status, { "content-type": "application/json" }).end(body);
      };
      if (req.method !== "POST" || !["/v1/traces", "/v1/logs", "/v1/metrics"].includes(path)) return answer(404, '{"error":"not found"}');
      if (size > MAX_BODY_BYTES) return answer(413);
      if (!String(req.headers["content-type"] ?? "").startsWith("application/json")) return answer(415);
      if (failing > 0) {
        failing--;
        return answer(failStatus);
      }
      let body: Json;
      try {
        body = obj(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      } catch {
        return answer(400, '{"error":"invalid JSON"}');
      }
      if (path === "/v1/traces") {
        for (const rs of arr(body.resourceSpans)) {
          const resource = attrs(obj(obj(rs).resource).attributes);
          for (const ss of arr(obj(rs).scopeSpans)) {
            for (const s of arr(obj(ss).spans).map(obj)) {
              const status = obj(s.status);
              const span: ReceivedSpan = {
                trace_id: String(s.traceId),
                span_id: String(s.spanId),
                name: String(s.name),
                kind: Number(s.kind ?? 0),
                start_time_unix_nano: String(s.startTimeUnixNano),
                end_time_unix_nano: String(s.endTimeUnixNano),
                status_code: Number(status.code ?? 0),
                attributes: attrs(s.attributes),
                events: arr(s.events).map((e) => ({ name: String(obj(e).name), attributes: attrs(obj(e).attributes) })),
                service_name: String(resource["service.name"] ?? ""),
                resource,
              };
              if (s.parentSpanId) span.parent_span_id = String(s.parentSpanId);
              if (status.message) span.status_message = String(status.message);
              r.spans.push(span);
            }
          }
        }
      } else if (path === "/v1/logs") {
        for (const rl of arr(body.resourceLogs)) {
          const resource = attrs(obj(obj(rl).resource).attributes);
          for (const sl of arr(obj(rl).scopeLogs)) {
            for (const l of arr(obj(sl).logRecords).map(obj)) {
              const log: ReceivedLog = {
                body: anyValue(l.body),
                attributes: attrs(l.attributes),
                service_name: String(resource["service.name"] ?? ""),
              };
              if (l.traceId) log.trace_id = String(l.traceId);
              if (l.spanId) log.span_id = String(l.spanId);
              if (l.severityText) log.severity_text = String(l.severityText);
              if (l.severityNumber !== undefined) log.severity_number = Number(l.severityNumber);
              r.logs.push(log);
            }
          }
        }
      } else {
        for (const rm of arr(body.resourceMetrics)) {
          const resource = attrs(obj(obj(rm).resource).attributes);
          for (const sm of arr(obj(rm).scopeMetrics)) {
            for (const m of arr(obj(sm).metrics).map(obj)) {
              const kind = m.gauge ? "gauge" : m.sum ? "sum" : m.histogram ? "histogram" : undefined;
              if (!kind) continue;
              const points = arr(obj(m[kind]).dataPoints)
                .map(obj)
                .map((p) => {
                  const point: ReceivedMetric["points"][number] = { attributes: attrs(p.attributes) };
                  const v = p.asDouble ?? p.asInt;
                  if (v !== undefined) point.value = Number(v);
                  if (p.count !== undefined) point.count = Number(p.count);
                  return point;
                });
              r.metrics.push({ name: String(m.name), service_name: String(resource["service.name"] ?? ""), kind, points });
            }
          }
        }
      }
      answer(200);
    };
  });
  await new Promise<void>((res) => server.listen(0, "127.0.0.1", () => res()));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return r;
}
