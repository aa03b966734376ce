// Edge-hosted functions: a Worker declares functions and triggers once, is reached by a service
// binding, and the engine invokes it by RPC — no socket held. The engine calls `iiiManifest()`
// on start and on `engine::edge::refresh`, and `iiiInvoke()` for each call.
//
//   export class MyFunctions extends FunctionHost<Env> {
//     protected register() {
//       this.function("my::hello", async ({ name }) => ({ greeting: `Hello ${name}` }),
//         { description: "greets", input: z.object({ name: z.string() }) });
//     }
//   }
import { WorkerEntrypoint } from "cloudflare:workers";
import type { z } from "zod";
import type { Schema } from "./client/core.ts";
import type { FunctionOptions, OutputOf } from "./client/types.ts";
import { type EdgeHost, type EdgeInvokeRequest, type EdgeInvokeResponse, type EdgeManifest, KEYED_METADATA_KEY } from "@iii-edge/protocol";
import { HostRegistry, type HostContext, type HostHandler } from "./host-registry.ts";
import { connectEngine, type EngineNamespaceLike } from "./rpc.ts";

export type { HostContext, HostHandler } from "./host-registry.ts";
export type { EdgeInvokeRequest, EdgeInvokeResponse, EdgeManifest, ManifestFunction, ManifestTrigger } from "@iii-edge/protocol";
export { connectEngine } from "./rpc.ts";
/** sdk-edge's zod (use it for schemas: one copy, matching types). */
export { z } from "zod";

/** Registries already built, per Worker env and host class. workerd makes a new entrypoint
 * instance for every call that reaches it over the service binding, so without this `register()`
 * (and the JSON Schema of every zod-typed function) would run again on each invocation. The env
 * object is the isolate's; a registry is only kept once `register()` finished. */
const registries = new WeakMap<object, WeakMap<object, HostRegistry<unknown>>>();

export abstract class FunctionHost<Env = unknown> extends WorkerEntrypoint<Env> implements EdgeHost {
  /** Name of the env binding of the engine's Durable Object namespace, for calls back. */
  protected engineBinding = "ENGINE";
  // ES-private so that nothing but iiiManifest/iiiInvoke is reachable over RPC.
  #registry: HostRegistry<Env> | undefined;
  /** The registry `register()` is filling, while it runs. */
  #building: HostRegistry<Env> | undefined;

  /** Declare functions (`this.function`) and triggers (`this.trigger`). Runs once per isolate
   * (per Worker env), not per call: keep it declarative, and let handlers read `ctx.env` rather
   * than `this` (the instance that ran `register()` belongs to an earlier call). If it throws,
   * nothing is kept and the next manifest or call runs it again. */
  protected abstract register(): void;

  /** Declare a zod-typed function: input validated (`invalid_input`), JSON Schema published. */
  protected function<I extends Schema, O extends Schema | undefined = undefined>(
    id: string,
    handler: (data: z.output<I>, ctx: HostContext<Env>) => OutputOf<O> | Promise<OutputOf<O>>,
    options: FunctionOptions & { input: I; output?: O },
  ): void;
  protected function(id: string, handler: HostHandler<Env>, options?: FunctionOptions): void;
  protected function(id: string, handler: HostHandler<Env>, options?: FunctionOptions & { input?: Schema; output?: Schema }): void;
  protected function(id: string, handler: HostHandler<Env>, options?: FunctionOptions & { input?: Schema; output?: Schema }): void {
    this.#declarations().function(id, handler, options);
  }

  /** Bind a trigger (id derived from the declaration unless given). */
  protected trigger(t: { trigger_type: string; function_id: string; config?: unknown; metadata?: unknown; id?: string }): void {
    this.#declarations().trigger(t);
  }

  #declarations(): HostRegistry<Env> {
    if (!this.#building) throw new Error("FunctionHost: declare functions and triggers inside register()");
    return this.#building;
  }

  #loaded(): HostRegistry<Env> {
    if (this.#registry) return this.#registry;
    const env = this.env as unknown;
    const byClass = typeof env === "object" && env !== null ? registries.get(env) : undefined;
    // Env-typed when stored (below): the class and the env are the keys it was built for.
    const cached = byClass?.get(this.constructor) as HostRegistry<Env> | undefined;
    if (cached) return (this.#registry = cached);
    const registry = new HostRegistry<Env>();
    this.#building = registry;
    try {
      this.register();
    } finally {
      this.#building = undefined;
    }
    if (typeof env === "object" && env !== null) {
      const map = byClass ?? new WeakMap<object, HostRegistry<unknown>>();
      map.set(this.constructor, registry as HostRegistry<unknown>);
      if (!byClass) registries.set(env, map);
    }
    return (this.#registry = registry);
  }

  /** Run a call to a keyed function (docs/keyed-workers.md) on its instance. A plain host has no
   * instances: `WorkerHost` with `keyedObjects` does. */
  protected async invokeKeyed(req: EdgeInvokeRequest): Promise<EdgeInvokeResponse> {
    return {
      error: {
        code: "function_not_invokable",
        message: `${req.function_id} is keyed: it runs on a WorkerHost whose keyedObjects names a KeyedObjects binding`,
      },
    };
  }

  async iiiManifest(): Promise<EdgeManifest> {
    return this.#loaded().manifest();
  }

  async iiiInvoke(req: EdgeInvokeRequest): Promise<EdgeInvokeResponse> {
    const registry = this.#loaded();
    const declared = registry.functions.get(req.function_id);
    // A keyed function runs on the instance its key names, not in this entrypoint.
    if (declared && isKeyed(declared.frame.metadata)) return this.invokeKeyed(req);
    const env = this.env;
    const binding = (env as Record<string, unknown> | undefined)?.[this.engineBinding] as EngineNamespaceLike | undefined;
    const run = registry.invoke(req, env, async (request, trace) => {
      if (!binding) throw new Error(`env.${this.engineBinding} is not bound: this host cannot call the engine`);
      return connectEngine(binding, { namespace: req.namespace, trace }).trigger(request);
    });
    if (!req.void) return run;
    // The engine does not wait: answered now, the function runs on past the answer.
    this.ctx.waitUntil(run);
    return {};
  }
}

/** Does this registration metadata declare a keyed function? (Its field was checked when declared.) */
function isKeyed(metadata: unknown): boolean {
  return typeof metadata === "object" && metadata !== null && KEYED_METADATA_KEY in metadata;
}
