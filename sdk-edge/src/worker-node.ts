// Workers (./worker.ts) as a Node process: each module's `register(iii, config)` runs against one
// WebSocket connection to the engine. `npm run worker -- <name>` uses this; so do the suites that
// run a harness worker alone.
import { AsyncLocalStorage } from "node:async_hooks";
import { registerWorker, type NodeWorkerOptions } from "./node.ts";
import { openChannelWriter, readChannel } from "./channels.ts";
import type { TraceFields } from "./client/trace.ts";
import type { EdgeClient, InvocationContext, TriggerRequest } from "./client/types.ts";
import { createTracer, withCurrentTrace, type Tracer } from "./telemetry.ts";
import { markedOptions, type Channels, type WorkerModule, type WorkerSurface } from "./worker.ts";

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
): WorkerSurface {
  const triggerIds = new Map<string, number>();
  // Calls carry the current span (or the invocation's context) as their parent.
  const traced = <R extends TriggerRequest<unknown>>(request: R): R => withCurrentTrace(tracer, request);
  const channels: Channels = {
    create: (options) => client.trigger(traced({ function_id: "engine::channels::create", payload: options ?? {} })),
    openWriter: (ref) => openChannelWriter(url, ref),
    read: (ref) => readChannel(url, ref),
  };
  return {
    runtime: "node",
    env,
    channels,
    tracer,
    registerFunction(id, handler, options) {
      client.registerFunction(
        id,
        (data: unknown, _metadata: unknown, ctx: InvocationContext) => {
          const fields: TraceFields = {};
          if (ctx.traceparent) fields.traceparent = ctx.traceparent;
          if (ctx.baggage) fields.baggage = ctx.baggage;
          const inner: InvocationContext = { ...ctx, trigger: (request) => ctx.trigger(traced(request)) };
          return activeTrace.run(fields, () => handler(data, inner));
        },
        options,
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
  // One tracer per module, so each one's spans carry its name as their service.
  const surfaceOf = (name: string) => {
    const tracer = nodeTracer(client, name);
    tracers.push(tracer);
    return nodeSurface(client, url, env, tracer);
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
  return {
    client,
    surface,
    shutdown: async () => {
      // What the modules' tracers still hold goes out before the socket closes.
      await Promise.allSettled(tracers.map((t) => t.flush()));
      await client.shutdown();
    },
  };
}
