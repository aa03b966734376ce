// OTLP/JSON (the OTLP protobuf messages in their proto3 JSON mapping, ids as hex as OTLP/JSON
// asks), both ways: what workers send on `/otel` decoded into the stored shapes of
// @iii-edge/protocol/telemetry, and the stored shapes encoded for an OTLP/HTTP collector.
// Decoding is defensive: a field of the wrong type is skipped, never trusted or thrown on.
import type {
  AttributeValue,
  Attributes,
  LogRecord,
  Span,
  SpanEvent,
  SpanKind,
  SpanStatus,
  TelemetrySignal,
} from "@iii-edge/protocol/telemetry";
import { isRecord } from "@iii-edge/protocol";

const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** Deepest AnyValue nesting decoded (arrays/kvlists in attributes): a hostile frame cannot recurse
 * the decoder; deeper values are stored as null. */
const MAX_VALUE_DEPTH = 8;
/** Longest string kept in an attribute or a body: a span is a record, not a payload store. */
export const MAX_ATTRIBUTE_CHARS = 4_096;
/** Most attributes kept per span, event or log record (OTel's default attribute count limit). */
const MAX_ATTRIBUTES = 128;
/** Most events kept per span (OTel's default span event count limit). */
const MAX_EVENTS = 128;

const KINDS: (SpanKind | undefined)[] = [undefined, "internal", "server", "client", "producer", "consumer"];
const KIND_NUMBER: Record<SpanKind, number> = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 };
const STATUS_NUMBER: Record<SpanStatus, number> = { unset: 0, ok: 1, error: 2 };

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;

function clip(s: string): string {
  return s.length > MAX_ATTRIBUTE_CHARS ? s.slice(0, MAX_ATTRIBUTE_CHARS) : s;
}

/** OTLP AnyValue → JSON. */
export function anyValue(v: unknown, depth = 0): AttributeValue {
  if (!isRecord(v) || depth > MAX_VALUE_DEPTH) return null;
  if (typeof v.stringValue === "string") return clip(v.stringValue);
  if (typeof v.boolValue === "boolean") return v.boolValue;
  if (v.intValue !== undefined) {
    const n = Number(v.intValue);
    return Number.isFinite(n) ? n : null;
  }
  if (v.doubleValue !== undefined) {
    const n = Number(v.doubleValue);
    return Number.isFinite(n) ? n : null;
  }
  if (isRecord(v.arrayValue))
    return arr(v.arrayValue.values)
      .slice(0, MAX_ATTRIBUTES)
      .map((x) => anyValue(x, depth + 1));
  if (isRecord(v.kvlistValue)) return attributesOf(v.kvlistValue.values, depth + 1) as AttributeValue;
  if (typeof v.bytesValue === "string") return clip(v.bytesValue);
  return null;
}

export function attributesOf(list: unknown, depth = 0): Attributes {
  const out: Attributes = {};
  let n = 0;
  for (const kv of arr(list)) {
    if (!isRecord(kv) || typeof kv.key !== "string") continue;
    if (++n > MAX_ATTRIBUTES) break;
    out[kv.key] = anyValue(kv.value, depth);
  }
  return out;
}

/** Unix nanoseconds of an OTLP fixed64 (a decimal string or a number). */
function nanos(v: unknown): number {
  const n = typeof v === "string" ? Number(v) : typeof v === "number" ? v : NaN;
  return Number.isFinite(n) && n >= 0 ? n : 0;
}

/** OTLP/JSON ids are hex; some exporters send base64 (the protobuf JSON default): both accepted. */
function hexId(v: unknown, len: 16 | 32): string | undefined {
  if (typeof v !== "string" || v === "") return undefined;
  const lower = v.toLowerCase();
  if ((len === 32 ? HEX32 : HEX16).test(lower)) return lower;
  try {
    const bin = atob(v);
    if (bin.length * 2 !== len) return undefined;
    let hex = "";
    for (let i = 0; i < bin.length; i++) hex += bin.charCodeAt(i).toString(16).padStart(2, "0");
    return /^0+$/.test(hex) ? undefined : hex;
  } catch {
    return undefined;
  }
}

