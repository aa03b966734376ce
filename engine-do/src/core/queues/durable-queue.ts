// The durable queue inside the engine object: SQLite rows + the object's alarm. The backend
// (QueueBackend, backend.ts) of the iii `enqueue` action for queues configured with backend
// "durable" (ordered, millisecond latency), of the `durable:subscriber` topics, of the messages a
// state write enqueues in its own transaction, and of `state` trigger fires (rows with a
// `trigger_id`, delivered through that binding). At-least-once: a message is deleted only after its
// handler succeeded. A delivery runs under its queue's `timeout_ms` and holds a lease of that plus
// LEASE_MARGIN_MS (`next_at`): within an instance a leased message is never picked again, so a long
// call is not repeated while it runs; the leases of a previous instance are void on wake (its
// pending calls died with it). The message id is the invocation id of every attempt, so a handler
// can deduplicate. Right after the object starts, a message whose function is not registered waits
// for it (RECONNECT_GRACE_MS) rather than spending its attempts: after a restart the workers are
// still reconnecting, and their functions come back with them. Results are stored in bulk: the
// deletions of delivered messages and the retries of failed ones wait for one write with the
// enqueues (flushAcks), and a result frees its slot at once, before that write.
import type { AlarmClient, CallRequest, EngineApi, EnqueueRequest, FireOptions } from "../api.ts";
import type { CallOutcome, Sql } from "../ports.ts";
import type { EnqueueResult, MessageOverrides, QueueBackend, QueueMessage } from "./backend.ts";
import { backoffDelay, type QueueConfig } from "./config.ts";
import type { DeadLetter, DeadLetterSink, StoredMessageRow } from "./dead-letters.ts";
import { deliverySpan, endDelivery } from "../telemetry/hops.ts";

export type { QueueConfig } from "./config.ts";
export type { MessageOverrides } from "./backend.ts";

/** Extra time on top of a delivery's deadline before its lease is considered lost. */
const LEASE_MARGIN_MS = 5_000;
/** A due message the last pump had to leave for want of concurrency waits for a delivery of its
 * queue to complete (which re-pumps); the alarm is only a safety net this far ahead (otherwise it
 * would spin while the queue is full). */
const SAFETY_REPUMP_MS = 1_000;
/** Most rows one pump looks at per queue (bounds the work of one event). */
const PUMP_SCAN_LIMIT = 1_000;
/**
 * How long a delivered message's deletion may wait to share one write with the others delivered
 * meanwhile. Every event that writes ends in a commit of the object's storage, the dearest part of
 * a delivery (under wrangler dev a commit per result frame held a flood to a fraction of the
 * routed-call rate); a crash inside the window redelivers those messages (at-least-once, same ids).
 */
export const ACK_FLUSH_MS = 10;
/**
 * How long an enqueue without an idempotency key may wait to be stored in one write with the others
 * enqueued meanwhile. Each enqueue frame is an event of its own, and an event that writes ends in a
 * commit: stored one by one, a flood costs a commit per message. The acknowledgement goes out only
 * after the write (acknowledged means stored); a crash inside the window loses only messages nobody
 * was told about. The deletions of delivered messages waiting for their flush ride along.
 */
export const ENQUEUE_FLUSH_MS = 2;
/** Most enqueues one write takes: past it the write happens at once (bounds the memory held and
 * the length of the event that writes). */
export const MAX_ENQUEUE_BATCH = 256;
/**
 * How many delivered messages of a queue may wait for their deletion before it is written at once,
 * in the event of the result that reaches it: half the queue's concurrency (at least 1). A result
 * gives its slot back at once, before its deletion is stored, so what a crash can repeat is the
 * messages in flight (at most `concurrency`) plus these (fewer than this bound): at most
 * `concurrency + deletionAllowance(concurrency)` in all. If writes fail and deletions pile up past
 * it, each one over takes a slot of the queue until a write succeeds, so the bound holds then too.
 */
export function deletionAllowance(concurrency: number): number {
  // (Retries waiting for their write count against it too: they are results not yet stored.)
  return Math.max(1, Math.floor(concurrency / 2));
}
/** Most times one pump looks again at a standard queue after putting off rows of missing targets
 * (each look puts off at least one target's rows; the next pump goes on from there). */
const MAX_HOLD_ROUNDS = 16;
/**
 * How long after the object starts a delivery to a function nobody has registered (yet) waits for
 * it instead of counting as a failed attempt. A restart drops every socket, and iii-sdk reconnects
 * after at most 30 s (its maxDelayMs) ± 30 % jitter, so 39 s; the rest is margin for the replay of
 * its registrations. Without it a queue's few retries (default 3 from 1 s: 7 s) would be spent, and
 * the messages dead-lettered, before their workers are back.
 */
export const RECONNECT_GRACE_MS = 45_000;
/** While waiting out the grace, how often the messages of a missing function look again (the
 * redelivery delay once it is registered). */
