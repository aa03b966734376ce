// The Engine object's RPC surface, shared with sdk-edge's DO client.
import type { Grant, TriggerAction } from "@iii-edge/protocol";

export interface RpcTriggerRequest {
  function_id: string;
  payload?: unknown;
  action?: TriggerAction;
  metadata?: unknown;
  traceparent?: string;
  baggage?: string;
  timeout_ms?: number;
  /** The caller's permissions, when it is not trusted code of this deployment (the front door, a
   * cross-namespace call from a worker). Absent: an edge host or the engine itself (trusted). */
  grant?: Grant;
  /** Who called, as the engine stamps it into `_caller_worker_id` (never taken from the payload). */
  caller?: string;
}
