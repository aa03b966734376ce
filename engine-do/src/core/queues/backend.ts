// The one interface both queue backends implement, and all the router (router.ts) knows of them:
// Cloudflare Queues (cloudflare-queue.ts) and the durable FIFO inside the object (durable-queue.ts).
// Idempotency keys (receipts.ts), redrive and discard (dead-letters.ts) sit on top of `enqueue`,
// once for both. What a backend must do beyond the signature is the contract below; one
// conformance suite runs it against both, for real (tests/triggers/queue-backend.case.ts).
import type { QueueBackendName, QueueConfig } from "./config.ts";

/** Per-message overrides of the queue's retry policy (a `durable:subscriber` binding's `queue_config`). */
export interface MessageOverrides {
  max_retries?: number;
  backoff_ms?: number;
}

/** One message as the router hands it to a backend. */
export interface QueueMessage {
  /** The receipt id: the invocation id of every attempt, and the dead letter's id. Redrive reuses it. */
  id: string;
  function_id: string;
  data: unknown;
  traceparent?: string;
  baggage?: string;
  overrides?: MessageOverrides;
  /** A `state` trigger fire (durable backend only): delivered through that binding — its
   * condition, its current function, its metadata (durable-queue.ts). */
  trigger_id?: string;
  /** The fifo group, when the sender sets it rather than the queue's message_group_field. */
  group?: string;
}

export type EnqueueResult = { ok: true } | { ok: false; message: string };

/**
 * A queue backend. Contract, per queue `cfg`:
 * - delivery: `data` reaches `function_id` with invocation id `msg.id`, at least once; a message
 *   whose handler succeeded is not delivered again.
 * - retries: after failed attempt n (from 1) the next comes no sooner than `backoffDelay(cfg, n)`
 *   (config.ts); a message failing past `max_retries` retries goes to the DeadLetterSink
 *   (dead-letters.ts) with payload, attempts and last error, and leaves the backend.
 * - concurrency: at most `cfg.concurrency` deliveries of one queue in flight in this object.
 * - fifo, where the backend offers it: one message per `message_group_field` value in flight, in
 *   enqueue order, a failing head holding back only its own group.
 */
export interface QueueBackend {
  readonly name: QueueBackendName;
  /**
   * Take `msg` for queue `cfg`; resolve `{ok: true}` only once it is stored (acknowledged means
   * stored). `onAccept` records the router's idempotency receipt; the backend calls it once, before
   * its first await (so a concurrent repeat of the key finds the receipt) and, when the backend
   * stores the message in SQLite, in the same transaction. When this resolves `{ok: false}` the
   * router withdraws the receipt. `batch` (only without a key: nothing to record first): the backend
   * may store the message later, in one write with others, and resolve then.
   */
  enqueue(cfg: QueueConfig, msg: QueueMessage, onAccept: () => void, opts?: { batch?: boolean }): Promise<EnqueueResult>;
}