export const FUNCTION_WAIT_MS = 250;

interface Row extends StoredMessageRow {
  next_at: number;
  seq: number;
  leased: number;
  group_key: string | null;
  enqueued_at: number;
  traceparent: string | null;
  baggage: string | null;
  max_retries: number | null;
  backoff_ms: number | null;
  last_error: string | null;
  trigger_id: string | null;
}

/** An enqueue waiting for the write that stores it with the others of its batch. */
interface Incoming {
  cfg: QueueConfig;
  msg: QueueMessage;
  /** `msg.data`, serialized when it was enqueued (what was acknowledged is what is stored). */
  data: string;
  group: string | null;
  done(r: EnqueueResult): void;
}

/** A failed attempt's retry, written by the next flush. */
interface PendingRetry {
  queue: string;
  attempts: number;
  next_at: number;
  error: string;
}

/** Add `delta` to `queue`'s count in `m` (a count at zero is not kept). */
function bump(m: Map<string, number>, queue: string, delta: number): void {
  const n = (m.get(queue) ?? 0) + delta;
  if (n > 0) m.set(queue, n);
  else m.delete(queue);
}

/** Where a message goes besides its queue (QueueMessage's `trigger_id` and `group`). */
export interface PushExtras {
  /** A `state` trigger fire: delivered through this binding (condition, function, metadata). */
  trigger_id?: string;
  /** The fifo group, set by the sender instead of read from `message_group_field`. */
  group?: string;
}

/**
 * The fifo group of a message of `cfg`, or why it has none: the value of `data`'s
 * `message_group_field` (null for a standard queue), unless the sender set `group` itself.
 */
export function fifoGroup(
  cfg: QueueConfig,
  data: unknown,
  group?: string,
): { ok: true; group: string | null } | { ok: false; message: string } {
  if (cfg.type !== "fifo") return { ok: true, group: null };
  if (group !== undefined) return { ok: true, group };
  const field = cfg.message_group_field ?? "";
  const v = data && typeof data === "object" ? (data as Record<string, unknown>)[field] : undefined;
  if (v === undefined || v === null) return { ok: false, message: `fifo queue '${cfg.name}' needs data.${field}` };
  return { ok: true, group: typeof v === "string" ? v : JSON.stringify(v) };
}

export class DurableQueues implements QueueBackend, AlarmClient {
  readonly name = "durable";
  private readonly core: EngineApi;
  private readonly configFor: (queue: string) => QueueConfig | undefined;
  private readonly inflight = new Map<string, number>();
  /** Names of the queues that may hold messages (a cache of queue_messages, loaded on first use,
   * added to on push, pruned by nextDue when a queue is found empty). */
  private names: Set<string> | undefined;
  /** Deliveries in flight in this instance: message id → the end of its lease. In memory only: a
   * lease is void once the instance is gone (its pending calls died with it), so writing it would
   * only cost a commit per delivery; the stored alarm (nextDue) still covers the lease ends. */
  private readonly leases = new Map<string, number>();
  /** Delivered messages whose deletion waits for the next flush (ACK_FLUSH_MS): id → queue. They
   * are busy for the pump (never picked again by this instance) but hold no slot. */
  private readonly acked = new Map<string, string>();
  /** `acked` counted per queue. */
  private readonly ackedBy = new Map<string, number>();
  /** Failed attempts whose retry (attempts, next time, error) waits for the next flush: id → it.
   * Busy for the pump like `acked` (the stored row still says it is due), no slot held. */
  private readonly retrying = new Map<string, PendingRetry>();
  /** Results waiting for their write (`acked` and `retrying`) counted per queue: what
   * deletionAllowance bounds. */
  private readonly unwrittenBy = new Map<string, number>();
  /** Enqueues waiting for the next flush (ENQUEUE_FLUSH_MS), acknowledged once it has stored them. */
  private readonly incoming: Incoming[] = [];
  private flushTimer: unknown = null;
  /** When the armed flush timer fires (a sooner need re-arms it). */
  private flushAt = 0;
  private readonly inflightGroups = new Set<string>();
  /**
   * Per standard queue, a seq up to which every due row is in flight or delivered in this
   * instance: the pump reads on from there instead of passing over those rows again on every
   * settle. A row only becomes due again behind it when its `next_at` is set anew (a retry, a
   * failed settle, a missing target put off) and those clear this; new rows come after it.
   */
  private readonly scanned = new Map<string, number>();
  /**
   * Per standard queue, due rows the pump read past its free slots (in seq order, none busy, all
   * before the `scanned` mark): a slot freed by a result takes the next of them without a read, so
   * refilling the window costs one read per `concurrency` deliveries instead of one per result.
   * Only this file writes queue_messages, and every rewrite of a row's `next_at` drops them with
   * the marks (forgetScans); deleted rows were busy, never here. At most `concurrency` per queue.
   */
  private readonly ready = new Map<string, Row[]>();
  private inflightTotal = 0;
  private seq: number;
  private readonly deadLetters: DeadLetterSink | undefined;
  private pumping = false;
  private pumpAgain = false;
  /** The last pump left due messages undelivered because their queue was at its concurrency. */
  private leftForConcurrency = false;
  private kicked = false;
  /** The last kick could not set a timer (logged once per run of failures). */
  private timerFailed = false;
  /** When this instance started (RECONNECT_GRACE_MS counts from here). */
  private readonly startedAt: number;
  /** Called after each settled delivery (tests and benchmarks observe progress). */
  onSettled: ((id: string, outcome: "delivered" | "retry" | "dead") => void) | undefined;

