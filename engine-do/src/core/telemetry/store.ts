// The trace store: spans and log records in D1 (migration 0003_telemetry.sql), written in batches
// off the call path and bounded by age, count and bytes (oldest dropped first). D1 because a trace
// crosses namespaces — one Durable Object each — and one query must see all of it (the
// architecture's "D1 holds traces"); each object's writes are batched into one statement per
// ~256 KiB (rows as one JSON parameter read as JSONB by jsonb_each, so D1's 100-parameter limit never
// caps a batch), at most one flush per FLUSH_INTERVAL_MS (pipeline.ts).
import { IIIError } from "@iii-edge/protocol";
import type {
  Attributes,
  LogRecord,
  LogsListOutput,
  Span,
  SpanEvent,
  SpanTreeNode,
  TraceGroup,
  TracesGroupByOutput,
  TracesListOutput,
} from "@iii-edge/protocol/telemetry";
import type { z } from "zod";
import type { logsListInput, tracesGroupByInput, tracesListInput } from "@iii-edge/protocol/telemetry";
import type { D1Like } from "../queues/dead-letters.ts";

/** Bytes of rows per INSERT: under D1's 2 MB bound of one string value, with room to spare. */
const CHUNK_BYTES = 256 * 1024;
/** A row's size for TRACES_MAX_BYTES: its JSON document and name, plus this for the other columns
 * (ids, times, status, service). */
const SPAN_ROW_BYTES = 120;
const LOG_ROW_BYTES = 100;
/** Default page of engine::traces::list / engine::logs::list (iii's console asks for 100). */
const DEFAULT_LIMIT = 100;
/** Most spans one tree returns: a runaway trace (a loop through a queue) stays one answer. */
export const MAX_TREE_SPANS = 5_000;
/** Most groups of a group_by, and trace ids listed per group. */
const MAX_GROUPS = 1_000;
const MAX_TRACE_IDS_PER_GROUP = 100;
/** An attribute name group_by may look into (it becomes a JSON path). */
const ATTRIBUTE_NAME = /^[A-Za-z0-9_.:-]{1,256}$/;

export interface Retention {
  maxAgeMs: number;
  maxSpans: number;
  maxBytes: number;
}

type SpanRow = {
  trace_id: string;
  span_id: string;
  parent_span_id: string | null;
  name: string;
  kind: string | null;
  start_us: number;
  end_us: number;
  status: string;
  service_name: string;
  doc: string;
};
type LogRow = {
  trace_id: string | null;
  span_id: string | null;
  time_us: number;
  severity_number: number | null;
  severity_text: string;
  service_name: string;
  doc: string;
};

const str = (v: unknown): string | null => (typeof v === "string" && v ? v : null);

/** The function id a span is about (engine spans: iii.function_id; iii-sdk's: faas / its name). */
function functionIdOf(s: Span): string | null {
  const a = s.attributes;
  return (
    str(a["iii.function_id"]) ??
    str(a["iii.function.id"]) ??
    str(a["faas.invoked_name"]) ??
    (s.name.startsWith("execute ") ? s.name.slice(8) : null)
  );
}
function sessionIdOf(s: Span): string | null {
  const a = s.attributes;
  return str(a["iii.session.id"]) ?? str(a.session_id) ?? str(a["gen_ai.conversation.id"]);
}

/** A time bound of a query: nanoseconds as iii takes them; a value below 1e14 is milliseconds. */
function toMicros(t: number): number {
  return t < 1e14 ? Math.floor(t * 1000) : Math.floor(t / 1000);
}

