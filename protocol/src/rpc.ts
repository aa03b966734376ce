// The engine Durable Object's RPC `trigger` (no socket): what a Worker, a Durable Object, the front
// door or another namespace's engine sends, and the outcome it gets back. The engine parses every
// request with `rpcTriggerRequest`; sdk-edge's `connectEngine` is typed by `EngineRpc`.
import { z } from "zod";
import { grantSchema } from "./auth.ts";
import { invokeFunction, triggerAction, type ErrorBody } from "./frames.ts";
import { MAX_INVOKE_TIMEOUT_MS } from "./limits.ts";

export const rpcTriggerRequest = z.object({
  function_id: z.string().min(1),
  payload: z.unknown().optional(),
  action: triggerAction.optional(),
  metadata: z.unknown().optional(),
  traceparent: z.string().optional(),
  baggage: z.string().optional(),
  /** The engine-side deadline, bounded as an `invokefunction`'s. */
  timeout_ms: invokeFunction.shape.timeout_ms,
  /** The caller's permissions, when it is not trusted code of this deployment (the front door, a
   * cross-namespace call from a worker). Absent: an edge host or the engine itself (trusted). */
  grant: grantSchema.optional(),
  /** Who called (`<namespace>/<worker id>`), stamped into `_caller_worker_id` by the target (never
   * taken from the payload). */
  caller: z.string().max(256).optional(),
});
export type RpcTriggerRequest = z.infer<typeof rpcTriggerRequest>;

/** How a call ended: a failed call is an outcome, never a throw. */
export type CallOutcome = { ok: true; result?: unknown } | { ok: false; error: ErrorBody };

/** The engine Durable Object's RPC surface that callers use (its stub satisfies it). A property,
 * not a method, so its parameter is checked strictly: an engine wanting more than this is refused. */
export interface EngineRpc {
  trigger: (req: RpcTriggerRequest) => Promise<CallOutcome>;
  /** Telemetry from Worker-hosted code (no socket): one `/otel` frame — a 4-byte ASCII prefix
   * (`OTLP` traces, `LOGS`, `MTRC`) then OTLP/JSON (`@iii-edge/protocol/telemetry`). Stored and
   * exported like a socket worker's; a malformed frame is dropped and counted, never thrown. */
  telemetry: (frame: string | ArrayBuffer) => Promise<void>;
}

// ---------------------------------------------------------------- connection shards
// With CONNECTION_SHARDS > 1 a namespace's worker sockets are held by connection-shard objects
// (`<ns>#shard-<k>`, engine-do/src/shards/) and its catalog object (`<ns>`) sees each socket as a
// connection whose frames arrive, and leave, in batches by DO RPC. Both ends are objects of this
// deployment; each parses what the other sends (style §2).

/** The longest worker id / shard name either end accepts (ids are UUIDs, names `<ns>#shard-<k>`). */
const SHARD_ID_MAX = 128;
/** Items one batch may carry: a shard sends what accumulated while its previous batch was in flight. */
export const MAX_SHARD_BATCH_ITEMS = 4_096;

/** A shard asks the catalog to admit a new worker socket (connection bounds, identity). */
export const shardAttachRequest = z.object({
  shard: z.string().min(1).max(SHARD_ID_MAX),
  worker_id: z.string().min(1).max(SHARD_ID_MAX),
  grant: grantSchema,
  ip: z.string().max(SHARD_ID_MAX).optional(),
});
export type ShardAttachRequest = z.infer<typeof shardAttachRequest>;
/** Admitted: the frames the catalog sent the new connection (its `workerregistered`); refused: why. */
export type ShardAttachOutcome = { ok: true; frames: string[] } | { ok: false; error: ErrorBody };

/** Shard → catalog: a frame a worker sent (text or binary), or the news that its socket closed. */
export const shardUpItem = z.union([
  z.object({ w: z.string().min(1).max(SHARD_ID_MAX), f: z.union([z.string(), z.instanceof(ArrayBuffer)]) }),
  z.object({ w: z.string().min(1).max(SHARD_ID_MAX), closed: z.literal(true) }),
]);
export const shardUpBatch = z.object({
  shard: z.string().min(1).max(SHARD_ID_MAX),
  items: z.array(shardUpItem).max(MAX_SHARD_BATCH_ITEMS),
});
export type ShardUpBatch = z.infer<typeof shardUpBatch>;

/** Catalog → shard: a frame (already JSON) for one of its sockets, or an order to close it. */
export const shardDownItem = z.union([
  z.object({ w: z.string().min(1).max(SHARD_ID_MAX), f: z.string() }),
  z.object({ w: z.string().min(1).max(SHARD_ID_MAX), close: z.object({ code: z.number().int(), reason: z.string().max(123) }) }),
]);
export const shardDownBatch = z.object({ items: z.array(shardDownItem).max(MAX_SHARD_BATCH_ITEMS) });
export type ShardDownBatch = z.infer<typeof shardDownBatch>;

/** What either end answers a batch with: the worker ids it does not know (the other end drops them). */
export interface ShardBatchOutcome {
  gone: string[];
}

/** Where a function's worker is, as the catalog answers a shard's route lookup (null: not a
 * function of a sharded worker — a built-in, an edge or HTTP function, or unknown — so the call goes
 * through the catalog). */
export type ShardRoute = { shard: string; worker_id: string } | null;

/** Shard → shard: run `function_id` on worker `worker_id` of the receiving shard (a direct call,
 * after the caller's shard checked the caller's grant; `data` already carries `_caller_worker_id`). */
export const shardInvokeRequest = z.object({
  worker_id: z.string().min(1).max(SHARD_ID_MAX),
  function_id: z.string().min(1),
  data: z.unknown(),
  metadata: z.unknown().optional(),
  traceparent: z.string().optional(),
  baggage: z.string().optional(),
  timeout_ms: z.number().int().positive().max(MAX_INVOKE_TIMEOUT_MS),
});
export type ShardInvokeRequest = z.infer<typeof shardInvokeRequest>;
/** How a direct call ended; `stale`: the worker no longer holds the function here (the caller's
 * shard forgets the route and sends the call through the catalog instead). */
export type ShardInvokeOutcome = CallOutcome | { stale: true };
