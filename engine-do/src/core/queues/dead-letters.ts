// Dead letters: messages whose handler failed past max_retries, from both queue backends and from
// durable subscribers. They live in D1 (global, queryable across namespaces; migrations 0001/0002)
// and can be listed, redriven and discarded. Without D1 (plain core tests) a SQLite table in the
// object stands in, so nothing acknowledged is ever lost either way.
import type { Sql } from "../ports.ts";

export interface DeadLetter {
  id: string;
  queue: string;
  function_id: string;
  data: unknown;
  attempts: number;
  error: string;
  enqueued_at: number;
  traceparent?: string;
}
export interface StoredDeadLetter extends DeadLetter {
  failed_at: number;
}

export interface DeadLetterSink {
  deadLetter(msg: DeadLetter): Promise<void>;
}

/** One store per namespace (the namespace scopes every query). */
export interface DeadLetterStore extends DeadLetterSink {
  topics(): Promise<{ queue: string; count: number }[]>;
  messages(queue: string, offset: number, limit: number): Promise<StoredDeadLetter[]>;
  get(queue: string, id: string): Promise<StoredDeadLetter | undefined>;
  remove(queue: string, id: string): Promise<boolean>;
}

/** The part of D1's API used here (structural, so the core needs no `cloudflare:*` types). */
export interface D1Like {
  prepare(query: string): D1StatementLike;
}
export interface D1StatementLike {
  bind(...values: unknown[]): D1StatementLike;
  run(): Promise<unknown>;
  all<T = Record<string, unknown>>(): Promise<{ results: T[] }>;
}

/** The columns a stored message has wherever it is kept (the durable queue's rows, the dead
 * letters): `data` is the payload as JSON text. */
export interface StoredMessageRow {
  id: string;
  queue: string;
  function_id: string;
  data: string;
  attempts: number;
}

interface Row extends StoredMessageRow {
  last_error: string;
  enqueued_at: number;
  failed_at: number;
  traceparent?: string | null;
}
const fromRow = (r: Row): StoredDeadLetter => {
  const d: StoredDeadLetter = {
    id: r.id,
    queue: r.queue,
    function_id: r.function_id,
    data: JSON.parse(r.data),
    attempts: Number(r.attempts),
    error: r.last_error,
    enqueued_at: Number(r.enqueued_at),
    failed_at: Number(r.failed_at),
  };
  if (r.traceparent) d.traceparent = r.traceparent;
  return d;
};

/** A dead letter's columns from `id` on, in both tables' order (D1's adds `namespace` before them). */
const columns = (m: DeadLetter, failedAt: number) =>
  [
    m.id,
    m.queue,
    m.function_id,
    JSON.stringify(m.data ?? null),
    m.attempts,
    m.error,
    m.enqueued_at,
    failedAt,
    m.traceparent ?? null,
  ] as const;

export class D1DeadLetters implements DeadLetterStore {
  private readonly db: D1Like;
  private readonly ns: string;
  private readonly now: () => number;
  constructor(db: D1Like, namespace: string, now: () => number) {
    this.db = db;
    this.ns = namespace;
    this.now = now;
  }
  async deadLetter(m: DeadLetter): Promise<void> {
    await this.db
      .prepare(
        "INSERT OR REPLACE INTO dead_letters (namespace, id, queue, function_id, data, attempts, last_error, enqueued_at, failed_at, traceparent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      )
      .bind(this.ns, ...columns(m, this.now()))
      .run();
  }
  async topics(): Promise<{ queue: string; count: number }[]> {
    const r = await this.db
      .prepare("SELECT queue, COUNT(*) AS count FROM dead_letters WHERE namespace = ? GROUP BY queue ORDER BY queue")
      .bind(this.ns)
      .all<{ queue: string; count: number }>();
    return r.results.map((x) => ({ queue: x.queue, count: Number(x.count) }));
  }
  async messages(queue: string, offset: number, limit: number): Promise<StoredDeadLetter[]> {
    const r = await this.db
      .prepare("SELECT * FROM dead_letters WHERE namespace = ? AND queue = ? ORDER BY failed_at, id LIMIT ? OFFSET ?")
      .bind(this.ns, queue, limit, offset)
      .all<Row>();
    return r.results.map(fromRow);
  }
  async get(queue: string, id: string): Promise<StoredDeadLetter | undefined> {
    const r = await this.db
      .prepare("SELECT * FROM dead_letters WHERE namespace = ? AND queue = ? AND id = ?")
      .bind(this.ns, queue, id)
      .all<Row>();
    return r.results[0] ? fromRow(r.results[0]) : undefined;
  }
  async remove(queue: string, id: string): Promise<boolean> {
    const r = await this.db
      .prepare("DELETE FROM dead_letters WHERE namespace = ? AND queue = ? AND id = ? RETURNING id")
      .bind(this.ns, queue, id)
      .all<{ id: string }>();
    return r.results.length > 0;
  }
}

/** Stand-in when no D1 is bound: the same records in the object's own SQLite. */
export class LocalDeadLetters implements DeadLetterStore {
  private readonly sql: Sql;
  private readonly now: () => number;
  constructor(sql: Sql, now: () => number) {
    this.sql = sql;
    this.now = now;
  }
  async deadLetter(m: DeadLetter): Promise<void> {
    this.sql.exec("INSERT OR REPLACE INTO local_dead_letters VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", ...columns(m, this.now()));
  }
  async topics(): Promise<{ queue: string; count: number }[]> {
    return this.sql.exec<{ queue: string; count: number }>(
      "SELECT queue, COUNT(*) AS count FROM local_dead_letters GROUP BY queue ORDER BY queue",
    );
  }
  async messages(queue: string, offset: number, limit: number): Promise<StoredDeadLetter[]> {
    return this.sql
      .exec<Row>("SELECT * FROM local_dead_letters WHERE queue = ? ORDER BY failed_at, id LIMIT ? OFFSET ?", queue, limit, offset)
      .map(fromRow);
  }
  async get(queue: string, id: string): Promise<StoredDeadLetter | undefined> {
    const r = this.sql.exec<Row>("SELECT * FROM local_dead_letters WHERE queue = ? AND id = ?", queue, id)[0];
    return r ? fromRow(r) : undefined;
  }
  async remove(queue: string, id: string): Promise<boolean> {
    return this.sql.exec<{ id: string }>("DELETE FROM local_dead_letters WHERE queue = ? AND id = ? RETURNING id", queue, id).length > 0;
  }
}
