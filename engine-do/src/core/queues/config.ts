// Named queue configuration (protocol/README.md §7.5), read from the Worker's `QUEUES` var (JSON,
// see wrangler.toml). Each queue picks its backend: "cloudflare" (Cloudflare Queues: throughput,
// at-least-once, unordered) or "durable" (SQLite + alarm inside the engine object: ordered,
// millisecond latency). Invalid configuration fails loudly at start-up rather than losing messages.
import { formatIssues } from "@iii-edge/protocol";
import { z } from "zod";

/** Which backend carries a queue (the implementations of `QueueBackend`, backend.ts). */
export type QueueBackendName = "cloudflare" | "durable";

export interface QueueConfig {
  name: string;
  backend: QueueBackendName;
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
  /** An owned queue (a worker's own work, e.g. the harness's `turn-step`): function-id globs its
   * messages may name, and only a trusted caller (the engine, an edge host) or the principal whose
   * connection serves the named function may put one there. Absent: anyone who may call a
   * function may queue it here. */
  consumers?: string[];
}

/** Cloudflare Queues drops a message after the consumer's `max_retries` (10 in wrangler.toml), so a
 * cloudflare-backed queue must dead-letter itself before that: its max_retries is capped here. */
export const CLOUDFLARE_MAX_RETRIES = 9;
/** Cloudflare Queues accepts retry delays up to 12 hours. */
export const CLOUDFLARE_MAX_DELAY_S = 43_200;
/** Most queues one object may configure (bounds the pump's per-queue work). */
const MAX_QUEUES = 64;

const queueEntry = z
  .object({
    backend: z.enum(["cloudflare", "durable"]).default("cloudflare"),
    max_retries: z.number().int().min(0).max(100).default(3),
    backoff_ms: z.number().int().min(0).max(3_600_000).default(1000),
    concurrency: z.number().int().min(1).max(1000).default(10),
    type: z.enum(["standard", "fifo"]).default("standard"),
    message_group_field: z.string().min(1).max(256).optional(),
    timeout_ms: z
      .number()
      .int()
      .min(1)
      .max(15 * 60_000)
      .default(30_000),
    consumers: z.array(z.string().min(1).max(256)).min(1).max(64).optional(),
  })
  .superRefine((q, ctx) => {
    if (q.type === "fifo" && !q.message_group_field) ctx.addIssue({ code: "custom", message: "a fifo queue needs message_group_field" });
    if (q.type === "fifo" && q.backend !== "durable")
      ctx.addIssue({ code: "custom", message: 'fifo needs backend "durable" (Cloudflare Queues do not keep order)' });
    if (q.backend === "cloudflare" && q.max_retries > CLOUDFLARE_MAX_RETRIES)
      ctx.addIssue({
        code: "custom",
        message: `cloudflare-backed queues allow at most ${CLOUDFLARE_MAX_RETRIES} retries (the consumer drops messages after 10)`,
      });
  });

const queuesVar = z.record(z.string().min(1).max(256), queueEntry);

/** The queue every engine has even without configuration. Cloudflare-backed when deployed; under
 * `npm start` scripts/start.mjs runs it (and every queue) on the durable backend, since the local
 * Queues simulator keeps nothing on disk. Its settings are a configured queue's defaults. */
export const DEFAULT_QUEUE_CONFIG: QueueConfig = { name: "default", ...queueEntry.parse({}) };

/** Internal durable queues that carry `durable:subscriber` deliveries, one per topic: a queue's
 * defaults, on the durable backend. */
export const DURABLE_TOPIC_PREFIX = "durable:";
export const DURABLE_TOPIC_CONFIG: Omit<QueueConfig, "name"> = queueEntry.parse({ backend: "durable" });

/**
 * Internal durable queues that carry `state` trigger fires (§8.3), one per binding:
 * `state:<trigger id>`. Each fire is a row written in the transaction of the state write that
 * caused it; fifo per record (scope and key), so the fires of one record arrive in write order.
 */
export const STATE_TRIGGER_PREFIX = "state:";
export const STATE_TRIGGER_CONFIG: Omit<QueueConfig, "name"> = {
  backend: "durable",
  type: "fifo",
  // Only the name of the field is shown (engine::queue::topic_stats): the group is the record,
  // set by the state write itself (scope and key).
  message_group_field: "key",
  // 8 retries from 500 ms, doubling: about two minutes, enough to ride out the restart of the
  // worker that owns the binding (its binding and function come back with it).
  max_retries: 8,
  backoff_ms: 500,
  // As iii's default per queue: fires of different records of one binding run side by side.
  concurrency: 10,
  // A fire's deadline, as the engine's default for a call (DEFAULT_INVOKE_TIMEOUT_MS).
  timeout_ms: 30_000,
};

/** Name prefixes of the engine's own queues: a `QUEUES` entry may not use them, and nobody but the
 * engine puts a message on one (a forged state fire would run a binding's function with made-up
 * old and new values). */
export const RESERVED_PREFIXES = [DURABLE_TOPIC_PREFIX, STATE_TRIGGER_PREFIX];

/**
 * Parse the `QUEUES` var. Missing → just `default`. `hasCloudflare` false (no producer binding,
 * e.g. plain Node tests) turns cloudflare-backed queues into durable ones.
 */
export function parseQueueConfigs(text: string | undefined, hasCloudflare: boolean): QueueConfig[] {
  let raw: unknown = {};
  if (text?.trim()) {
    try {
      raw = JSON.parse(text);
    } catch (e) {
      throw new Error(`QUEUES is not valid JSON: ${String(e)}`);
    }
  }
  const r = queuesVar.safeParse(raw);
  if (!r.success) {
    throw new Error(`QUEUES: ${formatIssues(r.error)}`);
  }
  const out = new Map<string, QueueConfig>([["default", { ...DEFAULT_QUEUE_CONFIG }]]);
  for (const [name, q] of Object.entries(r.data)) {
    const reserved = RESERVED_PREFIXES.find((p) => name.startsWith(p));
    if (reserved)
      throw new Error(
        `QUEUES: '${name}': names starting with '${reserved}' are reserved for the engine's own queues (${reserved === STATE_TRIGGER_PREFIX ? "state trigger fires" : "durable topics"})`,
      );
    const c: QueueConfig = {
      name,
      backend: q.backend,
      max_retries: q.max_retries,
      backoff_ms: q.backoff_ms,
      concurrency: q.concurrency,
      type: q.type,
      timeout_ms: q.timeout_ms,
    };
    if (q.message_group_field) c.message_group_field = q.message_group_field;
    if (q.consumers) c.consumers = q.consumers;
    out.set(name, c);
  }
  if (out.size > MAX_QUEUES) throw new Error(`QUEUES: at most ${MAX_QUEUES} queues`);
  if (!hasCloudflare) for (const c of out.values()) c.backend = "durable";
  return [...out.values()];
}

/** Exponential backoff: backoff_ms, 2×, 4×, … capped at an hour so a retry always comes back. */
export const MAX_BACKOFF_MS = 3_600_000;
export function backoffDelay(cfg: Pick<QueueConfig, "backoff_ms">, attempt: number): number {
  return Math.min(MAX_BACKOFF_MS, cfg.backoff_ms * 2 ** Math.max(0, attempt - 1));
}
