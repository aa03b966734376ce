// The `enqueue` action's provider: picks each queue's backend from configuration (config.ts),
// keeps idempotency receipts for both backends in the object's SQLite, and offers the queue
// built-ins (topics, dead letters, redrive, discard; wire-protocol §7.1 "Queue worker").
import { IIIError } from "@iii-edge/protocol";
import { z } from "zod";
import { parseInput } from "../builtins/input.ts";
import type { EngineCore, EnqueueRequest, QueueProvider } from "../engine.ts";
import type { CallOutcome } from "../ports.ts";
import { CloudflareQueue, type CloudMessageBody, type DeliveryVerdict, type QueueProducerLike } from "./cloudflare-queue.ts";
import { DURABLE_TOPIC_CONFIG, DURABLE_TOPIC_PREFIX, type QueueConfig } from "./config.ts";
import type { DeadLetterStore } from "./dead-letters.ts";
import { DurableQueues, type MessageOverrides } from "./durable-queue.ts";

/** How long an idempotency key returns its first receipt. */
const RECEIPT_WINDOW_MS = 24 * 3_600_000;
/** Prune old receipts once every this many keyed enqueues. */
const RECEIPT_PRUNE_EVERY = 500;
/** Most dead letters one `iii::queue::redrive` call moves (bounds one call's work; call again). */
const MAX_REDRIVE = 10_000;
/** Page size for dead-letter listings. */
const DLQ_PAGE_MAX = 1_000;

export class QueueRouter implements QueueProvider {
  readonly durable: DurableQueues;
  readonly cloud: CloudflareQueue | undefined;
  readonly deadLetters: DeadLetterStore;
  private readonly core: EngineCore;
  private readonly configs = new Map<string, QueueConfig>();
  private keyed = 0;

  constructor(core: EngineCore, configs: QueueConfig[], deadLetters: DeadLetterStore, producer?: QueueProducerLike) {
    this.core = core;
    for (const c of configs) this.configs.set(c.name, c);
    this.deadLetters = deadLetters;
    const configFor = (name: string) => this.config(name);
    this.durable = new DurableQueues(core, configFor);
    this.durable.setDeadLetterSink(deadLetters);
    this.cloud = producer ? new CloudflareQueue(core, producer, configFor, deadLetters) : undefined;
    core.ports.sql.exec("CREATE TABLE IF NOT EXISTS queue_receipts (queue TEXT NOT NULL, idempotency_key TEXT NOT NULL, receipt TEXT NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (queue, idempotency_key))");
  }

  config(name: string): QueueConfig | undefined {
    const c = this.configs.get(name);
    if (c) return c;
    if (name.startsWith(DURABLE_TOPIC_PREFIX) && name.length > DURABLE_TOPIC_PREFIX.length) return { name, ...DURABLE_TOPIC_CONFIG };
    return undefined;
  }
  queueNames(): string[] {
    return [...this.configs.keys()].sort();
  }

  enqueue(req: EnqueueRequest): Promise<CallOutcome> {
    return this.enqueueWith(req);
  }

  /** Enqueue with an explicit message id (redrive keeps the original) or per-message overrides. */
  async enqueueWith(req: EnqueueRequest, opts: { id?: string; overrides?: MessageOverrides } = {}): Promise<CallOutcome> {
    const cfg = this.config(req.queue);
    if (!cfg) return { ok: false, error: { code: "enqueue_error", message: `queue '${req.queue}' is not configured (see QUEUES in wrangler.toml)` } };
    const { sql, clock } = this.core.ports;
    const key = req.idempotency_key;
    if (key) {
      const prior = sql.exec<{ receipt: string; created_at: number }>("SELECT receipt, created_at FROM queue_receipts WHERE queue = ? AND idempotency_key = ?", cfg.name, key)[0];
      if (prior && prior.created_at > clock.now() - RECEIPT_WINDOW_MS) return { ok: true, result: { messageReceiptId: prior.receipt } };
      if (++this.keyed % RECEIPT_PRUNE_EVERY === 0) sql.exec("DELETE FROM queue_receipts WHERE created_at < ?", clock.now() - RECEIPT_WINDOW_MS);
    }
    const id = opts.id ?? this.core.ports.newId();
    const remember = () => {
      if (key) sql.exec("INSERT OR REPLACE INTO queue_receipts (queue, idempotency_key, receipt, created_at) VALUES (?, ?, ?, ?)", cfg.name, key, id, clock.now());
    };
    if (cfg.backend === "durable" || !this.cloud) {
      // Message and receipt in one transaction: acknowledged means stored.
      const r = sql.transaction(() => {
        const pushed = this.durable.push(cfg, req, id, opts.overrides);
        if (pushed.ok) remember();
        return pushed;
      });
      if (!r.ok) return { ok: false, error: { code: "enqueue_error", message: r.message } };
      return { ok: true, result: { messageReceiptId: id } };
    }
    // Reserve the receipt before the await, so a concurrent repeat of the key gets this receipt;
    // a failed send releases it.
    remember();
    try {
      await this.cloud.send(cfg, req, id);
    } catch (e) {
      if (key) sql.exec("DELETE FROM queue_receipts WHERE queue = ? AND idempotency_key = ? AND receipt = ?", cfg.name, key, id);
      return { ok: false, error: { code: "enqueue_error", message: e instanceof Error ? e.message : String(e) } };
    }
    return { ok: true, result: { messageReceiptId: id } };
  }

  /** A Cloudflare Queues delivery handed back by the Worker's queue() handler. */
  deliverCloud(body: CloudMessageBody, attempts: number): Promise<DeliveryVerdict> {
    if (!this.cloud) return Promise.resolve({ ack: false, delaySeconds: 5 });
    return this.cloud.deliver(body, attempts);
  }

