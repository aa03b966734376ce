// The `enqueue` action's provider: configuration + dispatch. Each queue's configuration
// (config.ts) names its backend (QueueBackend, backend.ts: Cloudflare Queues or the durable FIFO
// in the object); idempotency receipts (receipts.ts) and redrive of dead letters (dead-letters.ts)
// sit on top of the backends' one `enqueue`, the same for both. The built-ins are in builtins.ts.
import { IIIError, OPEN_GRANT, globMatch, type ErrorBody } from "@iii-edge/protocol";
import type { EngineApi, EnqueueRequest, QueueProvider } from "../api.ts";
import type { CallOutcome } from "../ports.ts";
import type { MessageOverrides, QueueBackend, QueueMessage } from "./backend.ts";
import { CloudflareQueue, type CloudMessageBody, type DeliveryVerdict, type QueueProducerLike } from "./cloudflare-queue.ts";
import {
  DURABLE_TOPIC_CONFIG,
  DURABLE_TOPIC_PREFIX,
  RESERVED_PREFIXES,
  STATE_TRIGGER_CONFIG,
  STATE_TRIGGER_PREFIX,
  type QueueConfig,
} from "./config.ts";
import type { DeadLetterStore } from "./dead-letters.ts";
import { DurableQueues, fifoGroup } from "./durable-queue.ts";
import { IdempotencyReceipts } from "./receipts.ts";

/** The fifo group of a state trigger fire: its record (scope and key), so one record's fires stay
 * in write order while other records' run beside them. */
export function stateFireGroup(scope: string, key: string): string {
  return JSON.stringify([scope, key]);
}

/** A redriven dead letter of a `state:<trigger id>` queue is a fire of that binding again. */
function stateFireOf(queue: string, data: unknown): { trigger_id?: string; group?: string } {
  if (!queue.startsWith(STATE_TRIGGER_PREFIX)) return {};
  const d = (data ?? {}) as { scope?: unknown; key?: unknown };
  const out: { trigger_id?: string; group?: string } = { trigger_id: queue.slice(STATE_TRIGGER_PREFIX.length) };
  if (typeof d.scope === "string" && typeof d.key === "string") out.group = stateFireGroup(d.scope, d.key);
  return out;
}

/** Most dead letters one `iii::queue::redrive` call moves (bounds one call's work; call again). */
const MAX_REDRIVE = 10_000;
/** Dead letters read per page while redriving a queue. */
const REDRIVE_PAGE = 100;
/** Retry delay for a Cloudflare delivery reaching an object that has no producer binding. */
const NO_PRODUCER_RETRY_S = 5;

/** An enqueue checked by `QueueRouter.prepare`, to be stored by `commitPrepared`. */
export interface PreparedEnqueue {
  cfg: QueueConfig;
  msg: QueueMessage;
  idempotency_key?: string;
  /** The idempotency key already has a receipt (`msg.id`): nothing is stored. */
  repeat: boolean;
}

export class QueueRouter implements QueueProvider {
  readonly durable: DurableQueues;
  readonly cloud: CloudflareQueue | undefined;
  readonly deadLetters: DeadLetterStore;
  private readonly core: EngineApi;
  private readonly configs = new Map<string, QueueConfig>();
  private readonly receipts: IdempotencyReceipts;

  constructor(core: EngineApi, configs: QueueConfig[], deadLetters: DeadLetterStore, producer?: QueueProducerLike) {
    this.core = core;
    for (const c of configs) this.configs.set(c.name, c);
    this.deadLetters = deadLetters;
    const configFor = (name: string) => this.config(name);
    this.durable = new DurableQueues(core, configFor, deadLetters);
    this.cloud = producer ? new CloudflareQueue(core, producer, configFor, deadLetters) : undefined;
    this.receipts = new IdempotencyReceipts(core.ports.sql, () => core.ports.clock.now());
  }

  config(name: string): QueueConfig | undefined {
    const c = this.configs.get(name);
    if (c) return c;
    if (name.startsWith(DURABLE_TOPIC_PREFIX) && name.length > DURABLE_TOPIC_PREFIX.length) return { name, ...DURABLE_TOPIC_CONFIG };
    if (name.startsWith(STATE_TRIGGER_PREFIX) && name.length > STATE_TRIGGER_PREFIX.length) return { name, ...STATE_TRIGGER_CONFIG };
    return undefined;
  }
  queueNames(): string[] {
    return [...this.configs.keys()].sort();
  }

  /** The backend `cfg` names; without a producer binding the durable one carries everything. */
  backendFor(cfg: QueueConfig): QueueBackend {
    return cfg.backend === "cloudflare" && this.cloud ? this.cloud : this.durable;
  }

