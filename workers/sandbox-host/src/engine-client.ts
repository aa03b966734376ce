// The one place the sandbox host meets an engine client. Everything else codes against
// `EngineClient`, the surface of sdk-edge's Node client (sdk-edge/src/node.ts).
import type { JsonSchema } from "./schema.ts";

export interface FunctionRegistration {
  id: string;
  description?: string;
  request_format?: JsonSchema;
  response_format?: JsonSchema;
  metadata?: Record<string, unknown>;
}

export type FunctionHandler = (data: unknown, metadata?: unknown) => Promise<unknown>;

export interface TriggerRequest {
  function_id: string;
  payload: unknown;
  action?: { type: "void" } | { type: "enqueue"; queue: string };
  timeoutMs?: number;
}

export interface EngineClient {
  registerFunction(reg: FunctionRegistration, handler: FunctionHandler): unknown;
  trigger(req: TriggerRequest): Promise<unknown>;
  addConnectionStateListener?(listener: (state: string) => void): unknown;
  shutdown(): Promise<void>;
}

export interface WorkerOptions {
  workerName?: string;
  /** Sent in `engine::workers::register`; the backend is reported here. */
  metadata?: Record<string, unknown>;
  /** Extra upgrade headers: `Authorization: Bearer <ENGINE_TOKEN>` on an engine that wants tokens. */
  headers?: Record<string, string>;
}

// sdk-edge's Node client (reconnect, reattach, registration replay, worker metadata).
export { registerWorker } from "@iii-edge/sdk-edge/node";
