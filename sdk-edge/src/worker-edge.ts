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
import { DurableObject } from "cloudflare:workers";
import {
  IIIError,
  KEYED_METADATA_KEY,
  keyFieldOf,
  keyedGroupOf,
  keyedInstanceName,
  streamChannelRef,
  toErrorBody,
  type EdgeInvokeRequest,
  type EdgeInvokeResponse,
  type EdgeManifest,
  type EngineRpc,
  type StreamChannelRef,
} from "@iii-edge/protocol";
import { z } from "zod";
import { CHANNEL_CONNECT_TIMEOUT_MS, channelUrl, socketItems } from "./channels.ts";
import type { TraceFields } from "./client/trace.ts";
import type { TriggerRequest } from "./client/types.ts";
import { FunctionHost } from "./host.ts";
import { HostRegistry, type HostHandler } from "./host-registry.ts";
import { KeyedInstance, type KeyedScope, type KeyedStore, type SqlValue } from "./keyed.ts";
import { DEFAULT_NAMESPACE, connectEngine } from "./rpc.ts";
import { createTracer, withCurrentTrace, type Tracer } from "./telemetry.ts";
import type { ChannelWriter, Channels, WorkerFunctionOptions, WorkerHandler, WorkerModule, WorkerSurface } from "./worker.ts";
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

/** How a host's modules are declared: where calls back go, and whether keyed functions may be declared. */
interface DeclareOptions {
  engineBinding: string;
  disableVar: string | undefined;
  /** Why this host cannot run keyed functions (undefined: it can). */
  keyedRefusal: string | undefined;
}

/** The keyed scope of the call being handled in a KeyedObjects instance. */
const keyedScope = new AsyncLocalStorage<KeyedScope>();

/** Runs each module's `register` against an edge surface, all or nothing (throws the reason).
 * A dry run on a registry of its own finds duplicate ids and unusable schemas before any of it
 * reaches a host's. */
function declareModules(
  raw: Readonly<Record<string, unknown>>,
  workers: readonly WorkerModule<unknown>[],
  opts: DeclareOptions,
): Declarations {
  const declared: Declarations = { functions: [], triggers: [] };
  let open = true;
  const add = <T>(list: T[], item: T) => {
    if (!open) throw new IIIError("invalid_arguments", "registrations are declarations: make them during register(iii, config)");
    list.push(item);
  };
  try {
    const setting = opts.disableVar ? raw[opts.disableVar] : undefined;
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
      return edgeSurface(raw, opts.engineBinding, tracer, {
        registerFunction: (id: string, handler: WorkerHandler, options?: WorkerFunctionOptions) => {
          const key = options?.key;
          if (key === undefined) {
            add(declared.functions, {
              id,
              handler: (data, ctx) => handler(data, { ...ctx, trigger: (request) => ctx.trigger(traced(request)) }),
              options: markedOptions(m, id, options),
            });
            return;
          }
          if (opts.keyedRefusal) throw new IIIError("invalid_arguments", `${id} is keyed, but ${opts.keyedRefusal}`);
          const { key: _key, ...rest } = options ?? {};
          const keyedOptions = { ...rest, metadata: { ...rest.metadata, [KEYED_METADATA_KEY]: key } };
          // Checked here so that a bad field name stops the host, not every call.
          keyFieldOf(keyedOptions.metadata);
          add(declared.functions, {
            id,
            handler: (data, ctx) => {
              const scope = keyedScope.getStore();
              if (!scope) throw new IIIError("function_not_invokable", `${id} is keyed: it runs on its instance only`);
              return handler(data, { ...ctx, ...scope, trigger: (request) => ctx.trigger(traced(request)) });
            },
            options: markedOptions(m, id, keyedOptions),
          });
        },
        registerTrigger: (t) =>
          add(declared.triggers, { trigger_type: t.type, function_id: t.function_id, config: t.config, metadata: t.metadata, id: t.id }),
      });
    };
    for (const m of selectWorkers(workers, disabled, opts.disableVar)) {
      try {
        m.register(surfaceFor(m), m.configFrom?.(raw) ?? {});
      } catch (e) {
        throw new IIIError(
          e instanceof IIIError ? e.code : "invalid_arguments",
          `worker ${m.name}: ${e instanceof Error ? e.message : String(e)}`,
          {
            cause: e,
          },
        );
      }
    }
    const check = new HostRegistry<unknown>();
    for (const f of declared.functions) check.function(f.id, f.handler, f.options);
    for (const t of declared.triggers) check.trigger(t);
    for (const t of made) tracers.add(t);
    return declared;
  } finally {
    open = false;
  }
}