function spanOf(r: SpanRow): Span {
  let doc: { a?: Attributes; e?: SpanEvent[]; m?: string } = {};
  try {
    doc = JSON.parse(r.doc);
  } catch {
    // a damaged row still lists
  }
  const s: Span = {
    trace_id: r.trace_id,
    span_id: r.span_id,
    name: r.name,
    start_time_unix_nano: r.start_us * 1000,
    end_time_unix_nano: r.end_us * 1000,
    status: r.status === "ok" || r.status === "error" ? r.status : "unset",
    attributes: doc.a ?? {},
    service_name: r.service_name,
    events: doc.e ?? [],
  };
  if (r.parent_span_id) s.parent_span_id = r.parent_span_id;
  if (r.kind) s.kind = r.kind as Span["kind"];
  if (doc.m) s.status_message = doc.m;
  return s;
}

function logOf(r: LogRow): LogRecord {
  let doc: { b?: LogRecord["body"]; a?: Attributes } = {};
  try {
    doc = JSON.parse(r.doc);
  } catch {
    // a damaged row still lists
  }
  const l: LogRecord = {
    time_unix_nano: r.time_us * 1000,
    severity_text: r.severity_text,
    body: doc.b ?? null,
    attributes: doc.a ?? {},
    service_name: r.service_name,
  };
  if (r.trace_id) l.trace_id = r.trace_id;
  if (r.span_id) l.span_id = r.span_id;
  if (r.severity_number !== null) l.severity_number = r.severity_number;
  return l;
}

export function buildTree(spans: Span[]): SpanTreeNode[] {
  const nodes = new Map<string, SpanTreeNode>();
  for (const s of spans) nodes.set(s.span_id, { ...s, children: [] });
  const roots: SpanTreeNode[] = [];
  for (const n of nodes.values()) {
    const parent = n.parent_span_id ? nodes.get(n.parent_span_id) : undefined;
    if (parent && parent !== n) parent.children.push(n);
    else roots.push(n);
  }
  const byStart = (a: SpanTreeNode, b: SpanTreeNode) => a.start_time_unix_nano - b.start_time_unix_nano;
  const sort = (list: SpanTreeNode[]) => {
    list.sort(byStart);
    for (const n of list) sort(n.children);
  };
  sort(roots);
  return roots;
}

export class TraceStore {
  private readonly db: D1Like;
  private readonly namespace: string;
  /** Whether this SQLite has `jsonb_each` (insertRows); false after the first refusal. */
  private jsonb = true;

  constructor(db: D1Like, namespace: string) {
    this.db = db;
    this.namespace = namespace;
  }

  // ---------------------------------------------------------------- writes

  async writeSpans(spans: Span[]): Promise<void> {
    const ns = this.namespace;
    await this.insertRows(
      "spans (trace_id, span_id, parent_span_id, namespace, name, kind, start_us, end_us, status, service_name, function_id, session_id, doc, bytes)",
      // A span sent again (a repeated delivery) changes nothing; one that ends later replaces
      // what is stored: how a long span (a turn's invoke_agent) is shown while it runs — an
      // in-progress copy first (IN_PROGRESS_ATTRIBUTE), the finished span over it.
      "ON CONFLICT (trace_id, span_id) DO UPDATE SET parent_span_id = excluded.parent_span_id, name = excluded.name, kind = excluded.kind, start_us = excluded.start_us, end_us = excluded.end_us, status = excluded.status, service_name = excluded.service_name, function_id = excluded.function_id, session_id = excluded.session_id, doc = excluded.doc, bytes = excluded.bytes WHERE excluded.end_us > spans.end_us",
      spans.map((s) => {
        const d: { a: Attributes; e?: SpanEvent[]; m?: string } = { a: s.attributes };
        if (s.events.length) d.e = s.events;
        if (s.status_message) d.m = s.status_message;
        const doc = JSON.stringify(d);
        return [
          s.trace_id,
          s.span_id,
          s.parent_span_id ?? null,
          ns,
          s.name,
          s.kind ?? null,
          Math.floor(s.start_time_unix_nano / 1000),
          Math.floor(s.end_time_unix_nano / 1000),
          s.status,
          s.service_name,
          functionIdOf(s),
          sessionIdOf(s),
          doc,
          doc.length + s.name.length + SPAN_ROW_BYTES,
        ];
      }),
    );
  }

