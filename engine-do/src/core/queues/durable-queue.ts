// The durable queue inside the engine object: SQLite rows + the object's alarm. Backs the iii
// `enqueue` action for queues configured with backend "durable" (ordered, millisecond latency).
// At-least-once: a message is deleted only after its handler succeeded; a delivery in flight
// holds a lease, and a lease that expires (eviction mid-delivery) makes the message due again.
import type { AlarmClient, EngineCore, EnqueueRequest, QueueProvider } from "../engine.ts";
import type { CallOutcome } from "../ports.ts";

export interface QueueConfig {
  name: string;
  /** Retries after the first attempt before the message is dead-lettered (iii default 3). */
  max_retries: number;
  /** First retry delay; doubles each attempt (iii default 1000 ms). */
  backoff_ms: number;
  /** Deliveries in flight at once for this queue (iii default 10). */
  concurrency: number;
  type: "standard" | "fifo";
  /** fifo: field of `data` whose value orders messages into groups (required for fifo). */
  message_group_field?: string;
  /** Engine-side deadline of one delivery. */
  timeout_ms: number;
}

export const DEFAULT_QUEUES: QueueConfig[] = [
  { name: "default", max_retries: 3, backoff_ms: 1000, concurrency: 10, type: "standard", timeout_ms: 30_000 },
];

/** Extra time on top of a delivery's deadline before its lease is considered lost. */
const LEASE_MARGIN_MS = 5_000;
/** Longest backoff, so a message with many retries is still retried within the hour. */
const MAX_BACKOFF_MS = 3_600_000;

export interface DeadLetterSink {
  deadLetter(msg: { id: string; queue: string; function_id: string; data: unknown; attempts: number; error: string; enqueued_at: number }): Promise<void>;
}

interface Row {
  id: string;
  queue: string;
  function_id: string;
  data: string;
  attempts: number;
  next_at: number;
  leased: number;
  group_key: string | null;
  enqueued_at: number;
  traceparent: string | null;
  baggage: string | null;
}

export class DurableQueues implements QueueProvider, AlarmClient {
  private readonly core: EngineCore;
  private readonly configs = new Map<string, QueueConfig>();
  private readonly inflight = new Map<string, number>();
  private readonly inflightGroups = new Set<string>();
  private deadLetters: DeadLetterSink | undefined;
  private pumping = false;
  private pumpAgain = false;

  constructor(core: EngineCore, configs: QueueConfig[] = DEFAULT_QUEUES) {
    this.core = core;
    for (const c of configs) this.configs.set(c.name, c);
    const { sql } = core.ports;
    sql.exec(`CREATE TABLE IF NOT EXISTS queue_messages (
      id TEXT PRIMARY KEY, queue TEXT NOT NULL, function_id TEXT NOT NULL, data TEXT NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0, next_at INTEGER NOT NULL, leased INTEGER NOT NULL DEFAULT 0,
      group_key TEXT, enqueued_at INTEGER NOT NULL, seq INTEGER NOT NULL, traceparent TEXT, baggage TEXT,
      last_error TEXT)`);
    sql.exec("CREATE INDEX IF NOT EXISTS queue_messages_due ON queue_messages (queue, next_at)");
    sql.exec("CREATE TABLE IF NOT EXISTS queue_receipts (queue TEXT NOT NULL, idempotency_key TEXT NOT NULL, receipt TEXT NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (queue, idempotency_key))");
    // Leases held by a previous instance are void: their deliveries died with it.
    sql.exec("UPDATE queue_messages SET leased = 0");
  }

  setDeadLetterSink(sink: DeadLetterSink): void {
    this.deadLetters = sink;
  }

  configure(c: QueueConfig): void {
    this.configs.set(c.name, c);
  }
  config(name: string): QueueConfig | undefined {
    return this.configs.get(name);
  }

  async enqueue(req: EnqueueRequest): Promise<CallOutcome> {
    const cfg = this.configs.get(req.queue);
    if (!cfg) return { ok: false, error: { code: "enqueue_error", message: `queue '${req.queue}' is not configured` } };
    const { sql, clock } = this.core.ports;
    if (req.idempotency_key) {
      const prior = sql.exec<{ receipt: string }>("SELECT receipt FROM queue_receipts WHERE queue = ? AND idempotency_key = ?", req.queue, req.idempotency_key)[0];
      if (prior) return { ok: true, result: { messageReceiptId: prior.receipt } };
    }
    let group: string | null = null;
    if (cfg.type === "fifo") {
      const field = cfg.message_group_field ?? "";
      const v = req.data && typeof req.data === "object" ? (req.data as Record<string, unknown>)[field] : undefined;
      if (v === undefined || v === null) return { ok: false, error: { code: "enqueue_error", message: `fifo queue '${cfg.name}' needs data.${field}` } };
      group = String(v);
    }
    const id = this.core.ports.newId();
    const now = clock.now();
    sql.transaction(() => {
      const seq = (sql.exec<{ s: number | null }>("SELECT MAX(seq) AS s FROM queue_messages")[0]?.s ?? 0) + 1;
      sql.exec(
        "INSERT INTO queue_messages (id, queue, function_id, data, next_at, group_key, enqueued_at, seq, traceparent, baggage) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        id, cfg.name, req.function_id, JSON.stringify(req.data ?? null), now, group, now, seq, req.traceparent ?? null, req.baggage ?? null,
      );
      if (req.idempotency_key) sql.exec("INSERT INTO queue_receipts (queue, idempotency_key, receipt, created_at) VALUES (?, ?, ?, ?)", cfg.name, req.idempotency_key, id, now);
    });
    this.kick();
    return { ok: true, result: { messageReceiptId: id } };
  }

