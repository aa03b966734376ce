// The plain part of edge-hosted functions: what a FunctionHost declares, its manifest, and one
// invocation (the shapes are protocol's edge-host.ts). No `cloudflare:*` import, so it is testable in Node; `host.ts` is the thin
// WorkerEntrypoint shell around it.
import type { EdgeInvokeRequest, EdgeInvokeResponse, EdgeManifest, ManifestFunction, ManifestTrigger } from "@iii-edge/protocol";
import { functionEntry, runHandler, type Schema } from "./client/core.ts";
import { syncAmbientTrace, type AmbientTrace, type TraceFields } from "./client/trace.ts";
import type { FunctionOptions, InvocationContext, OutputOf, TriggerRequest } from "./client/types.ts";
import type { z } from "zod";

/** What an edge-hosted handler gets: the invocation, the Worker's env and an engine client
 * bound to the caller's trace context. */
export interface HostContext<Env> extends InvocationContext {
  env: Env;
}

// biome-ignore lint/suspicious/noExplicitAny: a handler typed with its own input must be assignable here
export type HostHandler<Env, I = any, O = any> = (data: I, ctx: HostContext<Env>) => O | Promise<O>;

interface HostFunction<Env> {
  frame: ManifestFunction;
  handler: HostHandler<Env>;
  input?: Schema;
  output?: Schema;
}

export class HostRegistry<Env> {
  readonly functions = new Map<string, HostFunction<Env>>();
  readonly triggers: ManifestTrigger[] = [];
  private readonly ambient: AmbientTrace = syncAmbientTrace();

  /** Declare a function; with `input` (a zod schema) its payload is validated and published. */
  function<I extends Schema, O extends Schema | undefined = undefined>(
    id: string,
    handler: (data: z.output<I>, ctx: HostContext<Env>) => OutputOf<O> | Promise<OutputOf<O>>,
    options: FunctionOptions & { input: I; output?: O },
  ): void;
  function(id: string, handler: HostHandler<Env>, options?: FunctionOptions): void;
  /** Schemas that may be absent (worker modules' `registerFunction` options, ./worker.ts). */
  function(id: string, handler: HostHandler<Env>, options?: FunctionOptions & { input?: Schema; output?: Schema }): void;
  function(id: string, handler: HostHandler<Env>, options?: FunctionOptions & { input?: Schema; output?: Schema }): void {
    const entry = functionEntry(id, () => undefined, options);
    if (this.functions.has(id)) throw new Error(`function ${id} is declared twice`);
    const { type: _t, invocation: _i, ...frame } = entry.frame;
    this.functions.set(id, { frame, handler, input: entry.input, output: entry.output });
  }

  /** Bind a trigger to a function. The id is derived from the declaration, so reloading the
   * manifest is idempotent; pass `id` to choose it. */
  trigger(t: { trigger_type: string; function_id: string; config?: unknown; metadata?: unknown; id?: string }): void {
    const n = this.triggers.filter((x) => x.trigger_type === t.trigger_type && x.function_id === t.function_id).length;
    const trig: ManifestTrigger = {
      id: t.id ?? `${t.function_id}#${t.trigger_type}#${n}`,
      trigger_type: t.trigger_type,
      function_id: t.function_id,
      config: t.config ?? null,
    };
    if (t.metadata !== undefined) trig.metadata = t.metadata;
    this.triggers.push(trig);
  }

  manifest(): EdgeManifest {
    return { functions: [...this.functions.values()].map((f) => f.frame), triggers: [...this.triggers] };
  }

  async invoke(
    req: EdgeInvokeRequest,
    env: Env,
    call: (request: TriggerRequest<unknown>, trace: TraceFields) => Promise<unknown>,
  ): Promise<EdgeInvokeResponse> {
    const fn = this.functions.get(req.function_id);
    if (!fn) return { error: { code: "function_not_found", message: `Function ${req.function_id} not found` } };
    const trace: TraceFields = {};
    if (req.traceparent) trace.traceparent = req.traceparent;
    if (req.baggage) trace.baggage = req.baggage;
    const handler = fn.handler;
    const out = await runHandler(
      {
        input: fn.input,
        output: fn.output,
        handler: (data, _metadata, ctx) => handler(data, { ...ctx, env }),
      },
      { function_id: req.function_id, invocation_id: req.invocation_id, data: req.data, metadata: req.metadata },
      trace,
      this.ambient,
      call,
    );
    // RPC results are structured-cloned: an undefined result is simply absent.
    if ("result" in out && out.result === undefined) return {};
    return out;
  }
}