  /** The `enqueue` action and engine::queue::enqueue: a caller's message, checked against the
   * queue's owner first (refused: `forbidden`, nothing stored). */
  enqueue(req: EnqueueRequest): Promise<CallOutcome> {
    const cfg = this.config(req.queue);
    const refused = cfg && this.refuse(cfg, req);
    if (refused) return Promise.resolve({ ok: false, error: refused });
    return this.enqueueWith(req, { batch: true });
  }

  /**
   * May this caller put this message on `cfg`? The engine's own queues (`state:<trigger id>`,
   * `durable:<topic>`) take only what the engine writes itself. An owned queue (`consumers`) takes
   * messages for its consumer functions only, and from a principal only for a function that a
   * connection of that same principal serves: a token without the worker's rights can neither fill
   * the worker's queue with its own slow function nor replay the worker's steps. Trusted callers
   * (no principal: the engine, edge hosts such as the built-in harness) may.
   */
  refuse(cfg: QueueConfig, req: EnqueueRequest): ErrorBody | undefined {
    const who = req.principal === undefined ? "a trusted caller" : `'${req.principal}'`;
    const reserved = RESERVED_PREFIXES.find((p) => cfg.name.startsWith(p));
    if (reserved)
      return { code: "forbidden", message: `queue '${cfg.name}' is the engine's own (${reserved}…): only the engine puts messages on it` };
    if (!cfg.consumers) return undefined;
    if (!cfg.consumers.some((g) => globMatch(g, req.function_id))) {
      return {
        code: "forbidden",
        message: `queue '${cfg.name}' carries only ${cfg.consumers.join(", ")}; ${who} may not queue ${req.function_id} on it`,
      };
    }
    if (req.principal === undefined) return undefined;
    const fn = this.core.catalog.functions.get(req.function_id);
    const server = fn && fn.kind === "worker" ? this.core.catalog.workers.get(fn.owner) : undefined;
    if (!server || (server.grant ?? OPEN_GRANT).sub !== req.principal) {
      return {
        code: "forbidden",
        message: `queue '${cfg.name}' belongs to the worker serving ${req.function_id}; ${who} may not queue on it`,
      };
    }
    return undefined;
  }

  /**
   * Enqueue with an explicit message id (redrive keeps the original) or per-message overrides.
   * `batch`: a caller's single message (the `enqueue` action), which the durable backend may store
   * in one write with the others arriving meanwhile; the engine's own loops over many messages
   * (redrive, a topic's subscribers) await each one and are stored at once.
   */
  async enqueueWith(
    req: EnqueueRequest,
    opts: { id?: string; overrides?: MessageOverrides; trigger_id?: string; group?: string; batch?: boolean } = {},
  ): Promise<CallOutcome> {
    const cfg = this.config(req.queue);
    if (!cfg)
      return {
        ok: false,
        error: { code: "enqueue_error", message: `queue '${req.queue}' is not configured (see QUEUES in wrangler.toml)` },
      };
    const key = req.idempotency_key;
    if (key) {
      const prior = this.receipts.find(cfg.name, key);
      if (prior !== undefined) return { ok: true, result: { messageReceiptId: prior } };
    }
    const msg: QueueMessage = { id: opts.id ?? this.core.ports.newId(), function_id: req.function_id, data: req.data ?? null };
    if (req.traceparent) msg.traceparent = req.traceparent;
    if (req.baggage) msg.baggage = req.baggage;
    if (opts.overrides) msg.overrides = opts.overrides;
    if (opts.trigger_id !== undefined) msg.trigger_id = opts.trigger_id;
    if (opts.group !== undefined) msg.group = opts.group;
    // Between the lookup above and `onAccept` there is no await (backend.ts), so a concurrent
    // repeat of the key finds this message's receipt. Without a key there is nothing to record
    // first, so the message may be batched (durable-queue.ts: one write for many).
    const r = await this.backendFor(cfg).enqueue(
      cfg,
      msg,
      () => {
        if (key) this.receipts.hold(cfg.name, key, msg.id);
      },
      { batch: opts.batch === true && !key },
    );
    if (!r.ok) {
      if (key) this.receipts.release(cfg.name, key, msg.id);
      return { ok: false, error: { code: "enqueue_error", message: r.message } };
    }
    return { ok: true, result: { messageReceiptId: msg.id } };
  }