  constructor(core: EngineApi, configFor: (queue: string) => QueueConfig | undefined, deadLetters?: DeadLetterSink) {
    this.core = core;
    this.configFor = configFor;
    this.deadLetters = deadLetters;
    const { sql } = core.ports;
    // Leases of a previous instance are void: that instance's pending calls died with it, so an
    // answer to its delivery could never settle the message. Waiting out the lease (up to 6 min on
    // `turn-step`) would only stall the message and its fifo group after every eviction or deploy;
    // it is due again now, with the same id, and handlers dedupe by it (at-least-once).
    sql.exec("UPDATE queue_messages SET leased = 0, next_at = MIN(next_at, ?) WHERE leased = 1", core.ports.clock.now());
    this.seq = sql.exec<{ s: number | null }>("SELECT MAX(seq) AS s FROM queue_messages")[0]?.s ?? 0;
    this.startedAt = core.ports.clock.now();
  }

  /**
   * Store `msg`. At once, with its receipt (`onAccept`) in the same transaction; or, with `batch`,
   * in the next flush: one write with every enqueue and deletion meanwhile (ENQUEUE_FLUSH_MS).
   * Either way the promise resolves once the message is stored: acknowledged means stored. A
   * message the queue refuses (a fifo message without its group) is refused now.
   */
  enqueue(cfg: QueueConfig, msg: QueueMessage, onAccept: () => void, opts: { batch?: boolean } = {}): Promise<EnqueueResult> {
    const extras: PushExtras = {};
    if (msg.trigger_id !== undefined) extras.trigger_id = msg.trigger_id;
    if (msg.group !== undefined) extras.group = msg.group;
    if (!opts.batch) {
      const r = this.core.ports.sql.transaction(() => {
        const pushed = this.push(cfg, { ...msg, queue: cfg.name }, msg.id, msg.overrides, extras);
        if (pushed.ok) onAccept();
        return pushed;
      });
      return Promise.resolve(r);
    }
    const g = fifoGroup(cfg, msg.data, msg.group);
    if (!g.ok) return Promise.resolve(g);
    onAccept();
    return new Promise<EnqueueResult>((done) => {
      this.incoming.push({ cfg, msg, data: JSON.stringify(msg.data ?? null), group: g.group, done });
      if (this.incoming.length >= MAX_ENQUEUE_BATCH) this.flushAcks();
      else this.scheduleFlush(ENQUEUE_FLUSH_MS);
    });
  }

  /**
   * Store one message (synchronously, so the caller can make it atomic with its receipt). A
   * message whose id is already queued is left alone (a repeated redrive is harmless).
   */
  push(cfg: QueueConfig, req: EnqueueRequest, id: string, overrides: MessageOverrides = {}, extras: PushExtras = {}): EnqueueResult {
    const g = fifoGroup(cfg, req.data, extras.group);
    if (!g.ok) return g;
    this.insert(cfg, req, JSON.stringify(req.data ?? null), id, g.group, overrides, extras);
    // A queue at its concurrency is pumped again when one of its deliveries settles (each settles,
    // by its deadline at the latest): a pump now could start nothing. In a flood that is one timer
    // event saved per message. (After a crash the stored alarm at the leases' end takes over.)
    if (this.free(cfg) <= 0) this.leftForConcurrency = true;
    else this.kick();
    return { ok: true };
  }

  /** The row of one message, its `data` serialized (no pump: the caller sees to it). */
  private insert(
    cfg: QueueConfig,
    req: Omit<EnqueueRequest, "data">,
    data: string,
    id: string,
    group: string | null,
    overrides: MessageOverrides = {},
    extras: PushExtras = {},
  ): void {
    const now = this.core.ports.clock.now();
    this.seq += 1;
    this.core.ports.sql.exec(
      "INSERT OR IGNORE INTO queue_messages (id, queue, function_id, data, next_at, group_key, enqueued_at, seq, traceparent, baggage, max_retries, backoff_ms, trigger_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      id,
      cfg.name,
      req.function_id,
      data,
      now,
      group,
      now,
      this.seq,
      req.traceparent ?? null,
      req.baggage ?? null,
      overrides.max_retries ?? null,
      overrides.backoff_ms ?? null,
      extras.trigger_id ?? null,
    );
    this.names?.add(cfg.name);
  }

