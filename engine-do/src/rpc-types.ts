// The Engine object's RPC surface, shared with sdk-edge's DO client.
import type { TriggerAction } from "../../protocol/src/index.ts";

export interface RpcTriggerRequest {
  function_id: string;
  payload?: unknown;
  action?: TriggerAction;
  metadata?: unknown;
  traceparent?: string;
  baggage?: string;
  timeout_ms?: number;
}