  async writeLogs(logs: LogRecord[]): Promise<void> {
    const ns = this.namespace;
    await this.insertRows(
      "logs (namespace, trace_id, span_id, time_us, severity_number, severity_text, service_name, doc, bytes)",
      "",
      logs.map((l) => {
        const doc = JSON.stringify({ b: l.body, a: l.attributes });
        return [
          ns,
          l.trace_id ?? null,
          l.span_id ?? null,
          Math.floor(l.time_unix_nano / 1000),
          l.severity_number ?? null,
          l.severity_text,
          l.service_name,
          doc,
          doc.length + LOG_ROW_BYTES,
        ];
      }),
    );
  }

  /**
   * Insert `rows` (scalars, one per column of `target`) into `target` (`table (columns…)`): the
   * rows go in as one JSON array (one statement a batch, not one a row, and D1's 100-parameter
   * limit never caps it), split in halves while a statement's text is over CHUNK_BYTES. The array
   * is read as JSONB (`jsonb_each(jsonb(?))`): SQLite then parses each row once instead of once for
   * every column taken out of it — 3.7 µs a span against 17 µs as JSON text (node:sqlite, 500-span
   * batches). A SQLite without `jsonb_each` (before 3.51) gets the JSON-text form, chosen once.
   */
  private async insertRows(target: string, conflict: string, rows: readonly unknown[][]): Promise<void> {
    if (rows.length === 0) return;
    const columns = rows[0]!.length;
    const extract = Array.from({ length: columns }, (_, i) => `value ->> ${i}`).join(", ");
    const statement = (source: string) =>
      `INSERT INTO ${target} SELECT ${extract} FROM ${source}${conflict ? ` WHERE true ${conflict}` : ""}`;
    const put = async (part: readonly unknown[][]): Promise<void> => {
      const body = JSON.stringify(part);
      if (body.length > CHUNK_BYTES && part.length > 1) {
        const half = part.length >> 1;
        await put(part.slice(0, half));
        return put(part.slice(half));
      }
      if (this.jsonb) {
        try {
          await this.db.prepare(statement("jsonb_each(jsonb(?))")).bind(body).run();
          return;
        } catch (e) {
          if (!/jsonb_each/.test(String(e))) throw e;
          this.jsonb = false;
        }
      }
      await this.db.prepare(statement("json_each(?)")).bind(body).run();
    };
    await put(rows);
  }

  /** Retention: older than maxAgeMs, then past maxSpans, then past maxBytes — oldest first. The
   * bounds are the whole store's (every namespace), as D1's size is. */
  async prune(nowMs: number, r: Retention): Promise<void> {
    const cutoff = (nowMs - r.maxAgeMs) * 1000;
    for (const [table, t] of [
      ["spans", "start_us"],
      ["logs", "time_us"],
    ] as const) {
      await this.db.prepare(`DELETE FROM ${table} WHERE ${t} < ?`).bind(cutoff).run();
      // Count and size first (one pass over the table); the deletes only when a bound is passed.
      const size = (
        await this.db.prepare(`SELECT COUNT(*) AS n, COALESCE(SUM(bytes), 0) AS b FROM ${table}`).all<{ n: number; b: number }>()
      ).results[0] ?? { n: 0, b: 0 };
      if (size.n > r.maxSpans) {
        await this.db
          .prepare(`DELETE FROM ${table} WHERE rowid IN (SELECT rowid FROM ${table} ORDER BY ${t}, rowid LIMIT ?)`)
          .bind(size.n - r.maxSpans)
          .run();
      }
      if (size.b > r.maxBytes) {
        await this.db
          .prepare(
            `DELETE FROM ${table} WHERE rowid IN (SELECT rowid FROM (SELECT rowid, SUM(bytes) OVER (ORDER BY ${t} DESC, rowid DESC ROWS UNBOUNDED PRECEDING) AS acc FROM ${table}) WHERE acc > ?)`,
          )
          .bind(r.maxBytes)
          .run();
      }
    }
  }