  /** Deliver what is due now, soon after the current event (coalesced). Marked kicked only once the
   * timer is armed: a timer that could not be set (workerd: "QuotaExceededError: max active
   * timeouts") must not leave the queue waiting for a pump that never comes, so the alarm, which
   * delivers whatever is due, takes over. */
  kick(): void {
    if (this.kicked) return;
    try {
      this.core.ports.timers.set(() => {
        this.kicked = false;
        this.pump();
      }, 0);
      this.kicked = true;
      this.timerFailed = false;
    } catch (e) {
      if (!this.timerFailed) this.core.ports.log.warn("durable queue: no timer, delivering on the alarm", { error: String(e) });
      this.timerFailed = true;
      this.core.rearmAlarm();
    }
  }

  /**
   * When the next message may be delivered: the earliest `next_at` of a message not held back by
   * its fifo group (an earlier message of the group, in flight or waiting on its backoff, is what
   * counts). A fifo head waiting on its retry backoff is therefore woken by the alarm at that time,
   * whatever else is in flight — it used to hide behind the later, due messages of its own group
   * until some other delivery happened to complete.
   */
  nextDue(): number | null {
    const { sql } = this.core.ports;
    const now = this.core.ports.clock.now();
    let t: number | null = null;
    let lease: number | null = null;
    for (const queue of this.queueNames()) {
      const cfg = this.configFor(queue);
      // A queue removed from configuration keeps its messages, but they wake nothing (the pump
      // skips them): counting them would spin the alarm.
      let due: number | null = null;
      // A queue at its concurrency can start nothing before one of its deliveries settles, and
      // every settle pumps it (by its deadline at the latest; a crash leaves the leases' ends
      // below): no row of it needs the alarm, so none is read. In a flood that is most calls.
      if (cfg && this.free(cfg) <= 0) {
        if (this.leftForConcurrency && (t === null || now + SAFETY_REPUMP_MS < t)) t = now + SAFETY_REPUMP_MS;
        continue;
      }
      if (cfg) {
        // The earliest row not in flight nor delivered (those are passed over: at most
        // busyCount() of them come first).
        const skip = this.busyCount();
        const rows =
          cfg.type === "fifo"
            ? sql.exec<{ id: string; t: number }>(
                `SELECT m.id AS id, m.next_at AS t FROM queue_messages m WHERE m.queue = ? AND m.leased = 0 AND (m.group_key IS NULL OR NOT EXISTS
                  (SELECT 1 FROM queue_messages h WHERE h.queue = m.queue AND h.group_key = m.group_key AND h.seq < m.seq)) ORDER BY m.next_at LIMIT ?`,
                queue,
                skip + 1,
              )
            : sql.exec<{ id: string; t: number }>(
                "SELECT id, next_at AS t FROM queue_messages WHERE queue = ? AND leased = 0 ORDER BY next_at LIMIT ?",
                queue,
                skip + 1,
              );
        due = rows.find((r) => !this.busy(r.id))?.t ?? null;
        if (due !== null && (t === null || due < t)) t = due;
      }
      if (due === null && sql.exec("SELECT 1 FROM queue_messages WHERE queue = ? LIMIT 1", queue).length === 0) this.names?.delete(queue);
    }
    for (const end of this.leases.values()) if (end > now && (lease === null || end < lease)) lease = end;
    // Deletions waiting for their flush: its timer is on the way; the alarm is not needed for them.
    if (t !== null && this.leftForConcurrency && this.inflightTotal > 0 && t <= now) t = now + SAFETY_REPUMP_MS;
    // A lease's end wakes the object too. Within this instance the delivery has usually settled by
    // then (its deadline is shorter than its lease), so that wake finds nothing to do; but if the
    // process dies with only leased messages left, this stored alarm is what brings the object back
    // after a restart (workerd keeps alarms on disk), and waking voids the dead instance's leases.
    // Only ends still ahead count: a delivery outliving its lease (a state fire's condition and
    // function, each with the deadline) re-pumps when it settles, and a past time would spin.
    if (lease !== null && (t === null || lease < t)) t = lease;
    return t;
  }

  /**
   * The queues that hold messages, read off the index by skipping from one name to the next
   * (one index seek per queue, not a scan of every row: DISTINCT would read the whole index).
   */
  private queueNames(): string[] {
    this.names ??= new Set(
      this.core.ports.sql
        .exec<{ name: string | null }>(
          `WITH RECURSIVE q(name) AS (SELECT MIN(queue) FROM queue_messages
            UNION ALL SELECT (SELECT MIN(queue) FROM queue_messages WHERE queue > q.name) FROM q WHERE q.name IS NOT NULL)
          SELECT name FROM q WHERE name IS NOT NULL`,
        )
        .map((r) => r.name as string),
    );
    return [...this.names];
  }

