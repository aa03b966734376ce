// The engine Durable Object's RPC `trigger` (no socket): what a Worker, a Durable Object, the front
// door or another namespace's engine sends, and the outcome it gets back. The engine parses every
// request with `rpcTriggerRequest`; sdk-edge's `connectEngine` is typed by `EngineRpc`.
import { z } from "zod";
import { grantSchema } from "./auth.ts";
import { invokeFunction, triggerAction, type ErrorBody } from "./frames.ts";

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
}