  /**
   * The first half of an enqueue made atomic with a write of the caller's (state::set and
   * state::update with `enqueue`, state trigger fires): everything that could refuse the message
   * is checked here, before anything is written, and throws a typed error. `commitPrepared` then
   * stores it inside the caller's transaction. Only the durable backend can take part in a
   * transaction of this object (Cloudflare Queues are another system): a queue it does not carry
   * is `invalid_arguments`.
   */
  prepare(req: EnqueueRequest, extras: { trigger_id?: string; group?: string } = {}): PreparedEnqueue {
    const cfg = this.config(req.queue);
    if (!cfg) throw new IIIError("enqueue_error", `queue '${req.queue}' is not configured (see QUEUES in wrangler.toml)`);
    // A state fire (trigger_id) is the engine's own message; a caller's `enqueue` is checked.
    const refused = extras.trigger_id === undefined ? this.refuse(cfg, req) : undefined;
    if (refused) throw IIIError.relayed(refused);
    if (this.backendFor(cfg) !== this.durable) {
      throw new IIIError(
        "invalid_arguments",
        `queue '${cfg.name}' is carried by Cloudflare Queues; a state write can only enqueue on a queue with backend "durable" (written in the same transaction)`,
      );
    }
    const g = fifoGroup(cfg, req.data ?? null, extras.group);
    if (!g.ok) throw new IIIError("enqueue_error", g.message);
    const prior = req.idempotency_key ? this.receipts.find(cfg.name, req.idempotency_key) : undefined;
    const msg: QueueMessage = { id: prior ?? this.core.ports.newId(), function_id: req.function_id, data: req.data ?? null };
    if (req.traceparent) msg.traceparent = req.traceparent;
    if (req.baggage) msg.baggage = req.baggage;
    if (extras.trigger_id !== undefined) msg.trigger_id = extras.trigger_id;
    if (extras.group !== undefined) msg.group = extras.group;
    const p: PreparedEnqueue = { cfg, msg, repeat: prior !== undefined };
    if (req.idempotency_key) p.idempotency_key = req.idempotency_key;
    return p;
  }

  /** Store a prepared message (synchronously: call it inside the transaction of the write it
   * belongs to). A repeated idempotency key stores nothing. Returns the message's receipt id. */
  commitPrepared(p: PreparedEnqueue): string {
    if (p.repeat) return p.msg.id;
    const extras: { trigger_id?: string; group?: string } = {};
    if (p.msg.trigger_id !== undefined) extras.trigger_id = p.msg.trigger_id;
    if (p.msg.group !== undefined) extras.group = p.msg.group;
    const r = this.durable.push(
      p.cfg,
      { queue: p.cfg.name, function_id: p.msg.function_id, data: p.msg.data, traceparent: p.msg.traceparent, baggage: p.msg.baggage },
      p.msg.id,
      {},
      extras,
    );
    // prepare() checked what push() checks: a refusal here is a bug, and aborts the transaction.
    if (!r.ok) throw new IIIError("enqueue_error", r.message);
    if (p.idempotency_key) this.receipts.hold(p.cfg.name, p.idempotency_key, p.msg.id);
    return p.msg.id;
  }

  /** A Cloudflare Queues delivery handed back by the Worker's queue() handler. */
  deliverCloud(body: CloudMessageBody, attempts: number): Promise<DeliveryVerdict> {
    if (!this.cloud) return Promise.resolve({ ack: false, delaySeconds: NO_PRODUCER_RETRY_S });
    return this.cloud.deliver(body, attempts);
  }

  /** Re-enqueue dead letters of `queue` (all, or one) to that queue with their original ids, then
   * drop them from the list. */
  async redrive(queue: string, messageId?: string): Promise<number> {
    let moved = 0;
    const one = async (m: { id: string; function_id: string; data: unknown; traceparent?: string }) => {
      const req: EnqueueRequest = { queue, function_id: m.function_id, data: m.data };
      if (m.traceparent) req.traceparent = m.traceparent;
      const out = await this.enqueueWith(req, { id: m.id, ...stateFireOf(queue, m.data) });
      if (!out.ok) throw new IIIError("enqueue_error", `redrive of ${m.id}: ${out.error.message}`);
      await this.deadLetters.remove(queue, m.id);
      moved++;
    };
    if (messageId !== undefined) {
      const m = await this.deadLetters.get(queue, messageId);
      if (!m) throw new IIIError("not_found", `no dead letter ${messageId} in queue '${queue}'`);
      await one(m);
      return moved;
    }
    while (moved < MAX_REDRIVE) {
      const page = await this.deadLetters.messages(queue, 0, Math.min(REDRIVE_PAGE, MAX_REDRIVE - moved));
      if (page.length === 0) break;
      for (const m of page) await one(m);
    }
    return moved;
  }
}