  /** Re-enqueue dead letters of `queue` (all, or one) to that queue, then drop them from the list. */
  async redrive(queue: string, messageId?: string): Promise<number> {
    let moved = 0;
    const one = async (m: { id: string; function_id: string; data: unknown; traceparent?: string }) => {
      const req: EnqueueRequest = { queue, function_id: m.function_id, data: m.data };
      if (m.traceparent) req.traceparent = m.traceparent;
      const out = await this.enqueueWith(req, { id: m.id });
      if (!out.ok) throw new IIIError("enqueue_error", `redrive of ${m.id}: ${out.error.message}`);
      await this.deadLetters.remove(queue, m.id);
      moved++;
    };
    if (messageId !== undefined) {
      const m = await this.deadLetters.get(queue, messageId);
      if (!m) throw new IIIError("NOT_FOUND", `no dead letter ${messageId} in queue '${queue}'`);
      await one(m);
      return moved;
    }
    while (moved < MAX_REDRIVE) {
      const page = await this.deadLetters.messages(queue, 0, Math.min(100, MAX_REDRIVE - moved));
      if (page.length === 0) break;
      for (const m of page) await one(m);
    }
    return moved;
  }
}

const queueName = z.string().min(1).max(256);
const dlqMessagesInput = z.object({ topic: queueName.optional(), queue: queueName.optional(), offset: z.number().int().min(0).default(0), limit: z.number().int().min(1).max(DLQ_PAGE_MAX).default(100) });
const redriveInput = z.object({ queue: queueName });
const messageInput = z.object({ queue: queueName, message_id: z.string().min(1).max(256) });
const enqueueInput = z.object({ queue: queueName, function_id: z.string().min(1).max(512), data: z.unknown().optional(), idempotency_key: z.string().min(1).max(256).optional() });

export function installQueueBuiltins(core: EngineCore, router: QueueRouter): void {
  core.addBuiltin({
    id: "engine::queue::enqueue",
    description: "Enqueue {queue, function_id, data, idempotency_key?}; returns {messageReceiptId}",
    handler: async (input, ctx) => {
      const q = parseInput(enqueueInput, input);
      const req: EnqueueRequest = { queue: q.queue, function_id: q.function_id, data: q.data ?? null };
      if (q.idempotency_key) req.idempotency_key = q.idempotency_key;
      if (ctx.traceparent) req.traceparent = ctx.traceparent;
      const out = await router.enqueue(req);
      if (!out.ok) throw new IIIError(out.error.code, out.error.message);
      return out.result;
    },
  });
  core.addBuiltin({
    id: "engine::queue::list_topics",
    description: "Configured queues with their backend and what is waiting in the durable backend",
    handler: () => {
      const stats = new Map(router.durable.stats().map((s) => [s.queue, s]));
      const names = new Set([...router.queueNames(), ...stats.keys()]);
      return {
        topics: [...names].sort().map((name) => {
          const cfg = router.config(name);
          return { name, backend: cfg?.backend ?? null, type: cfg?.type ?? null, depth: stats.get(name)?.depth ?? 0, inflight: stats.get(name)?.inflight ?? 0 };
        }),
      };
    },
  });
  core.addBuiltin({
    id: "engine::queue::topic_stats",
    description: "Configuration and durable depth of one queue",
    handler: (input) => {
      const { topic } = parseInput(z.object({ topic: queueName }), input);
      const cfg = router.config(topic);
      if (!cfg) throw new IIIError("NOT_FOUND", `queue '${topic}' is not configured`);
      return { topic, config: cfg, depth: router.durable.depth(topic) };
    },
  });
  core.addBuiltin({
    id: "engine::queue::dlq_topics",
    description: "Queues that hold dead letters, with counts",
    handler: async () => ({ topics: (await router.deadLetters.topics()).map((t) => ({ topic: t.queue, count: t.count })) }),
  });
  core.addBuiltin({
    id: "engine::queue::dlq_messages",
    description: "Dead letters of one queue ({topic, offset?, limit?}): payload, attempts and last error",
    handler: async (input) => {
      const q = parseInput(dlqMessagesInput, input);
      const topic = q.topic ?? q.queue;
      if (!topic) throw new IIIError("deserialization_error", "topic: required");
      const messages = await router.deadLetters.messages(topic, q.offset, q.limit);
      return { topic, messages: messages.map((m) => ({ message_id: m.id, ...m })) };
    },
  });
  core.addBuiltin({
    id: "iii::queue::redrive",
    description: "Re-enqueue every dead letter of a queue ({queue}); returns {queue, redriven}",
    handler: async (input) => {
      const { queue } = parseInput(redriveInput, input);
      return { queue, redriven: await router.redrive(queue) };
    },
  });
  core.addBuiltin({
    id: "iii::queue::redrive_message",
    description: "Re-enqueue one dead letter ({queue, message_id})",
    handler: async (input) => {
      const { queue, message_id } = parseInput(messageInput, input);
      await router.redrive(queue, message_id);
      return { queue, message_id, redriven: true };
    },
  });
  core.addBuiltin({
    id: "iii::queue::discard_message",
    description: "Drop one dead letter for good ({queue, message_id})",
    handler: async (input) => {
      const { queue, message_id } = parseInput(messageInput, input);
      if (!(await router.deadLetters.remove(queue, message_id))) throw new IIIError("NOT_FOUND", `no dead letter ${message_id} in queue '${queue}'`);
      return { queue, message_id, discarded: true };
    },
  });
}