  /** Deliver what is due now, soon after the current event. */
  kick(): void {
    this.core.ports.timers.set(() => this.pump(), 0);
  }

  nextDue(): number | null {
    const r = this.core.ports.sql.exec<{ t: number | null }>("SELECT MIN(next_at) AS t FROM queue_messages WHERE leased = 0")[0];
    return r?.t ?? null;
  }

  async run(): Promise<void> {
    this.pump();
  }

  depth(queue: string): number {
    return this.core.ports.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM queue_messages WHERE queue = ?", queue)[0]?.n ?? 0;
  }

  private pump(): void {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    try {
      const { sql, clock } = this.core.ports;
      const now = clock.now();
      for (const cfg of this.configs.values()) {
        const free = cfg.concurrency - (this.inflight.get(cfg.name) ?? 0);
        if (free <= 0) continue;
        // In order of arrival; for fifo only the head of each idle group is eligible.
        const rows = sql.exec<Row>(
          "SELECT * FROM queue_messages WHERE queue = ? AND leased = 0 AND next_at <= ? ORDER BY seq LIMIT ?",
          cfg.name, now, cfg.type === "fifo" ? 1000 : free,
        );
        let started = 0;
        const seenGroups = new Set<string>();
        for (const row of rows) {
          if (started >= free) break;
          if (cfg.type === "fifo") {
            const g = `${cfg.name}\u0000${row.group_key}`;
            if (seenGroups.has(g)) continue;
            seenGroups.add(g);
            if (this.inflightGroups.has(g)) continue;
            // A group's head may be waiting on backoff: a later message of the group must not overtake it.
            const head = sql.exec<{ id: string }>("SELECT id FROM queue_messages WHERE queue = ? AND group_key = ? ORDER BY seq LIMIT 1", cfg.name, row.group_key)[0];
            if (head?.id !== row.id) continue;
            this.inflightGroups.add(g);
          }
          started++;
          this.deliver(cfg, row);
        }
      }
    } finally {
      this.pumping = false;
    }
    this.core.rearmAlarm();
    if (this.pumpAgain) {
      this.pumpAgain = false;
      this.kick();
    }
  }

  private deliver(cfg: QueueConfig, row: Row): void {
    const { sql, clock } = this.core.ports;
    const leaseUntil = clock.now() + cfg.timeout_ms + LEASE_MARGIN_MS;
    sql.exec("UPDATE queue_messages SET leased = 1, next_at = ? WHERE id = ?", leaseUntil, row.id);
    this.inflight.set(cfg.name, (this.inflight.get(cfg.name) ?? 0) + 1);
    const group = cfg.type === "fifo" ? `${cfg.name}\u0000${row.group_key}` : null;
    const req: Parameters<EngineCore["invoke"]>[0] = { function_id: row.function_id, data: JSON.parse(row.data), timeoutMs: cfg.timeout_ms, invocationId: row.id };
    if (row.traceparent) req.traceparent = row.traceparent;
    if (row.baggage) req.baggage = row.baggage;
    const done = this.core
      .invoke(req)
      .then(async (outcome) => {
        const attempts = row.attempts + 1;
        if (outcome.ok) {
          sql.exec("DELETE FROM queue_messages WHERE id = ?", row.id);
        } else if (attempts > cfg.max_retries) {
          const error = `${outcome.error.code}: ${outcome.error.message}`;
          sql.exec("DELETE FROM queue_messages WHERE id = ?", row.id);
          await this.deadLetter({ id: row.id, queue: cfg.name, function_id: row.function_id, data: JSON.parse(row.data), attempts, error, enqueued_at: row.enqueued_at });
        } else {
          const delay = Math.min(MAX_BACKOFF_MS, cfg.backoff_ms * 2 ** (attempts - 1));
          sql.exec(
            "UPDATE queue_messages SET attempts = ?, leased = 0, next_at = ?, last_error = ? WHERE id = ?",
            attempts, clock.now() + delay, `${outcome.error.code}: ${outcome.error.message}`, row.id,
          );
        }
      })
      .finally(() => {
        this.inflight.set(cfg.name, (this.inflight.get(cfg.name) ?? 1) - 1);
        if (group) this.inflightGroups.delete(group);
        this.pump();
      });
    this.core.ports.background(done);
  }

  private async deadLetter(msg: Parameters<DeadLetterSink["deadLetter"]>[0]): Promise<void> {
    if (this.deadLetters) {
      await this.deadLetters.deadLetter(msg);
      return;
    }
    // Without a sink (plain core tests) keep it in the object so nothing acknowledged is lost.
    const { sql } = this.core.ports;
    sql.exec("CREATE TABLE IF NOT EXISTS queue_dead (id TEXT PRIMARY KEY, queue TEXT, function_id TEXT, data TEXT, attempts INTEGER, error TEXT, enqueued_at INTEGER)");
    sql.exec("INSERT OR REPLACE INTO queue_dead VALUES (?, ?, ?, ?, ?, ?, ?)", msg.id, msg.queue, msg.function_id, JSON.stringify(msg.data), msg.attempts, msg.error, msg.enqueued_at);
  }
}