function serviceOf(resource: unknown): string {
  const attrs = isRecord(resource) ? attributesOf(resource.attributes) : {};
  const name = attrs["service.name"];
  return typeof name === "string" && name ? name : "unknown_service";
}

function statusOf(v: unknown): { status: SpanStatus; message?: string } {
  if (!isRecord(v)) return { status: "unset" };
  const c = v.code;
  const status: SpanStatus = c === 2 || c === "STATUS_CODE_ERROR" ? "error" : c === 1 || c === "STATUS_CODE_OK" ? "ok" : "unset";
  return typeof v.message === "string" && v.message ? { status, message: clip(v.message) } : { status };
}

function kindOf(v: unknown): SpanKind | undefined {
  if (typeof v === "number") return KINDS[v];
  if (typeof v === "string") {
    const k = v.replace(/^SPAN_KIND_/, "").toLowerCase();
    return (KINDS as unknown[]).includes(k) ? (k as SpanKind) : undefined;
  }
  return undefined;
}

/** `resourceSpans` → spans (those without valid ids are skipped). */
export function decodeSpans(body: unknown): Span[] {
  const out: Span[] = [];
  for (const rs of arr(isRecord(body) ? body.resourceSpans : undefined)) {
    if (!isRecord(rs)) continue;
    const service_name = serviceOf(rs.resource);
    for (const ss of arr(rs.scopeSpans ?? rs.instrumentationLibrarySpans)) {
      if (!isRecord(ss)) continue;
      for (const s of arr(ss.spans)) {
        if (!isRecord(s)) continue;
        const trace_id = hexId(s.traceId, 32);
        const span_id = hexId(s.spanId, 16);
        if (!trace_id || !span_id) continue;
        const { status, message } = statusOf(s.status);
        const span: Span = {
          trace_id,
          span_id,
          name: typeof s.name === "string" ? clip(s.name) : "",
          start_time_unix_nano: nanos(s.startTimeUnixNano),
          end_time_unix_nano: nanos(s.endTimeUnixNano),
          status,
          attributes: attributesOf(s.attributes),
          service_name,
          events: arr(s.events)
            .slice(0, MAX_EVENTS)
            .filter(isRecord)
            .map(
              (e): SpanEvent => ({
                name: typeof e.name === "string" ? clip(e.name) : "",
                time_unix_nano: nanos(e.timeUnixNano),
                attributes: attributesOf(e.attributes),
              }),
            ),
        };
        const parent = hexId(s.parentSpanId, 16);
        if (parent) span.parent_span_id = parent;
        const kind = kindOf(s.kind);
        if (kind) span.kind = kind;
        if (message) span.status_message = message;
        out.push(span);
      }
    }
  }
  return out;
}

/** `resourceLogs` → log records. */
export function decodeLogs(body: unknown): LogRecord[] {
  const out: LogRecord[] = [];
  for (const rl of arr(isRecord(body) ? body.resourceLogs : undefined)) {
    if (!isRecord(rl)) continue;
    const service_name = serviceOf(rl.resource);
    for (const sl of arr(rl.scopeLogs)) {
      if (!isRecord(sl)) continue;
      for (const r of arr(sl.logRecords)) {
        if (!isRecord(r)) continue;
        const rec: LogRecord = {
          time_unix_nano: nanos(r.timeUnixNano) || nanos(r.observedTimeUnixNano),
          severity_text: typeof r.severityText === "string" ? r.severityText.slice(0, 32) : "",
          body: anyValue(r.body),
          attributes: attributesOf(r.attributes),
          service_name,
        };
        if (typeof r.severityNumber === "number") rec.severity_number = r.severityNumber;
        const t = hexId(r.traceId, 32);
        const sp = hexId(r.spanId, 16);
        if (t) rec.trace_id = t;
        if (sp) rec.span_id = sp;
        out.push(rec);
      }
    }
  }
  return out;
}