/** The engine binding named `bindingName` in `raw`, if it is one. */
function engineOf(raw: Readonly<Record<string, unknown>>, bindingName: string): EngineNamespace | undefined {
  const b = raw[bindingName];
  return b && typeof (b as { getByName?: unknown }).getByName === "function" ? (b as EngineNamespace) : undefined;
}

/** Run `run` as invocation `req`: calls back go to its namespace with its trace, and what the
 * modules' tracers hold goes to the engine after, without holding the answer. */
function asInvocation<T>(
  req: EdgeInvokeRequest,
  engine: EngineNamespace | undefined,
  waitUntil: (p: Promise<unknown>) => void,
  run: () => Promise<T>,
): Promise<T> {
  const trace: TraceFields = {};
  if (req.traceparent) trace.traceparent = req.traceparent;
  if (req.baggage) trace.baggage = req.baggage;
  const invocation: Invocation = { namespace: req.namespace ?? DEFAULT_NAMESPACE, trace, waitUntil, engine };
  return current.run(invocation, async () => {
    try {
      // The handler runs inside its invocation's trace: its spans' parent, its calls' context.
      return await activeTrace.run(trace, run);
    } finally {
      if (engine) waitUntil(Promise.allSettled([...tracers].map((t) => t.flush())));
    }
  });
}

export abstract class WorkerHost<Env = unknown> extends FunctionHost<Env> {
  /** The workers this host runs, registered in this order. */
  protected abstract readonly workers: readonly WorkerModule<unknown>[];
  /** A var holding comma-separated worker names to leave out (none when unset). */
  protected readonly disableVar: string | undefined = undefined;
  /** The Durable Object binding (a `KeyedObjects` class running the same workers) where this
   * host's keyed functions run, one object per key. Unset: a module declaring one is refused. */
  protected readonly keyedObjects: string | undefined = undefined;

  /** Runs each module's `register` against the surface. All or nothing: when the disable list
   * names no worker, a module throws, or two declare one id, the reason is logged and the host
   * declares nothing (an empty manifest, so the engine runs none of these workers) rather than
   * failing every manifest request; the engine keeps serving everything else. */
  protected register(): void {
    let declared: Declarations;
    try {
      declared = declareModules((this.env ?? {}) as Readonly<Record<string, unknown>>, this.workers, {
        engineBinding: this.engineBinding,
        disableVar: this.disableVar,
        keyedRefusal: this.keyedObjects ? undefined : `${this.constructor.name} names no keyedObjects binding`,
      });
    } catch (e) {
      console.error(`${this.constructor.name}: not started: ${e instanceof Error ? e.message : String(e)}`);
      return;
    }
    for (const f of declared.functions) this.function(f.id, f.handler, f.options);
    for (const t of declared.triggers) this.trigger(t);
  }

  /** The manifest names the keyed objects' binding, so an engine in the same Worker calls them
   * straight. */
  override async iiiManifest(): Promise<EdgeManifest> {
    const manifest = await super.iiiManifest();
    const keyed = manifest.functions.some((f) => f.metadata !== undefined && KEYED_METADATA_KEY in f.metadata);
    return keyed && this.keyedObjects ? { ...manifest, keyed_objects: this.keyedObjects } : manifest;
  }

  override async iiiInvoke(req: EdgeInvokeRequest): Promise<EdgeInvokeResponse> {
    const raw = (this.env ?? {}) as Record<string, unknown>;
    return asInvocation(
      req,
      engineOf(raw, this.engineBinding),
      (p) => this.ctx.waitUntil(p),
      () => super.iiiInvoke(req),
    );
  }

  /** A keyed call goes to the object its namespace, function group and key name. The engine
   * checked the key; it is read again here for a call that came another way. */
  protected override async invokeKeyed(req: EdgeInvokeRequest): Promise<EdgeInvokeResponse> {
    const name = this.keyedObjects;
    const ns = name ? ((this.env ?? {}) as Record<string, unknown>)[name] : undefined;
    if (!ns || typeof (ns as { getByName?: unknown }).getByName !== "function") {
      return { error: { code: "function_not_invokable", message: `env.${name ?? "(keyedObjects)"} is not a Durable Object binding` } };
    }
    const key = req.key;
    if (key === undefined) {
      return { error: { code: "invalid_arguments", message: `${req.function_id} is keyed: the call names no key` } };
    }
    const stub = (ns as KeyedObjectsNamespace).getByName(keyedInstanceName(req.namespace ?? DEFAULT_NAMESPACE, req.function_id, key));
    const sent = stub.iiiKeyedInvoke({ ...req, key });
    if (!req.void) return sent;
    this.ctx.waitUntil(sent);
    return {};
  }
}

