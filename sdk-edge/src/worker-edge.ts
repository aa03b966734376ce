// Workers (./worker.ts) inside a Worker, with no socket: a `WorkerHost` is a FunctionHost whose
// functions and triggers are what its modules' `register(iii, config)` declare. The engine reaches
// it by service binding (EDGE_HOSTS), reads the manifest and invokes by RPC; calls back and channel
// ends go through the engine's Durable Object binding (`ENGINE`), in the namespace of the
// invocation being handled.
//
//   export class MyWorkers extends WorkerHost<Env> {
//     protected readonly workers = [orders, billing];
//     protected override readonly disableVar = "MY_DISABLE"; // "billing" leaves billing out
//   }
//
// Needs `nodejs_compat` (or `nodejs_als`): the invocation a module's `iii.trigger` / `iii.channels`
// belong to is found through AsyncLocalStorage, because one registration serves every call.
import { AsyncLocalStorage } from "node:async_hooks";
import {
  IIIError,
  streamChannelRef,
  type EdgeInvokeRequest,
  type EdgeInvokeResponse,
  type EngineRpc,
  type StreamChannelRef,
} from "@iii-edge/protocol";
import { CHANNEL_CONNECT_TIMEOUT_MS, channelUrl, socketItems } from "./channels.ts";
import type { TraceFields } from "./client/trace.ts";
import type { TriggerRequest } from "./client/types.ts";
import { FunctionHost } from "./host.ts";
import { HostRegistry, type HostHandler } from "./host-registry.ts";
import { DEFAULT_NAMESPACE, connectEngine } from "./rpc.ts";
import { createTracer, withCurrentTrace, type Tracer } from "./telemetry.ts";
import type { ChannelWriter, Channels, WorkerFunctionOptions, WorkerModule, WorkerSurface } from "./worker.ts";
import { markedOptions } from "./worker.ts";

export type { ChannelWriter, Channels, WorkerModule, WorkerSurface } from "./worker.ts";
export { FunctionHost } from "./host.ts";

/** The engine's Durable Object namespace as this file uses it: RPC, and `fetch` for channel upgrades. */
interface EngineNamespace {
  getByName(name: string): EngineRpc & { fetch(request: Request): Promise<Response> };
}

/** What the modules declared, held until all of them succeeded. */
interface Declarations {
  functions: { id: string; handler: HostHandler<unknown>; options: WorkerFunctionOptions | undefined }[];
  triggers: { trigger_type: string; function_id: string; config?: unknown; metadata?: unknown; id?: string }[];
}

/** The invocation being handled: where calls back go, and what keeps its request alive. */
interface Invocation {
  namespace: string;
  trace: TraceFields;
  waitUntil(p: Promise<unknown>): void;
  /** The engine binding, for telemetry frames sent at the end of the invocation. */
  engine: EngineNamespace | undefined;
}

const current = new AsyncLocalStorage<Invocation>();
/** The current trace context of the modules' tracers: the invocation's, or a span made current. */
const activeTrace = new AsyncLocalStorage<TraceFields>();
/** Every module's tracer in this isolate (surfaces are built once per isolate, ./host.ts). */
const tracers = new Set<Tracer>();

/** A module's tracer: spans are buffered and sent through the engine stub's `telemetry(frame)` RPC
 * when an invocation ends (a Worker keeps no timer between requests). */
function edgeTracer(serviceName: string, enabled: boolean): Tracer {
  return createTracer({
    serviceName,
    enabled,
    store: { run: (fields, fn) => activeTrace.run(fields, fn), get: () => activeTrace.getStore() },
    transport: async (frame) => {
      const inv = current.getStore();
      if (!inv?.engine) return false;
      await inv.engine.getByName(inv.namespace).telemetry(frame);
      return true;
    },
    flush: "manual",
    resource: { "cloud.provider": "cloudflare", "faas.name": serviceName },
  });
}

