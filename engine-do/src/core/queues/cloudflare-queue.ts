// The Cloudflare Queues backend (QueueBackend, backend.ts) of the `enqueue` action: throughput,
// at-least-once, unordered. The engine object produces to the `DELIVERIES` queue; the Worker's
// `queue()` handler hands each message back to the object of its namespace (`Engine.deliverQueued`),
// which invokes the target here and answers ack or retry-with-backoff. Past max_retries the message
// becomes a dead letter. Cloudflare may deliver a message twice: a table of delivered receipt ids
// drops the repeat.
import type { CallRequest, EngineApi } from "../api.ts";
import type { EnqueueResult, QueueBackend, QueueMessage } from "./backend.ts";
import { CLOUDFLARE_MAX_DELAY_S, backoffDelay, type QueueConfig } from "./config.ts";
import type { DeadLetterSink } from "./dead-letters.ts";
import { deliverySpan, endDelivery } from "../telemetry/hops.ts";
import type { ActiveSpan } from "../telemetry/telemetry.ts";

/** The part of a Queue producer binding used here (structural: no `cloudflare:*` types in core). */
export interface QueueProducerLike {
  send(body: CloudMessageBody, options?: { delaySeconds?: number }): Promise<unknown>;
}

/** What travels through Cloudflare Queues. Versioned: a deploy may meet messages of the last one. */
export interface CloudMessageBody {
  v: 1;
  ns: string;
  id: string;
  queue: string;
  function_id: string;
  data: unknown;
  enqueued_at: number;
  traceparent?: string;
  baggage?: string;
}

export type DeliveryVerdict = { ack: true; outcome: "delivered" | "duplicate" | "dead" } | { ack: false; delaySeconds: number };

/** Cloudflare Queues refuses messages over 128 KB; leave room for the envelope. */
export const MAX_CLOUD_MESSAGE_BYTES = 120 * 1024;
/** How long delivered ids are remembered for deduplication (Cloudflare redelivers within minutes). */
const DELIVERED_WINDOW_MS = 24 * 3_600_000;
/** Prune the delivered-id table once every this many deliveries. */
const PRUNE_EVERY = 500;

export function isCloudMessageBody(v: unknown): v is CloudMessageBody {
  if (!v || typeof v !== "object") return false;
  const b = v as Record<string, unknown>;
  return (
    b.v === 1 &&
    typeof b.ns === "string" &&
    typeof b.id === "string" &&
    typeof b.queue === "string" &&
    typeof b.function_id === "string" &&
    typeof b.enqueued_at === "number"
  );
}

export class CloudflareQueue implements QueueBackend {
  readonly name = "cloudflare";
  private readonly core: EngineApi;
  private readonly producer: QueueProducerLike;
  private readonly configFor: (queue: string) => QueueConfig | undefined;
  private readonly deadLetters: DeadLetterSink;
  private readonly running = new Map<string, number>();
  private readonly waiters = new Map<string, (() => void)[]>();
  private deliveries = 0;

  constructor(
    core: EngineApi,
    producer: QueueProducerLike,
    configFor: (queue: string) => QueueConfig | undefined,
    deadLetters: DeadLetterSink,
  ) {
    this.core = core;
    this.producer = producer;
    this.configFor = configFor;
    this.deadLetters = deadLetters;
  }

  /** Produce one message. Refuses payloads over the Cloudflare limit and what only the durable
   * backend offers (fifo, per-message retry overrides: config.ts never routes either here). */
  async enqueue(cfg: QueueConfig, msg: QueueMessage, onAccept: () => void): Promise<EnqueueResult> {
    if (cfg.type === "fifo")
      return { ok: false, message: `fifo queue '${cfg.name}' needs backend "durable" (Cloudflare Queues do not keep order)` };
    if (msg.overrides && Object.keys(msg.overrides).length > 0)
      return { ok: false, message: `per-message retry overrides need backend "durable" (queue '${cfg.name}')` };
    const body: CloudMessageBody = {
      v: 1,
      ns: this.core.ports.namespace,
      id: msg.id,
      queue: cfg.name,
      function_id: msg.function_id,
      data: msg.data ?? null,
      enqueued_at: this.core.ports.clock.now(),
    };
    if (msg.traceparent) body.traceparent = msg.traceparent;
    if (msg.baggage) body.baggage = msg.baggage;
    const size = JSON.stringify(body).length;
    if (size > MAX_CLOUD_MESSAGE_BYTES)
      return {
        ok: false,
        message: `message of ${size} bytes exceeds ${MAX_CLOUD_MESSAGE_BYTES} bytes (Cloudflare Queues limit); use a durable queue`,
      };
    // The receipt is held before the await, so a concurrent repeat of the key gets this receipt;
    // a failed send makes the router withdraw it.
    onAccept();
    try {
      await this.producer.send(body);
    } catch (e) {
      return { ok: false, message: e instanceof Error ? e.message : String(e) };
    }
    return { ok: true };
  }