  async clear(): Promise<void> {
    await this.db.prepare("DELETE FROM spans WHERE namespace = ?").bind(this.namespace).run();
    await this.db.prepare("DELETE FROM logs WHERE namespace = ?").bind(this.namespace).run();
  }

  // ---------------------------------------------------------------- reads

  /** Newest first. Scoped to this namespace unless a trace id is given (a trace crosses them, and
   * its 128-bit id is what a reader must already know). */
  async list(q: z.output<typeof tracesListInput>): Promise<TracesListOutput> {
    const w = this.filters(q);
    if (q.name) w.add("instr(name, ?) > 0", q.name);
    if (q.status) w.add("status = ?", q.status);
    if (q.session_id) w.add("session_id = ?", q.session_id);
    if (q.function_id) w.add("function_id = ?", q.function_id);
    if (q.start_time !== undefined) w.add("start_us >= ?", toMicros(q.start_time));
    if (q.end_time !== undefined) w.add("start_us <= ?", toMicros(q.end_time));
    const page = await this.page<SpanRow>(
      "trace_id, span_id, parent_span_id, name, kind, start_us, end_us, status, service_name, doc",
      "spans",
      "start_us DESC, rowid DESC",
      w,
      q,
    );
    return { spans: page.rows.map(spanOf), total: page.total, offset: page.offset, limit: page.limit };
  }

  async spansOf(traceId: string): Promise<Span[]> {
    const rows = await this.db
      .prepare(
        "SELECT trace_id, span_id, parent_span_id, name, kind, start_us, end_us, status, service_name, doc FROM spans WHERE trace_id = ? ORDER BY start_us LIMIT ?",
      )
      .bind(traceId, MAX_TREE_SPANS)
      .all<SpanRow>();
    return rows.results.map(spanOf);
  }

  async groupBy(q: z.output<typeof tracesGroupByInput>): Promise<TracesGroupByOutput> {
    let key: string;
    const binds: unknown[] = [];
    const attr = q.attribute;
    if (q.field) key = q.field;
    else if (attr === "iii.session.id" || attr === "session_id") key = "session_id";
    else if (attr === "iii.function_id" || attr === "iii.function.id") key = "function_id";
    else {
      if (!attr || !ATTRIBUTE_NAME.test(attr)) throw new IIIError("deserialization_error", "attribute: letters, digits and _ . : - only");
      key = "json_extract(doc, ?)";
      binds.push(`$.a."${attr}"`);
    }
    const where: string[] = ["namespace = ?", `${key === "json_extract(doc, ?)" ? "json_extract(doc, ?)" : key} IS NOT NULL`];
    const whereBinds: unknown[] = [this.namespace, ...binds];
    if (q.start_time !== undefined) {
      where.push("start_us >= ?");
      whereBinds.push(toMicros(q.start_time));
    }
    if (q.end_time !== undefined) {
      where.push("start_us <= ?");
      whereBinds.push(toMicros(q.end_time));
    }
    const limit = Math.min(q.limit ?? 100, MAX_GROUPS);
    const rows = await this.db
      .prepare(
        `SELECT ${key} AS value, COUNT(*) AS span_count, SUM(status = 'error') AS error_count, MIN(start_us) AS first_us, MAX(end_us) AS last_us, AVG(end_us - start_us) AS avg_us, group_concat(DISTINCT trace_id) AS trace_ids ` +
          `FROM spans WHERE ${where.join(" AND ")} GROUP BY 1 ORDER BY MAX(start_us) DESC LIMIT ?`,
      )
      .bind(...binds, ...whereBinds, limit)
      .all<{
        value: unknown;
        span_count: number;
        error_count: number;
        first_us: number;
        last_us: number;
        avg_us: number;
        trace_ids: string | null;
      }>();
    const groups: TraceGroup[] = rows.results.map((r) => ({
      value: String(r.value),
      trace_ids: (r.trace_ids ?? "").split(",").filter(Boolean).slice(0, MAX_TRACE_IDS_PER_GROUP),
      span_count: r.span_count,
      error_count: r.error_count ?? 0,
      first_seen_ms: r.first_us / 1000,
      last_seen_ms: r.last_us / 1000,
      duration_ms: (r.last_us - r.first_us) / 1000,
      avg_duration_ms: (r.avg_us ?? 0) / 1000,
    }));
    return { groups };
  }