  async run(): Promise<void> {
    // The alarm reads the queue names afresh: whatever is due is delivered, however it was stored.
    this.names = undefined;
    this.forgetScans();
    this.pump();
  }

  depth(queue?: string): number {
    const { sql } = this.core.ports;
    const r =
      queue === undefined
        ? sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM queue_messages")
        : sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM queue_messages WHERE queue = ?", queue);
    // Delivered messages waiting for their deletion (flushAcks) are gone already.
    return (r[0]?.n ?? 0) - this.ackedIn(queue);
  }

  /** Delivered messages of `queue` (or of all) whose deletion waits for the flush. */
  private ackedIn(queue?: string): number {
    if (queue === undefined) return this.acked.size;
    return this.ackedBy.get(queue) ?? 0;
  }

  /**
   * Deliveries `cfg`'s queue may start now: its concurrency less those in flight, less the
   * deletions waiting past deletionAllowance (none while writes succeed: the result that reaches
   * the allowance writes them at once).
   */
  private free(cfg: QueueConfig): number {
    const over = Math.max(0, (this.unwrittenBy.get(cfg.name) ?? 0) - deletionAllowance(cfg.concurrency));
    return cfg.concurrency - (this.inflight.get(cfg.name) ?? 0) - over;
  }

  /** Does `queue` hold at least `n` messages? (Stops counting at `n`.) */
  holdsAtLeast(queue: string, n: number): boolean {
    return this.core.ports.sql.exec("SELECT 1 FROM queue_messages WHERE queue = ? LIMIT 1 OFFSET ?", queue, n - 1).length > 0;
  }

  /** Queue names with messages, and how many (engine::queue::list_topics). */
  stats(): { queue: string; depth: number; inflight: number }[] {
    return this.core.ports.sql
      .exec<{ queue: string; n: number }>("SELECT queue, COUNT(*) AS n FROM queue_messages GROUP BY queue ORDER BY queue")
      .map((r) => ({ queue: r.queue, depth: r.n - this.ackedIn(r.queue), inflight: this.inflight.get(r.queue) ?? 0 }))
      .filter((q) => q.depth > 0);
  }

  private pump(): void {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    this.leftForConcurrency = false;
    // A pump that only started rows read ahead (a result's freed slot) leaves the alarm as it is:
    // what it changed is a new lease, which ends after the leases the armed alarm already covers,
    // and reading every alarm client's next time (cron, channels, the queues) once per result
    // would cost more SQL than the delivery. Any pump that reads the store rearms it.
    let fromAhead = false;
    let readStore = false;
    try {
      const { sql, clock } = this.core.ports;
      const now = clock.now();
      // Within the grace, a due message whose target is missing is put off instead of delivered.
      const hold = now < this.startedAt + RECONNECT_GRACE_MS ? this.missingTargetHold(now) : undefined;
      for (const queue of this.queueNames()) {
        const cfg = this.configFor(queue);
        // A queue removed from configuration keeps its messages until it is configured again.
        if (!cfg) continue;
        const free = this.free(cfg);
        if (free <= 0) {
          // Whether rows are left is not looked up: at worst the safety net of nextDue is armed.
          this.leftForConcurrency = true;
          continue;
        }
        if (cfg.type !== "fifo") {
          // In enqueue order, the next `free` due rows (one more tells whether any are left). Rows
          // put off for a missing target are no longer due, so a second look finds the ones after.
          // (INDEXED BY: walk queue_messages_ready in seq order and stop at the limit; the planner,
          // without statistics, may pick queue_messages_next instead and sort every unleased row.)
          // Rows before the queue's `scanned` mark are all busy; from a fresh mark (0) the busy rows
          // come first and count against the limit.
          let started = 0;
          // The rows read ahead by an earlier pump first (a hold drops them: the loop ends).
          while (started < free) {
            const row = this.ready.get(cfg.name)?.shift();
            if (!row) break;
            if (this.busy(row.id) || hold?.(row)) continue;
            started++;
            fromAhead = true;
            this.deliver(cfg, row);
          }
          if (this.ready.get(cfg.name)?.length) this.leftForConcurrency = true;
          else this.ready.delete(cfg.name);
          for (let round = 0; round < MAX_HOLD_ROUNDS && started < free; round++) {
            const from = this.scanned.get(cfg.name) ?? 0;
            readStore = true;
            // Up to `concurrency` rows more than the free slots: kept for the next results.
            const rows = sql.exec<Row>(
              "SELECT * FROM queue_messages INDEXED BY queue_messages_ready WHERE queue = ? AND leased = 0 AND seq > ? AND next_at <= ? ORDER BY seq LIMIT ?",
              cfg.name,
              from,
              now,
              free - started + cfg.concurrency + (from === 0 ? this.busyCount() : 0),
            );
            let held = false;
            let mark = from;
            let contiguous = true;
            const ahead: Row[] = [];
            for (const row of rows) {
              if (this.busy(row.id)) {
                if (contiguous) mark = row.seq;
                continue;
              }
              if (started >= free) {
                this.leftForConcurrency = true;
                // Kept only behind an unbroken run of rows accounted for (the mark passes it).
                if (!contiguous) break;
                ahead.push(row);
                mark = row.seq;
                continue;
              }
              if (hold?.(row)) {
                held = true;
                contiguous = false;
                continue;
              }
              started++;
              this.deliver(cfg, row);
              if (contiguous) mark = row.seq;
            }
            // (A hold rewrote rows' next_at, which clears the mark: the next round starts over.)
            if (!held && mark > from) this.scanned.set(cfg.name, mark);
            if (!held && ahead.length > 0) this.ready.set(cfg.name, ahead);
            if (!held) break;
          }
          continue;
        }
        // fifo: only the head of each idle group is eligible, and a head waiting on backoff (or in
        // flight) holds back every later message of its group.
        readStore = true;
        const rows = sql.exec<Row>(
          "SELECT * FROM queue_messages INDEXED BY queue_messages_ready WHERE queue = ? AND leased = 0 AND next_at <= ? ORDER BY seq LIMIT ?",
          cfg.name,
          now,
          PUMP_SCAN_LIMIT + this.busyCount(),
        );
        const seen = new Set<string>();
        let started = 0;
        for (const row of rows) {
          // In flight (its group is then in flight too) or delivered: it still heads its group
          // until it is deleted, so the rest of the group waits for the flush (which re-pumps).
          if (this.busy(row.id)) {
            seen.add(`${cfg.name}\u0000${row.group_key}`);
            continue;
          }
          if (started >= free) {
            this.leftForConcurrency = true;
            break;
          }
          const g = `${cfg.name}\u0000${row.group_key}`;
          if (seen.has(g)) continue;
          seen.add(g);
          if (this.inflightGroups.has(g)) continue;
          const head = sql.exec<{ id: string }>(
            "SELECT id FROM queue_messages WHERE queue = ? AND group_key = ? ORDER BY seq LIMIT 1",
            cfg.name,
            row.group_key,
          )[0];
          if (head?.id !== row.id) continue;
          // A head put off holds its group, as a head waiting on its backoff does.
          if (hold?.(row)) continue;
          this.inflightGroups.add(g);
          started++;
          this.deliver(cfg, row);
        }
      }
    } finally {
      this.pumping = false;
    }
    if (readStore || !fromAhead) this.core.rearmAlarm();
    if (this.pumpAgain) {
      this.pumpAgain = false;
      this.kick();
    }
  }

