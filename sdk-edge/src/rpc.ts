// Calling the engine from any Worker or Durable Object through the engine's Durable Object
// binding (RPC, no socket). Same `trigger` API and actions as the WebSocket clients.
import { IIIError, DEFAULT_INVOKE_TIMEOUT_MS, type EngineRpc, type RpcTriggerRequest } from "@iii-edge/protocol";
import { outgoingTrace, type TraceFields } from "./client/trace.ts";
import type { TriggerRequest } from "./client/types.ts";

/** The engine's RPC contract (protocol's rpc.ts), for code that types its own stubs. */
export type { CallOutcome, EngineRpc, RpcTriggerRequest } from "@iii-edge/protocol";

/** `env.ENGINE` (a DurableObjectNamespace of the engine class): its stubs serve protocol's
 * `EngineRpc`, so callers need not import the engine. */
export interface EngineNamespaceLike {
  getByName(name: string): EngineRpc;
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
  return rpcClient(engine.getByName(options.namespace ?? DEFAULT_NAMESPACE), options.trace);
}

/** A client over one stub: it only calls `trigger` (telemetry goes through ./worker-edge.ts). */
export function rpcClient(stub: Pick<EngineRpc, "trigger">, inherited?: TraceFields): EngineClient {
  return {
    async trigger<TInput, TOutput>(request: TriggerRequest<TInput>): Promise<TOutput> {
      if (!request || typeof request.function_id !== "string" || request.function_id === "") {
        throw new IIIError("invalid_arguments", "trigger needs a function_id");
      }
      const trace = outgoingTrace({ traceparent: request.traceparent, baggage: request.baggage }, inherited);
      const req: RpcTriggerRequest = { function_id: request.function_id, payload: request.payload ?? null, ...trace };
      if (request.action) req.action = request.action;
      if (request.metadata !== undefined) req.metadata = request.metadata;
      if (!request.action) req.timeout_ms = request.timeoutMs ?? DEFAULT_INVOKE_TIMEOUT_MS;
      const res = await stub.trigger(req);
      if (!res.ok) {
        const err = IIIError.relayed(res.error);
        if (res.error.stacktrace) Object.assign(err, { stacktrace: res.error.stacktrace });
        throw err;
      }
      return res.result as TOutput;
    },
    withTrace: (fields) => rpcClient(stub, fields),
  };
}