export interface MetricPoint {
  name: string;
  service_name: string;
  value: number;
  time_unix_nano: number;
  attributes: Attributes;
}

/** `resourceMetrics` → the latest value of each gauge/sum point (histograms: their sum). */
export function decodeMetrics(body: unknown): MetricPoint[] {
  const out: MetricPoint[] = [];
  for (const rm of arr(isRecord(body) ? body.resourceMetrics : undefined)) {
    if (!isRecord(rm)) continue;
    const service_name = serviceOf(rm.resource);
    for (const sm of arr(rm.scopeMetrics)) {
      if (!isRecord(sm)) continue;
      for (const m of arr(sm.metrics)) {
        if (!isRecord(m) || typeof m.name !== "string") continue;
        const data = isRecord(m.gauge) ? m.gauge : isRecord(m.sum) ? m.sum : isRecord(m.histogram) ? m.histogram : undefined;
        if (!data) continue;
        for (const p of arr(data.dataPoints)) {
          if (!isRecord(p)) continue;
          const raw = p.asDouble ?? p.asInt ?? p.sum;
          const value = Number(raw);
          if (!Number.isFinite(value)) continue;
          out.push({
            name: m.name.slice(0, 256),
            service_name,
            value,
            time_unix_nano: nanos(p.timeUnixNano),
            attributes: attributesOf(p.attributes),
          });
        }
      }
    }
  }
  return out;
}

// ------------------------------------------------------------------ frames

/** A `/otel` frame: 4 ASCII bytes naming the signal, then OTLP/JSON (protocol/README.md §11). */
export function decodeFrame(frame: string | ArrayBuffer | Uint8Array): { signal: TelemetrySignal; body: unknown } | undefined {
  let text: string;
  if (typeof frame === "string") text = frame;
  else {
    const bytes = frame instanceof Uint8Array ? frame : new Uint8Array(frame);
    text = new TextDecoder().decode(bytes);
  }
  const head = text.slice(0, 4);
  const signal: TelemetrySignal | undefined =
    head === "OTLP" ? "traces" : head === "LOGS" ? "logs" : head === "MTRC" ? "metrics" : undefined;
  if (!signal) return undefined;
  try {
    return { signal, body: JSON.parse(text.slice(4)) };
  } catch {
    return undefined;
  }
}

// ------------------------------------------------------------------ encoding (export)
//
// Straight to the request body's text in one pass: no OTLP-shaped objects are built and then
// stringified (that doubled the allocation and the walk). Every string goes through
// JSON.stringify, so escaping is exactly JSON's; the keys are the proto3 JSON mapping's names.

const str = JSON.stringify as (s: string) => string;

function anyValueJson(v: AttributeValue): string {
  if (typeof v === "string") return `{"stringValue":${str(v)}}`;
  if (typeof v === "boolean") return v ? '{"boolValue":true}' : '{"boolValue":false}';
  if (typeof v === "number") {
    // int64 is a decimal string in OTLP/JSON; an integer past 2^53 is not exact and may print in
    // exponent form, so it goes as a double. A non-finite double has no JSON form: an empty value.
    if (Number.isSafeInteger(v)) return `{"intValue":"${v}"}`;
    return Number.isFinite(v) ? `{"doubleValue":${v}}` : "{}";
  }
  if (v === null) return "{}";
  if (Array.isArray(v)) {
    let out = '{"arrayValue":{"values":[';
    for (let i = 0; i < v.length; i++) out += (i ? "," : "") + anyValueJson(v[i]!);
    return `${out}]}}`;
  }
  return `{"kvlistValue":{"values":${attributesJson(v)}}}`;
}

