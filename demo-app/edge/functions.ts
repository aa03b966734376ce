// Demo edge-hosted functions: a Worker that hosts iii functions without a socket. The engine
// Worker re-exports this class and reaches it through the `EDGE_DEMO` service binding
// (`entrypoint = "DemoEdgeFunctions"`); it loads the manifest on start and on
// `engine::edge::refresh`, and invokes the functions by RPC.
import { FunctionHost, z } from "@iii-edge/sdk-edge/host";
import type { EngineNamespaceLike } from "@iii-edge/sdk-edge/rpc";
import { KeyedObjects, WorkerHost } from "@iii-edge/sdk-edge/worker-edge";
import { counter } from "./counter.ts";

interface DemoEnv {
  ENGINE: EngineNamespaceLike;
}

export class DemoEdgeFunctions extends FunctionHost<DemoEnv> {
  protected register(): void {
    this.function("edge::hello", ({ name }) => ({ greeting: `Hello, ${name}! (from a Worker)` }), {
      description: "Greets by name; hosted in a Worker, invoked by RPC",
      input: z.object({ name: z.string().min(1).max(200) }),
      output: z.object({ greeting: z.string() }),
    });

    // A Worker-hosted function can be bound to triggers too: this one serves GET /hello/:name.
    this.function(
      "edge::hello-http",
      (req: { path_params: { name: string } }) => ({
        status_code: 200,
        body: { greeting: `Hello, ${req.path_params.name}! (from a Worker)` },
      }),
      { description: "Serves GET /hello/:name from a Worker, through an http trigger" },
    );
    this.trigger({
      id: "edge-hello-http",
      trigger_type: "http",
      function_id: "edge::hello-http",
      config: { api_path: "hello/:name", http_method: "GET" },
    });

    // A Worker calling any function through the engine — e.g. one a browser tab registered.
    this.function(
      "edge::call-tab",
      async ({ function_id, payload }, ctx) => ({ function_id, result: await ctx.trigger({ function_id, payload, timeoutMs: 10_000 }) }),
      {
        description: "Calls another function (e.g. a tab's) through the engine and returns its result",
        input: z.object({ function_id: z.string().min(1), payload: z.unknown().optional() }),
      },
    );
  }
}

/** The keyed counter (./counter.ts) hosted in this Worker: the engine reaches it through the
 * `EDGE_KEYED` service binding, and each user's calls run on their own `DemoCounters` object. */
export class DemoKeyedWorkers extends WorkerHost<DemoEnv> {
  protected readonly workers = [counter];
  protected override readonly keyedObjects = "DEMO_COUNTERS";
}

/** One Durable Object per user of the keyed counter (`DEMO_COUNTERS`, wrangler.toml). */
export class DemoCounters extends KeyedObjects<DemoEnv> {
  protected readonly workers = [counter];
}