/** Names in a comma-separated setting (`"a, b,"` → `["a", "b"]`). */
function listSetting(value: string | undefined): string[] {
  return (value ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** The modules left after `disabled`; a name that is no module's is an error naming the valid ones
 * (a typo would otherwise run the worker its author meant to leave out). */
function selectWorkers<M extends { readonly name: string }>(
  workers: readonly M[],
  disabled: readonly string[],
  setting = "the disable list",
): M[] {
  const names = workers.map((w) => w.name);
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup !== undefined) throw new IIIError("invalid_arguments", `two workers are named "${dup}"`);
  const unknown = disabled.filter((n) => !names.includes(n));
  if (unknown.length > 0) {
    throw new IIIError(
      "invalid_arguments",
      `${setting} names no such worker: ${unknown.map((n) => `"${n}"`).join(", ")} (the workers here: ${names.join(", ")})`,
    );
  }
  return workers.filter((w) => !disabled.includes(w.name));
}

export abstract class WorkerHost<Env = unknown> extends FunctionHost<Env> {
  /** The workers this host runs, registered in this order. */
  protected abstract readonly workers: readonly WorkerModule<unknown>[];
  /** A var holding comma-separated worker names to leave out (none when unset). */
  protected readonly disableVar: string | undefined = undefined;

  /** Runs each module's `register` against the surface. All or nothing: when the disable list
   * names no worker, a module throws, or two declare one id, the reason is logged and the host
   * declares nothing (an empty manifest, so the engine runs none of these workers) rather than
   * failing every manifest request; the engine keeps serving everything else. */
  protected register(): void {
    const declared = this.#declare();
    if (!declared) return;
    for (const f of declared.functions) this.function(f.id, f.handler, f.options);
    for (const t of declared.triggers) this.trigger(t);
  }

  #declare(): Declarations | undefined {
    const raw = (this.env ?? {}) as Readonly<Record<string, unknown>>;
    const declared: Declarations = { functions: [], triggers: [] };
    let open = true;
    const add = <T>(list: T[], item: T) => {
      if (!open) throw new IIIError("invalid_arguments", "registrations are declarations: make them during register(iii, config)");
      list.push(item);
    };
    try {
      const setting = this.disableVar ? raw[this.disableVar] : undefined;
      const disabled = listSetting(typeof setting === "string" ? setting : undefined);
      const made: Tracer[] = [];
      // The engine's TRACING switch (same Worker env): off, it keeps nothing workers send.
      const tracing = !/^(off|false|0|no)$/i.test(String(raw.TRACING ?? "on").trim());
      // One surface per module, each with a tracer named after it (its spans' service.name).
      const surfaceFor = (m: WorkerModule<unknown>) => {
        const name = m.name;
        const tracer = edgeTracer(name, tracing);
        made.push(tracer);
        const traced = <R extends TriggerRequest<unknown>>(request: R): R => withCurrentTrace(tracer, request);
        return this.#surface(raw, tracer, {
          registerFunction: (id, handler, options) =>
            add(declared.functions, {
              id,
              handler: (data, ctx) => handler(data, { ...ctx, trigger: (request) => ctx.trigger(traced(request)) }),
              options: markedOptions(m, id, options),
            }),
          registerTrigger: (t) =>
            add(declared.triggers, { trigger_type: t.type, function_id: t.function_id, config: t.config, metadata: t.metadata, id: t.id }),
        });
      };
      for (const m of selectWorkers(this.workers, disabled, this.disableVar)) {
        try {
          m.register(surfaceFor(m), m.configFrom?.(raw) ?? {});
        } catch (e) {
          throw new IIIError(
            e instanceof IIIError ? e.code : "invalid_arguments",
            `worker ${m.name}: ${e instanceof Error ? e.message : String(e)}`,
            { cause: e },
          );
        }
      }
      // A dry run on a registry of its own finds duplicate ids and unusable schemas before any
      // of it reaches this host's.
      const check = new HostRegistry<Env>();
      for (const f of declared.functions) check.function(f.id, f.handler, f.options);
      for (const t of declared.triggers) check.trigger(t);
      for (const t of made) tracers.add(t);
      return declared;
    } catch (e) {
      console.error(`${this.constructor.name}: not started: ${e instanceof Error ? e.message : String(e)}`);
      return undefined;
    } finally {
      open = false;
    }
  }

  override async iiiInvoke(req: EdgeInvokeRequest): Promise<EdgeInvokeResponse> {
    const trace: TraceFields = {};
    if (req.traceparent) trace.traceparent = req.traceparent;
    if (req.baggage) trace.baggage = req.baggage;
    const binding = ((this.env ?? {}) as Record<string, unknown>)[this.engineBinding];
    const engine =
      binding && typeof (binding as { getByName?: unknown }).getByName === "function" ? (binding as EngineNamespace) : undefined;
    const invocation: Invocation = {
      namespace: req.namespace ?? DEFAULT_NAMESPACE,
      trace,
      waitUntil: (p) => this.ctx.waitUntil(p),
      engine,
    };
    return current.run(invocation, async () => {
      try {
        // The handler runs inside its invocation's trace: its spans' parent, its calls' context.
        return await activeTrace.run(trace, () => super.iiiInvoke(req));
      } finally {
        // What ended during this call goes to the engine without holding its answer.
        if (engine) this.ctx.waitUntil(Promise.allSettled([...tracers].map((t) => t.flush())));
      }
    });
  }

  /** The surface every module registers against. It outlives the call that built it (registries
   * are kept per isolate), so what belongs to a call is read from `current` when used. */
  #surface(
    raw: Readonly<Record<string, unknown>>,
    tracer: Tracer,
    declare: Pick<WorkerSurface, "registerFunction" | "registerTrigger">,
  ): WorkerSurface {
    const bindingName = this.engineBinding;
    const engine = (): EngineNamespace => {
      const b = raw[bindingName];
      // Named by a field, so Env cannot type it; a DurableObjectNamespace of the engine class.
      if (!b || typeof (b as { getByName?: unknown }).getByName !== "function") {
        throw new IIIError("not_connected", `env.${bindingName} is not bound: this host cannot reach the engine`);
      }
      return b as EngineNamespace;
    };
    const trigger = <I, O>(request: TriggerRequest<I>): Promise<O> => {
      const inv = current.getStore();
      return connectEngine(engine(), { namespace: inv?.namespace, trace: inv?.trace }).trigger<I, O>(withCurrentTrace(tracer, request));
    };
    const stub = () => engine().getByName(current.getStore()?.namespace ?? DEFAULT_NAMESPACE);
    const channels: Channels = {
      create: (options) => trigger({ function_id: "engine::channels::create", payload: options ?? {} }),
      openWriter: (ref) => openWriter(stub(), ref, current.getStore()?.waitUntil),
      read: (ref) => readChannel(stub(), ref),
    };
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(raw)) if (typeof v === "string") env[k] = v;
    return { runtime: "edge", env: Object.freeze(env), channels, tracer, ...declare, trigger };
  }
}