  /**
   * Within RECONNECT_GRACE_MS of the start: due messages whose function (or, for a state trigger
   * fire, whose binding or its function) is not registered are put off by FUNCTION_WAIT_MS, their
   * attempts untouched, instead of being delivered to fail. Checked on the rows a pump is about to
   * deliver (not by a scan of every due row first); the first row of a missing target puts off
   * every due row of that target at once. Returns the check for one pump: true = put off.
   */
  private missingTargetHold(now: number): (row: Row) => boolean {
    const { sql } = this.core.ports;
    const checked = new Map<string, boolean>();
    return (row) => {
      const key = `${row.function_id}\u0000${row.trigger_id ?? ""}`;
      let missing = checked.get(key);
      if (missing === undefined) {
        const binding = row.trigger_id === null ? undefined : this.core.catalog.triggers.get(row.trigger_id);
        const fn = row.trigger_id === null ? row.function_id : binding?.function_id;
        missing = fn === undefined || !this.core.functionExists(fn);
        checked.set(key, missing);
        if (missing) {
          this.forgetScans();
          sql.exec(
            "UPDATE queue_messages SET next_at = ? WHERE leased = 0 AND next_at <= ? AND function_id = ? AND trigger_id IS ?",
            now + FUNCTION_WAIT_MS,
            now,
            row.function_id,
            row.trigger_id,
          );
        }
      }
      return missing;
    };
  }