  async logs(q: z.output<typeof logsListInput>): Promise<LogsListOutput> {
    const w = this.filters(q);
    if (q.severity_text) w.add("lower(severity_text) = lower(?)", q.severity_text);
    if (q.severity_min !== undefined) w.add("severity_number >= ?", q.severity_min);
    if (q.start_time !== undefined) w.add("time_us >= ?", toMicros(q.start_time));
    if (q.end_time !== undefined) w.add("time_us <= ?", toMicros(q.end_time));
    const page = await this.page<LogRow>(
      "trace_id, span_id, time_us, severity_number, severity_text, service_name, doc",
      "logs",
      "time_us DESC, id DESC",
      w,
      q,
    );
    return { logs: page.rows.map(logOf), total: page.total, offset: page.offset, limit: page.limit };
  }

  /** The filters spans and logs share: a trace id (which crosses namespaces: its 128-bit id is what
   * a reader must already know), else this namespace; then a span and a service. */
  private filters(q: { trace_id?: string; span_id?: string; service_name?: string }): Where {
    const w = new Where();
    if (q.trace_id) w.add("trace_id = ?", q.trace_id);
    else w.add("namespace = ?", this.namespace);
    if (q.span_id) w.add("span_id = ?", q.span_id);
    if (q.service_name) w.add("service_name = ?", q.service_name);
    return w;
  }

  /** One page of `columns` of `table` under `w`, in `order`, and the count of every match, read at
   * once. */
  private async page<Row>(
    columns: string,
    table: "spans" | "logs",
    order: string,
    w: Where,
    q: { offset?: number; limit?: number },
  ): Promise<{ rows: Row[]; total: number; offset: number; limit: number }> {
    const offset = q.offset ?? 0;
    const limit = q.limit ?? DEFAULT_LIMIT;
    const [count, rows] = await Promise.all([
      this.db
        .prepare(`SELECT COUNT(*) AS n FROM ${table} ${w.sql()}`)
        .bind(...w.binds)
        .all<{ n: number }>(),
      this.db
        .prepare(`SELECT ${columns} FROM ${table} ${w.sql()} ORDER BY ${order} LIMIT ? OFFSET ?`)
        .bind(...w.binds, limit, offset)
        .all<Row>(),
    ]);
    return { rows: rows.results, total: count.results[0]?.n ?? 0, offset, limit };
  }

  /** Spans and logs stored (every namespace), for the metrics and the retention test. */
  async counts(): Promise<{ spans: number; logs: number }> {
    const [s, l] = await Promise.all([
      this.db.prepare("SELECT COUNT(*) AS n FROM spans").all<{ n: number }>(),
      this.db.prepare("SELECT COUNT(*) AS n FROM logs").all<{ n: number }>(),
    ]);
    return { spans: s.results[0]?.n ?? 0, logs: l.results[0]?.n ?? 0 };
  }
}

/** A WHERE clause built one condition at a time, its binds in the same order. */
class Where {
  readonly binds: unknown[] = [];
  private readonly clauses: string[] = [];
  add(clause: string, value: unknown): void {
    this.clauses.push(clause);
    this.binds.push(value);
  }
  sql(): string {
    return `WHERE ${this.clauses.join(" AND ")}`;
  }
}
