// Workers (./worker.ts) as a Node process: each module's `register(iii, config)` runs against one
// WebSocket connection to the engine. `npm run worker -- <name>` uses this; so do the suites that
// run a harness worker alone.
import { AsyncLocalStorage } from "node:async_hooks";
import path from "node:path";
import { IIIError, KEYED_METADATA_KEY, keyFieldOf } from "@iii-edge/protocol";
import { registerWorker, type NodeWorkerOptions } from "./node.ts";
import { openChannelWriter, readChannel } from "./channels.ts";
import type { TraceFields } from "./client/trace.ts";
import type { EdgeClient, InvocationContext, TriggerRequest } from "./client/types.ts";
import { createTracer, withCurrentTrace, type Tracer } from "./telemetry.ts";
import {
  markedOptions,
  type Channels,
  type WorkerFunctionOptions,
  type WorkerHandler,
  type WorkerModule,
  type WorkerSurface,
} from "./worker.ts";
import { NodeKeyedInstances } from "./keyed-node.ts";

export type { WorkerModule, WorkerSurface } from "./worker.ts";
export { MAX_OPEN_INSTANCES, NodeKeyedInstances } from "./keyed-node.ts";

/** The engine namespace a worker URL dials: `/ns/<ns>`, else the default one. */
function namespaceOf(url: string): string {
  const m = /\/ns\/([^/?#]+)/.exec(new URL(url).pathname);
  return m ? decodeURIComponent(m[1]) : "default";
}

export interface NodeWorkersOptions extends NodeWorkerOptions {
  /** Settings the modules read (default: `process.env`). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Where keyed functions' instance databases live (default: `$III_KEYED_DIR`, else
   * `.wrangler/state/keyed` beside `npm start`'s own state). */
  keyedDir?: string;
  /** Config per module name, used instead of the module's `configFrom(env)`. */
  config?: Record<string, unknown>;
}

export interface RunningWorkers {
  readonly client: EdgeClient;
  readonly surface: WorkerSurface;
  /** The keyed instances of this process, once a module declared a keyed function. */
  readonly keyed?: NodeKeyedInstances;
  shutdown(): Promise<void>;
}

/** The current trace context of this process's tracers: the invocation being handled, or the span
 * made current inside it. */
const activeTrace = new AsyncLocalStorage<TraceFields>();

/** A tracer whose frames go on `client`'s control socket, flushed shortly after spans end. */
export function nodeTracer(client: EdgeClient, serviceName: string): Tracer {
  return createTracer({
    serviceName,
    store: { run: (fields, fn) => activeTrace.run(fields, fn), get: () => activeTrace.getStore() },
    transport: (frame) => client.sendTelemetry?.(frame) ?? true,
    flush: "timer",
    resource: { "process.pid": process.pid, "process.runtime.name": "nodejs" },
  });
}

/** The surface over one connected client. `url` is the engine address the client dialled (its
 * channel sockets are derived from it, as iii's SDKs derive them). `tracer`: where its spans go
 * (default: a tracer on `client` named after the client's worker). */
export function nodeSurface(
  client: EdgeClient,
  url: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
  tracer: Tracer = nodeTracer(client, "iii-edge-worker"),
  keyed?: () => NodeKeyedInstances,
): WorkerSurface {
  const triggerIds = new Map<string, number>();
  // Calls carry the current span (or the invocation's context) as their parent.
  const traced = <R extends TriggerRequest<unknown>>(request: R): R => withCurrentTrace(tracer, request);
  const channels: Channels = {
    create: (options) => client.trigger(traced({ function_id: "engine::channels::create", payload: options ?? {} })),
    openWriter: (ref) => openChannelWriter(url, ref),
    read: (ref) => readChannel(url, ref),
  };
  let drops = 0;
  let up = client.getConnectionState() === "connected";
  client.addConnectionStateListener((state) => {
    if (up && state !== "connected") drops++;
    up = state === "connected";
  });
  return {
    runtime: "node",
    env,
    channels,
    tracer,
    connectionEpoch: () => drops,
    registerFunction(id: string, handler: WorkerHandler, options?: WorkerFunctionOptions) {
      let run: WorkerHandler = handler;
      let registered: WorkerFunctionOptions | undefined = options;
      if (options?.key !== undefined) {
        if (!keyed) throw new IIIError("invalid_arguments", `${id} is keyed: run it with runWorkers, which hosts keyed instances`);
        const { key, ...rest } = options;
        registered = { ...rest, metadata: { ...rest.metadata, [KEYED_METADATA_KEY]: key } };
        const field = keyFieldOf(registered.metadata) as string;
        run = keyed().declare(id, field, handler, (request) => client.trigger(traced(request)));
      }
      client.registerFunction(
        id,
        (data: unknown, _metadata: unknown, ctx: InvocationContext) => {
          const fields: TraceFields = {};
          if (ctx.traceparent) fields.traceparent = ctx.traceparent;
          if (ctx.baggage) fields.baggage = ctx.baggage;
          const inner: InvocationContext = { ...ctx, trigger: (request) => ctx.trigger(traced(request)) };
          return activeTrace.run(fields, () => run(data, inner));
        },
        registered,
      );
    },
    registerTrigger(t) {
      const base = `${t.function_id}#${t.type}`;
      const n = triggerIds.get(base) ?? 0;
      triggerIds.set(base, n + 1);
      client.registerTrigger({
        type: t.type,
        function_id: t.function_id,
        config: t.config ?? null,
        metadata: t.metadata,
        id: t.id ?? `${base}#${n}`,
      });
    },
    trigger: (request) => client.trigger(traced(request)),
  };
}

/** Connect and register `modules` on one connection. */
export function runWorkers(url: string, modules: readonly WorkerModule<unknown>[], options: NodeWorkersOptions = {}): RunningWorkers {
  const env = options.env ?? process.env;
  const client = registerWorker(url, { workerName: options.workerName ?? modules.map((m) => m.name).join("+"), ...options });
  const tracers: Tracer[] = [];
  let keyed: NodeKeyedInstances | undefined;
  // Made on the first keyed declaration: a worker without keyed functions touches no disk.
  const keyedInstances = () =>
    (keyed ??= new NodeKeyedInstances({
      dir: options.keyedDir ?? env.III_KEYED_DIR ?? path.join(env.III_STATE_DIR || ".wrangler/state", "keyed"),
      namespace: namespaceOf(url),
    }));
  // One tracer per module, so each one's spans carry its name as their service.
  const surfaceOf = (name: string) => {
    const tracer = nodeTracer(client, name);
    tracers.push(tracer);
    return nodeSurface(client, url, env, tracer, keyedInstances);
  };
  const surface = surfaceOf(options.workerName ?? modules.map((m) => m.name).join("+"));
  for (const m of modules) {
    const config = options.config?.[m.name] ?? m.configFrom?.(env) ?? {};
    const own = surfaceOf(m.name);
    // A kernel module's functions carry the kernel mark (worker.ts markedOptions), as in the Worker.
    m.register(
      { ...own, registerFunction: (id, handler, fnOptions) => own.registerFunction(id, handler, markedOptions(m, id, fnOptions)) },
      config,
    );
  }
  // Alarms set before a restart fire in this process.
  keyed?.resume();
  return {
    client,
    surface,
    get keyed() {
      return keyed;
    },
    shutdown: async () => {
      // What the modules' tracers still hold goes out before the socket closes.
      await Promise.allSettled(tracers.map((t) => t.flush()));
      await client.shutdown();
      keyed?.close();
    },
  };
}