// ------------------------------------------------------------------ channel ends over the stub

function parseRef(ref: StreamChannelRef, direction: "read" | "write", what: string): StreamChannelRef {
  const r = streamChannelRef.safeParse(ref);
  if (!r.success) throw new IIIError("invalid_arguments", `${what} needs a channel ref {channel_id, access_key, direction}`);
  if (r.data.direction !== direction)
    throw new IIIError(
      "invalid_arguments",
      `${what} needs the ${direction === "write" ? "writer" : "reader"} ref (direction: ${direction})`,
    );
  return r.data;
}

/** Attach to one end: a WebSocket upgrade straight to the Engine object. The front door is not on
 * this path (it only adds a grant, which the object does not ask of channel ends: the access key
 * is the capability), so neither a token nor the loopback rule applies. */
async function attach(stub: { fetch(request: Request): Promise<Response> }, ref: StreamChannelRef): Promise<WebSocket> {
  // Any origin does: the object routes on the path (`/ws/channels/<id>`) and reads key and dir.
  const request = new Request(channelUrl("https://engine", ref), { headers: { Upgrade: "websocket" } });
  let timer: ReturnType<typeof setTimeout> | undefined;
  let timedOut = false;
  const pending = stub.fetch(request);
  // An answer after the deadline is a socket nobody will use: take it and close it.
  void pending.then(
    (late) => {
      if (!timedOut || !late.webSocket) return;
      late.webSocket.accept();
      closeQuietly(late.webSocket, 1000);
    },
    () => undefined,
  );
  const res = await Promise.race([
    pending,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timedOut = true;
        reject(new IIIError("timeout", `channel ${ref.channel_id}: no answer within ${CHANNEL_CONNECT_TIMEOUT_MS} ms`));
      }, CHANNEL_CONNECT_TIMEOUT_MS);
    }),
  ]).finally(() => clearTimeout(timer));
  const ws = res.webSocket;
  if (res.status !== 101 || !ws) {
    if (res.status === 404) throw new IIIError("not_found", `channel ${ref.channel_id}: no such channel, or the wrong key`);
    throw new IIIError("invalid_response", `channel ${ref.channel_id}: the engine answered ${res.status} to the upgrade`);
  }
  return ws;
}

/** Close a socket whose state may have changed under us (the engine closing its end meanwhile). */
function closeQuietly(ws: WebSocket, code = 1000, reason = ""): void {
  try {
    ws.close(code, reason);
  } catch {
    // already closed
  }
}

async function openWriter(
  stub: { fetch(request: Request): Promise<Response> },
  ref: StreamChannelRef,
  waitUntil: ((p: Promise<unknown>) => void) | undefined,
): Promise<ChannelWriter> {
  const r = parseRef(ref, "write", "openWriter");
  const ws = await attach(stub, r);
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    ws.addEventListener("close", (e) => resolve({ code: e.code, reason: e.reason }), { once: true });
    ws.addEventListener("error", () => resolve({ code: 1006, reason: "error" }), { once: true });
  });
  ws.accept();
  return {
    write(item) {
      if (ws.readyState !== WebSocket.OPEN) throw new IIIError("channel_send_failed", `channel ${r.channel_id} is closed`);
      ws.send(item);
    },
    close() {
      if (ws.readyState !== WebSocket.OPEN) return;
      ws.close(1000, "stream_complete");
      // A socket belongs to the request that opened it: keep that request alive until the engine
      // answered the close, so the items still queued are sent even when the handler returns now.
      waitUntil?.(closed);
    },
    closed,
  };
}

async function* readChannel(
  stub: { fetch(request: Request): Promise<Response> },
  ref: StreamChannelRef,
): AsyncGenerator<string | Uint8Array> {
  const r = parseRef(ref, "read", "read");
  const ws = await attach(stub, r);
  // Binary items as ArrayBuffer: under recent compatibility dates workerd follows the standard and
  // delivers Blobs by default (whose bytes only arrive asynchronously, out of order with text items).
  ws.binaryType = "arraybuffer";
  yield* socketItems(ws, {
    start: () => ws.accept(),
    close: () => {
      if (ws.readyState === WebSocket.OPEN) closeQuietly(ws, 1000);
    },
  });
}