  private deliver(cfg: QueueConfig, row: Row): void {
    const { sql, clock } = this.core.ports;
    const leaseUntil = clock.now() + cfg.timeout_ms + LEASE_MARGIN_MS;
    this.leases.set(row.id, leaseUntil);
    this.inflight.set(cfg.name, (this.inflight.get(cfg.name) ?? 0) + 1);
    this.inflightTotal++;
    const group = cfg.type === "fifo" ? `${cfg.name}\u0000${row.group_key}` : null;
    const req: CallRequest = { function_id: row.function_id, data: JSON.parse(row.data), timeoutMs: cfg.timeout_ms, invocationId: row.id };
    if (row.traceparent) req.traceparent = row.traceparent;
    if (row.baggage) req.baggage = row.baggage;
    // This attempt's span (telemetry/hops.ts), child of the enqueue; the call is its child.
    const span = deliverySpan(this.core.telemetry, {
      queue: row.queue,
      id: row.id,
      function_id: row.function_id,
      attempt: row.attempts + 1,
      traceparent: row.traceparent,
      backend: "durable",
    });
    if (span) req.traceparent = span.traceparent;
    const maxRetries = row.max_retries ?? cfg.max_retries;
    const backoff = { backoff_ms: row.backoff_ms ?? cfg.backoff_ms };
    let settled: "delivered" | "retry" | "dead" = "retry";
    const done = (row.trigger_id === null ? this.core.invoke(req) : this.fireBinding(row.trigger_id, req))
      .then(async (outcome) => {
        const attempts = row.attempts + 1;
        if (outcome.ok) {
          // Deleted by the next flush, with the others delivered meanwhile (one commit). Its slot is
          // free at once (the `finally` below pumps): the row stays busy, so this instance never
          // delivers it again, and a crash repeats it at most once more (deletionAllowance).
          this.acked.set(row.id, cfg.name);
          bump(this.ackedBy, cfg.name, 1);
          this.settledUnwritten(cfg, cfg.type === "fifo" ? ENQUEUE_FLUSH_MS : ACK_FLUSH_MS);
          settled = "delivered";
          endDelivery(span, outcome, settled);
          return;
        }
        endDelivery(span, outcome, attempts > maxRetries ? "dead" : "retry");
        const error = `${outcome.error.code}: ${outcome.error.message}`;
        if (attempts > maxRetries) {
          // Hand over to the dead-letter store first; only then forget the message, so a crash
          // in between redelivers rather than loses it.
          await this.deadLetter({
            id: row.id,
            queue: row.queue,
            function_id: row.function_id,
            data: JSON.parse(row.data),
            attempts,
            error,
            enqueued_at: row.enqueued_at,
            traceparent: row.traceparent ?? undefined,
          });
          sql.exec("DELETE FROM queue_messages WHERE id = ?", row.id);
          settled = "dead";
          return;
        }
        // Written by the next flush with the other results (one commit); the row stays busy until
        // then. Lost in a crash, the attempt is simply made again (its count not yet raised).
        this.retrying.set(row.id, { queue: cfg.name, attempts, next_at: clock.now() + backoffDelay(backoff, attempts), error });
        settled = "retry";
        // The retry's own wait is its backoff: its write is not in a hurry, but a fifo group's
        // next message waits behind it.
        this.settledUnwritten(cfg, cfg.type === "fifo" ? ENQUEUE_FLUSH_MS : ACK_FLUSH_MS);
      })
      .catch((e) => {
        // The dead-letter store failed: keep the message and try again later.
        this.core.ports.log.warn("durable queue settle failed; message kept", { id: row.id, error: String(e) });
        this.forgetScans();
        sql.exec(
          "UPDATE queue_messages SET leased = 0, next_at = ? WHERE id = ?",
          clock.now() + backoffDelay(backoff, row.attempts + 1),
          row.id,
        );
      })
      .finally(() => {
        this.leases.delete(row.id);
        this.release(cfg.name);
        if (group) this.inflightGroups.delete(group);
        // A delivered or retried message is reported once its result is stored (flushAcks).
        if (settled === "dead") this.onSettled?.(row.id, settled);
        this.pump();
      });
    this.core.ports.background(done);
  }

  /** A result of `cfg`'s queue waits for its write: at once if the queue's unwritten results reach
   * deletionAllowance, else within `ms`. */
  private settledUnwritten(cfg: QueueConfig, ms: number): void {
    bump(this.unwrittenBy, cfg.name, 1);
    if ((this.unwrittenBy.get(cfg.name) ?? 0) >= deletionAllowance(cfg.concurrency)) this.flushAcks();
    else this.scheduleFlush(ms);
  }

  /** Flush within `ms` (an armed timer that would fire later is brought forward). */
  private scheduleFlush(ms: number): void {
    const { timers, clock } = this.core.ports;
    const at = clock.now() + ms;
    if (this.flushTimer !== null) {
      if (this.flushAt <= at) return;
      timers.clear(this.flushTimer);
      this.flushTimer = null;
    }
    try {
      this.flushTimer = timers.set(() => {
        this.flushTimer = null;
        this.flushAcks();
      }, ms);
      this.flushAt = at;
    } catch {
      // No timer to be had (workerd's max active timeouts): write now rather than never.
      this.flushAcks();
    }
  }