/** The surface every module registers against. It outlives the call that built it (registries are
 * kept per isolate), so what belongs to a call is read from `current` when used. */
function edgeSurface(
  raw: Readonly<Record<string, unknown>>,
  bindingName: string,
  tracer: Tracer,
  declare: {
    registerFunction(id: string, handler: WorkerHandler, options?: WorkerFunctionOptions): void;
    registerTrigger: WorkerSurface["registerTrigger"];
  },
): WorkerSurface {
  const engine = (): EngineNamespace => {
    const b = engineOf(raw, bindingName);
    // Named by a field, so Env cannot type it; a DurableObjectNamespace of the engine class.
    if (!b) throw new IIIError("not_connected", `env.${bindingName} is not bound: this host cannot reach the engine`);
    return b;
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
  return {
    runtime: "edge",
    env: Object.freeze(env),
    channels,
    tracer,
    registerFunction: declare.registerFunction,
    registerTrigger: declare.registerTrigger,
    trigger,
  };
}

// ------------------------------------------------------------------ keyed instances

/** A KeyedObjects namespace as the host reaches it. */
interface KeyedObjectsNamespace {
  getByName(name: string): { iiiKeyedInvoke(req: EdgeInvokeRequest & { key: string }): Promise<EdgeInvokeResponse> };
}

/** Registries of KeyedObjects classes, per Worker env and class (declarations run once per isolate). */
const keyedRegistries = new WeakMap<object, WeakMap<object, HostRegistry<unknown>>>();

/** Who an object is: written on its first call, read back when its alarm wakes it. */
const identityRow = z.object({ namespace: z.string(), grp: z.string(), key: z.string() });

/**
 * The Durable Object class where a WorkerHost's keyed functions run: one object per namespace,
 * function group and key (`keyedInstanceName`), running the same worker modules. Calls on one
 * object run one at a time; a handler's `ctx` has the object's SQLite and alarms
 * (./keyed.ts). Bind it in wrangler.toml as a SQLite class and name the binding in the host's
 * `keyedObjects`:
 *
 *   export class CartObjects extends KeyedObjects<Env> { protected readonly workers = [cart]; }
 *   export class CartWorkers extends WorkerHost<Env> {
 *     protected readonly workers = [cart];
 *     protected override readonly keyedObjects = "CART_OBJECTS";
 *   }
 */
export abstract class KeyedObjects<Env = unknown> extends DurableObject<Env> {
  /** The same workers as the WorkerHost whose keyed functions this class runs. */
  protected abstract readonly workers: readonly WorkerModule<unknown>[];
  /** Name of the env binding of the engine's Durable Object namespace, for calls back. */
  protected readonly engineBinding: string = "ENGINE";
  /** The same disable list as the host's. */
  protected readonly disableVar: string | undefined = undefined;
  #instance: KeyedInstance | undefined;
  #identity: z.infer<typeof identityRow> | undefined;

  #raw(): Readonly<Record<string, unknown>> {
    return (this.env ?? {}) as Readonly<Record<string, unknown>>;
  }

  #registry(): HostRegistry<unknown> {
    const env = this.#raw();
    const byClass = keyedRegistries.get(env) ?? new WeakMap<object, HostRegistry<unknown>>();
    keyedRegistries.set(env, byClass);
    const cached = byClass.get(this.constructor);
    if (cached) return cached;
    const declared = declareModules(env, this.workers, {
      engineBinding: this.engineBinding,
      disableVar: this.disableVar,
      keyedRefusal: undefined,
    });
    const registry = new HostRegistry<unknown>();
    for (const f of declared.functions) registry.function(f.id, f.handler, f.options);
    byClass.set(this.constructor, registry);
    return registry;
  }

  /** The key field of keyed function `id` of these workers, or undefined. */
  #fieldOf(id: string): string | undefined {
    return keyFieldOf(this.#registry().functions.get(id)?.frame.metadata);
  }

  #instanceFor(identity: z.infer<typeof identityRow>): KeyedInstance {
    if (this.#instance) return this.#instance;
    const storage = this.ctx.storage;
    const store: KeyedStore = {
      exec: <Row extends Record<string, unknown>>(query: string, ...bindings: SqlValue[]) =>
        storage.sql.exec(query, ...bindings).toArray() as unknown as Row[],
      transaction: (fn) => storage.transactionSync(fn),
    };
    this.#instance = new KeyedInstance(identity.key, {
      store,
      // The object's one platform alarm stands for the earliest of its alarms.
      wake: (at) => void (at === undefined ? storage.deleteAlarm() : storage.setAlarm(at)),
      now: () => Date.now(),
      newId: () => crypto.randomUUID(),
      alarmTarget: (id) => this.#fieldOf(id) !== undefined && keyedGroupOf(id) === identity.grp,
    });
    return this.#instance;
  }

  #identity_(req?: EdgeInvokeRequest & { key: string }): z.infer<typeof identityRow> | undefined {
    if (this.#identity) return this.#identity;
    const sql = this.ctx.storage.sql;
    sql.exec("CREATE TABLE IF NOT EXISTS _iii_instance (id INTEGER PRIMARY KEY CHECK (id = 1), namespace TEXT, grp TEXT, key TEXT)");
    const stored = sql.exec("SELECT namespace, grp, key FROM _iii_instance").toArray()[0];
    if (stored) return (this.#identity = identityRow.parse(stored));
    if (!req) return undefined;
    const identity = { namespace: req.namespace ?? DEFAULT_NAMESPACE, grp: keyedGroupOf(req.function_id), key: req.key };
    sql.exec("INSERT INTO _iii_instance (id, namespace, grp, key) VALUES (1, ?, ?, ?)", identity.namespace, identity.grp, identity.key);
    return (this.#identity = identity);
  }

  /** Run one call on this object's instance, in its turn. */
  async iiiKeyedInvoke(req: EdgeInvokeRequest & { key: string }): Promise<EdgeInvokeResponse> {
    let identity: z.infer<typeof identityRow>;
    try {
      this.#registry();
      identity = this.#identity_(req) as z.infer<typeof identityRow>;
    } catch (e) {
      return { error: toErrorBody(e) };
    }
    if (identity.key !== req.key || identity.grp !== keyedGroupOf(req.function_id)) {
      return {
        error: {
          code: "invalid_arguments",
          message: `${req.function_id}/${req.key} reached the instance of ${identity.grp}/${identity.key}`,
        },
      };
    }
    const instance = this.#instanceFor(identity);
    const turn = instance.run(() => this.#invoke(req, instance)).catch((e): EdgeInvokeResponse => ({ error: toErrorBody(e) }));
    if (!req.void) return turn;
    this.ctx.waitUntil(turn);
    return {};
  }

  #invoke(req: EdgeInvokeRequest, instance: KeyedInstance): Promise<EdgeInvokeResponse> {
    const raw = this.#raw();
    const engine = engineOf(raw, this.engineBinding);
    const registry = this.#registry();
    return asInvocation(
      req,
      engine,
      (p) => this.ctx.waitUntil(p),
      () =>
        keyedScope.run(instance.scope(), () =>
          registry.invoke(req, raw, async (request, trace) => {
            if (!engine) throw new IIIError("not_connected", `env.${this.engineBinding} is not bound: this object cannot call the engine`);
            return connectEngine(engine, { namespace: req.namespace, trace }).trigger(request);
          }),
        ),
    );
  }

  /** The platform alarm: fire this instance's due alarms, each once, in the line of calls. */
  override async alarm(): Promise<void> {
    const identity = this.#identity_();
    if (!identity) return;
    const instance = this.#instanceFor(identity);
    await instance.fireDue(
      async (alarm) => {
        const field = this.#fieldOf(alarm.function_id);
        if (field === undefined) throw new IIIError("function_not_found", `${alarm.function_id} is no keyed function here`);
        const data = { ...(JSON.parse(alarm.payload) as Record<string, unknown>), [field]: identity.key };
        const out = await this.#invoke(
          { function_id: alarm.function_id, data, invocation_id: `alarm-${alarm.id}`, namespace: identity.namespace, key: identity.key },
          instance,
        );
        if ("error" in out && out.error) throw IIIError.relayed(out.error);
      },
      (alarm, e) => console.error(`alarm ${alarm.id} (${alarm.function_id}) of ${identity.grp}/${identity.key} failed: ${String(e)}`),
    );
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