/** Attributes as an OTLP `KeyValue` list. */
export function attributesJson(a: Attributes): string {
  let out = "[";
  let first = true;
  for (const k in a) {
    out += `${first ? "" : ","}{"key":${str(k)},"value":${anyValueJson(a[k]!)}}`;
    first = false;
  }
  return `${out}]`;
}

/** Fixed64 nanoseconds as OTLP/JSON writes them: a decimal string (a JS number below 1e21 prints
 * all its digits). */
const nanoString = (n: number) => String(Math.round(n));

const SCOPE_JSON = '{"name":"iii-edge","version":"0.1.0"}';

function byService<T extends { service_name: string }>(items: T[]): Map<string, T[]> {
  const m = new Map<string, T[]>();
  for (const it of items) {
    let l = m.get(it.service_name);
    if (!l) m.set(it.service_name, (l = []));
    l.push(it);
  }
  return m;
}

function resourceJson(resource: Attributes, service: string): string {
  return `{"attributes":${attributesJson({ ...resource, "service.name": service })}}`;
}

function spanJson(s: Span): string {
  let out = `{"traceId":${str(s.trace_id)},"spanId":${str(s.span_id)}`;
  if (s.parent_span_id) out += `,"parentSpanId":${str(s.parent_span_id)}`;
  out += `,"name":${str(s.name)},"kind":${s.kind ? KIND_NUMBER[s.kind] : 0}`;
  out += `,"startTimeUnixNano":"${nanoString(s.start_time_unix_nano)}","endTimeUnixNano":"${nanoString(s.end_time_unix_nano)}"`;
  out += `,"attributes":${attributesJson(s.attributes)},"events":[`;
  for (let i = 0; i < s.events.length; i++) {
    const e = s.events[i]!;
    out += `${i ? "," : ""}{"name":${str(e.name)},"timeUnixNano":"${nanoString(e.time_unix_nano)}","attributes":${attributesJson(e.attributes)}}`;
  }
  out += `],"status":{"code":${STATUS_NUMBER[s.status]}`;
  if (s.status_message) out += `,"message":${str(s.status_message)}`;
  return `${out}}}`;
}

function logJson(l: LogRecord): string {
  let out = `{"timeUnixNano":"${nanoString(l.time_unix_nano)}"`;
  if (l.severity_number !== undefined) out += `,"severityNumber":${l.severity_number}`;
  out += `,"severityText":${str(l.severity_text)},"body":${anyValueJson(l.body)},"attributes":${attributesJson(l.attributes)}`;
  if (l.trace_id) out += `,"traceId":${str(l.trace_id)}`;
  if (l.span_id) out += `,"spanId":${str(l.span_id)}`;
  return `${out}}`;
}

/** An `ExportTraceServiceRequest` (OTLP/JSON), one `resourceSpans` per service. */
export function encodeSpans(spans: Span[], resource: Attributes = {}): string {
  let out = '{"resourceSpans":[';
  let first = true;
  for (const [service, list] of byService(spans)) {
    out += `${first ? "" : ","}{"resource":${resourceJson(resource, service)},"scopeSpans":[{"scope":${SCOPE_JSON},"spans":[`;
    for (let i = 0; i < list.length; i++) out += (i ? "," : "") + spanJson(list[i]!);
    out += "]}]}";
    first = false;
  }
  return `${out}]}`;
}

/** An `ExportLogsServiceRequest` (OTLP/JSON), one `resourceLogs` per service. */
export function encodeLogs(logs: LogRecord[], resource: Attributes = {}): string {
  let out = '{"resourceLogs":[';
  let first = true;
  for (const [service, list] of byService(logs)) {
    out += `${first ? "" : ","}{"resource":${resourceJson(resource, service)},"scopeLogs":[{"scope":${SCOPE_JSON},"logRecords":[`;
    for (let i = 0; i < list.length; i++) out += (i ? "," : "") + logJson(list[i]!);
    out += "]}]}";
    first = false;
  }
  return `${out}]}`;
}