  /**
   * One write for everything waiting: the enqueues (then acknowledged) and the deletions of
   * delivered messages (then their slots are free); then the queues are pumped at once, in this
   * event, so a freed slot or a new message does not wait for another tick. A fifo group whose
   * head was deleted goes on. If the write fails, nothing of it is stored: the enqueues are
   * refused (their senders were told nothing yet) and the deletions wait for the next flush.
   */
  flushAcks(): void {
    if (this.acked.size === 0 && this.retrying.size === 0 && this.incoming.length === 0) return;
    if (this.flushTimer !== null) {
      this.core.ports.timers.clear(this.flushTimer);
      this.flushTimer = null;
    }
    const done = [...this.acked];
    const retries = [...this.retrying];
    const batch = this.incoming.splice(0);
    const { sql } = this.core.ports;
    try {
      sql.transaction(() => {
        for (const { cfg, msg, data, group } of batch) {
          const req: Omit<EnqueueRequest, "data"> = { queue: cfg.name, function_id: msg.function_id };
          if (msg.traceparent) req.traceparent = msg.traceparent;
          if (msg.baggage) req.baggage = msg.baggage;
          const extras: PushExtras = {};
          if (msg.trigger_id !== undefined) extras.trigger_id = msg.trigger_id;
          this.insert(cfg, req, data, msg.id, group, msg.overrides, extras);
        }
        deleteRows(
          sql,
          done.map(([id]) => id),
        );
        for (const [id, r] of retries)
          sql.exec(
            "UPDATE queue_messages SET attempts = ?, leased = 0, next_at = ?, last_error = ? WHERE id = ?",
            r.attempts,
            r.next_at,
            r.error,
            id,
          );
      });
    } catch (e) {
      this.core.ports.log.warn("durable queue write failed", {
        enqueues: batch.length,
        deletions: done.length,
        retries: retries.length,
        error: String(e),
      });
      for (const b of batch) b.done({ ok: false, message: `the queue could not store the message: ${String(e)}` });
      if (done.length > 0 || retries.length > 0) this.scheduleFlush(ACK_FLUSH_MS);
      return;
    }
    for (const b of batch) b.done({ ok: true });
    for (const [id, queue] of done) {
      this.acked.delete(id);
      bump(this.ackedBy, queue, -1);
      bump(this.unwrittenBy, queue, -1);
      this.onSettled?.(id, "delivered");
    }
    // Rows written with a new next_at may now be due behind a queue's scanned mark.
    if (retries.length > 0) this.forgetScans();
    for (const [id, r] of retries) {
      this.retrying.delete(id);
      bump(this.unwrittenBy, r.queue, -1);
      this.onSettled?.(id, "retry");
    }
    this.pump();
  }

  /** Rows' `next_at` were rewritten (or the alarm reads afresh): the pump reads from the start. */
  private forgetScans(): void {
    this.scanned.clear();
    this.ready.clear();
  }

  /** One delivery of `queue` is over: its slot is free. */
  private release(queue: string): void {
    this.inflight.set(queue, (this.inflight.get(queue) ?? 1) - 1);
    this.inflightTotal--;
  }

  /** A row the pump must pass over: in flight in this instance, or delivered and not yet deleted. */
  private busy(id: string): boolean {
    return this.leases.has(id) || this.acked.has(id) || this.retrying.has(id);
  }

  /** Rows the pump passes over (busy): a read from a fresh mark asks for this many more. */
  private busyCount(): number {
    return this.leases.size + this.acked.size + this.retrying.size;
  }

  /**
   * A `state` trigger fire: through the binding as it is now (condition, function, metadata), with
   * the message id as the invocation id of every attempt. A binding that is not registered right
   * now (its owner reconnecting) fails the attempt, which is retried; a condition answering
   * `false` delivers it (there is nothing to do), a condition that fails is retried too.
   */
  private async fireBinding(triggerId: string, req: CallRequest): Promise<CallOutcome> {
    const binding = this.core.catalog.triggers.get(triggerId);
    if (!binding)
      return {
        ok: false,
        error: { code: "function_not_found", message: `trigger ${triggerId} is not registered (its owner may be reconnecting)` },
      };
    const opts: FireOptions = { invocationId: req.invocationId, conditionErrors: "fail" };
    if (req.timeoutMs !== undefined) opts.timeoutMs = req.timeoutMs;
    if (req.traceparent) opts.traceparent = req.traceparent;
    if (req.baggage) opts.baggage = req.baggage;
    const out = await this.core.fire(binding, req.data, opts);
    return out === "skipped" ? { ok: true } : out;
  }

  private async deadLetter(msg: DeadLetter): Promise<void> {
    if (!this.deadLetters) throw new Error("no dead-letter sink configured");
    await this.deadLetters.deadLetter(msg);
  }
}

/** Most ids one DELETE names (SQLite's bound on host parameters is 32,766 in workerd's build, 999
 * in old ones: this stays under both). */
const DELETE_CHUNK = 500;

/** Delete the rows of `ids`, a chunk of ids per statement rather than a statement per id. */
function deleteRows(sql: Sql, ids: string[]): void {
  for (let i = 0; i < ids.length; i += DELETE_CHUNK) {
    const chunk = ids.slice(i, i + DELETE_CHUNK);
    sql.exec(`DELETE FROM queue_messages WHERE id IN (${chunk.map(() => "?").join(",")})`, ...chunk);
  }
}