  /** One delivery attempt (`attempts` counts from 1, as Cloudflare's `Message.attempts`). */
  async deliver(body: CloudMessageBody, attempts: number): Promise<DeliveryVerdict> {
    const { sql, clock } = this.core.ports;
    if (sql.exec("SELECT 1 FROM queue_delivered WHERE id = ?", body.id).length > 0) return { ack: true, outcome: "duplicate" };
    const cfg = this.configFor(body.queue);
    if (!cfg) {
      // Configuration changed under the message: keep it as a dead letter rather than drop it.
      await this.deadLetters.deadLetter({
        id: body.id,
        queue: body.queue,
        function_id: body.function_id,
        data: body.data,
        attempts,
        error: `enqueue_error: queue '${body.queue}' is not configured`,
        enqueued_at: body.enqueued_at,
      });
      return { ack: true, outcome: "dead" };
    }
    await this.acquire(cfg);
    let outcome;
    let span: ActiveSpan | undefined;
    try {
      const req: CallRequest = { function_id: body.function_id, data: body.data, timeoutMs: cfg.timeout_ms, invocationId: body.id };
      if (body.traceparent) req.traceparent = body.traceparent;
      if (body.baggage) req.baggage = body.baggage;
      // This attempt's span (telemetry/hops.ts), child of the enqueue; the call is its child.
      span = deliverySpan(this.core.telemetry, {
        queue: body.queue,
        id: body.id,
        function_id: body.function_id,
        attempt: attempts,
        traceparent: body.traceparent,
        backend: "cloudflare",
      });
      if (span) req.traceparent = span.traceparent;
      outcome = await this.core.invoke(req);
    } finally {
      this.release(cfg);
    }
    endDelivery(span, outcome, outcome.ok ? "delivered" : attempts > cfg.max_retries ? "dead" : "retry");
    if (outcome.ok) {
      sql.exec("INSERT OR REPLACE INTO queue_delivered (id, at) VALUES (?, ?)", body.id, clock.now());
      if (++this.deliveries % PRUNE_EVERY === 0) sql.exec("DELETE FROM queue_delivered WHERE at < ?", clock.now() - DELIVERED_WINDOW_MS);
      return { ack: true, outcome: "delivered" };
    }
    const error = `${outcome.error.code}: ${outcome.error.message}`;
    if (attempts > cfg.max_retries) {
      const dl: Parameters<DeadLetterSink["deadLetter"]>[0] = {
        id: body.id,
        queue: body.queue,
        function_id: body.function_id,
        data: body.data,
        attempts,
        error,
        enqueued_at: body.enqueued_at,
      };
      if (body.traceparent) dl.traceparent = body.traceparent;
      await this.deadLetters.deadLetter(dl);
      return { ack: true, outcome: "dead" };
    }
    return { ack: false, delaySeconds: Math.min(CLOUDFLARE_MAX_DELAY_S, Math.ceil(backoffDelay(cfg, attempts) / 1000)) };
  }

  /** Per-queue `concurrency` inside this object (batches from several consumers may overlap). */
  private acquire(cfg: QueueConfig): Promise<void> {
    const n = this.running.get(cfg.name) ?? 0;
    if (n < cfg.concurrency) {
      this.running.set(cfg.name, n + 1);
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const list = this.waiters.get(cfg.name) ?? [];
      list.push(() => {
        this.running.set(cfg.name, (this.running.get(cfg.name) ?? 0) + 1);
        resolve();
      });
      this.waiters.set(cfg.name, list);
    });
  }
  private release(cfg: QueueConfig): void {
    this.running.set(cfg.name, (this.running.get(cfg.name) ?? 1) - 1);
    const next = this.waiters.get(cfg.name)?.shift();
    next?.();
  }
}
