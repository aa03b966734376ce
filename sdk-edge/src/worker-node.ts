// Workers (./worker.ts) as a Node process: each module's `register(iii, config)` runs against one
// WebSocket connection to the engine. `npm run worker -- <name>` uses this; so do the suites that
// run a harness worker alone.
import { registerWorker, type NodeWorkerOptions } from "./node.ts";
import { openChannelWriter, readChannel } from "./channels.ts";
import type { EdgeClient } from "./client/types.ts";
import type { Channels, WorkerModule, WorkerSurface } from "./worker.ts";

export type { WorkerModule, WorkerSurface } from "./worker.ts";

export interface NodeWorkersOptions extends NodeWorkerOptions {
  /** Settings the modules read (default: `process.env`). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Config per module name, used instead of the module's `configFrom(env)`. */
  config?: Record<string, unknown>;
}

export interface RunningWorkers {
  readonly client: EdgeClient;
  readonly surface: WorkerSurface;
  shutdown(): Promise<void>;
}

/** The surface over one connected client. `url` is the engine address the client dialled (its
 * channel sockets are derived from it, as iii's SDKs derive them). */
export function nodeSurface(client: EdgeClient, url: string, env: Readonly<Record<string, string | undefined>> = process.env): WorkerSurface {
  const triggerIds = new Map<string, number>();
  const channels: Channels = {
    create: (options) => client.trigger({ function_id: "engine::channels::create", payload: options ?? {} }),
    openWriter: (ref) => openChannelWriter(url, ref),
    read: (ref) => readChannel(url, ref),
  };
  return {
    runtime: "node",
    env,
    channels,
    registerFunction(id, handler, options) {
      client.registerFunction(id, (data: unknown, _metadata: unknown, ctx) => handler(data, ctx), options);
    },
    registerTrigger(t) {
      const base = `${t.function_id}#${t.type}`;
      const n = triggerIds.get(base) ?? 0;
      triggerIds.set(base, n + 1);
      client.registerTrigger({ type: t.type, function_id: t.function_id, config: t.config ?? null, metadata: t.metadata, id: t.id ?? `${base}#${n}` });
    },
    trigger: (request) => client.trigger(request),
  };
}

/** Connect and register `modules` on one connection. */
export function runWorkers(url: string, modules: readonly WorkerModule<unknown>[], options: NodeWorkersOptions = {}): RunningWorkers {
  const env = options.env ?? process.env;
  const client = registerWorker(url, { workerName: options.workerName ?? modules.map((m) => m.name).join("+"), ...options });
  const surface = nodeSurface(client, url, env);
  for (const m of modules) {
    const config = options.config?.[m.name] ?? m.configFrom?.(env) ?? {};
    m.register(surface, config);
  }
  return { client, surface, shutdown: () => client.shutdown() };
}
