// Idempotency receipts of the `enqueue` action (`action.idempotency_key`, an iii-edge extension),
// for every backend alike: a repeat of a key within the window returns the first receipt and
// enqueues nothing. Kept in the object's SQLite, so a repeat after eviction is still caught.
import type { Sql } from "../ports.ts";

/** How long an idempotency key returns its first receipt. */
const RECEIPT_WINDOW_MS = 24 * 3_600_000;
/** Prune old receipts once every this many keyed enqueues that found none. */
const RECEIPT_PRUNE_EVERY = 500;

export class IdempotencyReceipts {
  private readonly sql: Sql;
  private readonly now: () => number;
  private misses = 0;

  constructor(sql: Sql, now: () => number) {
    this.sql = sql;
    this.now = now;
  }

  /** The receipt a key already has in `queue`, if it is still within the window. */
  find(queue: string, key: string): string | undefined {
    const prior = this.sql.exec<{ receipt: string; created_at: number }>(
      "SELECT receipt, created_at FROM queue_receipts WHERE queue = ? AND idempotency_key = ?",
      queue,
      key,
    )[0];
    if (prior && prior.created_at > this.now() - RECEIPT_WINDOW_MS) return prior.receipt;
    if (++this.misses % RECEIPT_PRUNE_EVERY === 0)
      this.sql.exec("DELETE FROM queue_receipts WHERE created_at < ?", this.now() - RECEIPT_WINDOW_MS);
    return undefined;
  }

  /** Give `key` the receipt `id` (replacing an expired one). */
  hold(queue: string, key: string, id: string): void {
    this.sql.exec(
      "INSERT OR REPLACE INTO queue_receipts (queue, idempotency_key, receipt, created_at) VALUES (?, ?, ?, ?)",
      queue,
      key,
      id,
      this.now(),
    );
  }

  /** Withdraw receipt `id` of `key` (its enqueue failed); a receipt held by another message stays. */
  release(queue: string, key: string, id: string): void {
    this.sql.exec("DELETE FROM queue_receipts WHERE queue = ? AND idempotency_key = ? AND receipt = ?", queue, key, id);
  }
}
