// Calling the engine from any Worker or Durable Object through the engine's Durable Object
// binding (RPC, no socket). Same `trigger` API and actions as the WebSocket clients.
import { IIIError, DEFAULT_INVOKE_TIMEOUT_MS, type ErrorBody } from "@iii-edge/protocol";
import { outgoingTrace, type TraceFields } from "./client/trace.ts";
import type { TriggerAction, TriggerRequest } from "./client/types.ts";

/** The engine Durable Object's RPC `trigger` request (fixed with the engine). */
export interface EngineTriggerRequest {
  function_id: string;
  payload?: unknown;
  action?: TriggerAction;
  metadata?: unknown;
  traceparent?: string;
  baggage?: string;
  timeout_ms?: number;
}
export type EngineTriggerResponse = { ok: true; result?: unknown } | { ok: false; error: ErrorBody };

/** The RPC surface of the engine's Durable Object that this client uses. */
export interface EngineRpc {
  trigger(req: EngineTriggerRequest): Promise<EngineTriggerResponse>;
}

/** `env.ENGINE` (a DurableObjectNamespace of the engine class); typed structurally so callers
 * need not import the engine. */
export interface EngineNamespaceLike {
  getByName(name: string): object;
}

export interface EngineClient {
  /** Sync → the result; void → undefined; enqueue → `{ messageReceiptId }`. Rejects with
   * `IIIError` (`.code` is the wire code). */
  trigger<TInput = unknown, TOutput = unknown>(request: TriggerRequest<TInput>): Promise<TOutput>;
  /** A client whose calls carry this trace context unless a call sets its own. */
  withTrace(fields: TraceFields): EngineClient;
}

export const DEFAULT_NAMESPACE = "default";

/** `connectEngine(env.ENGINE)` → `{ trigger }` against namespace `default` (or `namespace`). */
export function connectEngine(engine: EngineNamespaceLike, options: { namespace?: string; trace?: TraceFields } = {}): EngineClient {
  // The engine's stub exposes `trigger` over RPC; its generated type is not visible from here.
  const stub = engine.getByName(options.namespace ?? DEFAULT_NAMESPACE) as EngineRpc;
  return rpcClient(stub, options.trace);
}

export function rpcClient(stub: EngineRpc, inherited?: TraceFields): EngineClient {
  return {
    async trigger<TInput, TOutput>(request: TriggerRequest<TInput>): Promise<TOutput> {
      if (!request || typeof request.function_id !== "string" || request.function_id === "") {
        throw new IIIError("INVALID_ARGUMENTS", "trigger needs a function_id");
      }
      const trace = outgoingTrace({ traceparent: request.traceparent, baggage: request.baggage }, inherited);
      const req: EngineTriggerRequest = { function_id: request.function_id, payload: request.payload ?? null, ...trace };
      if (request.action) req.action = request.action;
      if (request.metadata !== undefined) req.metadata = request.metadata;
      if (!request.action) req.timeout_ms = request.timeoutMs ?? DEFAULT_INVOKE_TIMEOUT_MS;
      const res = await stub.trigger(req);
      if (!res.ok) {
        const err = new IIIError(res.error.code, res.error.message);
        if (res.error.stacktrace) Object.assign(err, { stacktrace: res.error.stacktrace });
        throw err;
      }
      return res.result as TOutput;
    },
    withTrace: (fields) => rpcClient(stub, fields),
  };
}
