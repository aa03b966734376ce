// Worker-hosted functions (sdk-edge FunctionHost) as the core's `EdgeHost` port: what a host answers
// over its service binding is another Worker's output, so it is parsed with protocol's schemas
// (edge-host.ts) before the core trusts it, never cast. And the engine's side of them
// (`EdgeHostSync`): each host's manifest synced into the catalog, and a call to one of its functions.
import {
  edgeInvokeResponse,
  edgeManifest,
  keyedInstanceName,
  type EdgeHost,
  type EdgeInvokeRequest,
  type EdgeInvokeResponse,
  formatIssues,
  type SchemaIssues,
} from "@iii-edge/protocol";
import type { CallRequest, EngineBindings } from "./api.ts";
import { keyedDeclarationProblem } from "./keyed.ts";
import type { Catalog, FunctionRecord } from "./catalog.ts";
import type { CallOutcome, EnginePorts } from "./ports.ts";

/** A service binding to a host, as far as the engine relies on it before parsing. */
export interface EdgeHostBinding {
  iiiManifest(): Promise<unknown>;
  iiiInvoke(req: EdgeInvokeRequest): Promise<unknown>;
}

/** A KeyedObjects namespace of the engine's own Worker, as far as the engine relies on it. */
export interface KeyedObjectsBinding {
  getByName(name: string): { iiiKeyedInvoke(req: EdgeInvokeRequest & { key: string }): Promise<unknown> };
}

const problem = (error: SchemaIssues) => formatIssues(error, { root: "answer" });

/** The port over host `name`: a malformed manifest rejects (the engine logs it and keeps the host's
 * previous functions); a malformed answer to a call ends the call with `invocation_failed`. */
export function edgeHostPort(
  name: string,
  binding: EdgeHostBinding,
  keyedObjects: (binding: string) => KeyedObjectsBinding | undefined = () => undefined,
): EdgeHost {
  return {
    iiiKeyedInvoke(objects, instance, req) {
      const ns = keyedObjects(objects);
      if (!ns) return undefined;
      return ns
        .getByName(instance)
        .iiiKeyedInvoke(req)
        .then((answer) => {
          const r = edgeInvokeResponse.safeParse(answer);
          if (r.success) return r.data;
          return {
            error: {
              code: "invocation_failed",
              message: `keyed object ${objects} answered ${req.function_id} malformed: ${problem(r.error)}`,
            },
          };
        });
    },
    async iiiManifest() {
      const m = edgeManifest.safeParse(await binding.iiiManifest());
      if (!m.success) throw new Error(`edge host ${name} sent a malformed manifest: ${problem(m.error)}`);
      return m.data;
    },
    async iiiInvoke(req) {
      const r = edgeInvokeResponse.safeParse(await binding.iiiInvoke(req));
      if (r.success) return r.data;
      return {
        error: {
          code: "invocation_failed",
          message: `edge host ${name} answered ${req.function_id} malformed: ${problem(r.error)}`,
        },
      };
    },
  };
}

/** What manifest sync needs of the engine: the catalog to write the hosts' functions into, and the
 * ownership-checked binding methods for their triggers. */
export interface EdgeHostOwner {
  readonly catalog: Catalog;
  /** Ids reserved by the engine: a host cannot take them. */
  readonly builtins: ReadonlyMap<string, unknown>;
  registerTrigger: EngineBindings["registerTrigger"];
  removeTrigger(id: string): boolean;
  functionsMaybeChanged(): void;
}

export class EdgeHostSync {
  private readonly ports: EnginePorts;
  private readonly engine: EdgeHostOwner;
  private inFlight: Promise<void> | null = null;
  /** Each host's `keyed_objects` binding, from its last manifest. */
  private readonly keyedObjects = new Map<string, string>();

  constructor(ports: EnginePorts, engine: EdgeHostOwner) {
    this.ports = ports;
    this.engine = engine;
  }

  /** The refresh in progress, if any: a call to a function not (yet) in the catalog waits for it. */
  get refreshing(): Promise<void> | null {
    return this.inFlight;
  }

  /** Reload every host's manifest: its functions and triggers become what it lists (one refresh at a time). */
  refresh(): Promise<void> {
    if (this.inFlight) return this.inFlight;
    const { catalog } = this.engine;
    const run = async () => {
      for (const [name, host] of Object.entries(this.ports.edgeHosts)) {
        let manifest;
        try {
          manifest = await host.iiiManifest();
        } catch (e) {
          this.ports.log.warn("edge host manifest failed", { host: name, error: String(e) });
          continue;
        }
        const owner = `edge:${name}`;
        if (manifest.keyed_objects) this.keyedObjects.set(name, manifest.keyed_objects);
        else this.keyedObjects.delete(name);
        const keep = new Set(manifest.functions.map((f) => f.id));
        for (const f of [...catalog.functions.values()]) {
          if (f.kind === "edge" && f.owner === name && !keep.has(f.id)) catalog.deleteFunction(f.id, name);
        }
        for (const f of manifest.functions) {
          if (this.engine.builtins.has(f.id)) continue;
          const keyed = keyedDeclarationProblem(f.metadata);
          if (keyed) {
            this.ports.log.warn("edge host function refused", { host: name, id: f.id, message: keyed });
            continue;
          }
          const rec: FunctionRecord = { id: f.id, kind: "edge", owner: name };
          if (f.description !== undefined) rec.description = f.description;
          if (f.request_format !== undefined) rec.request_format = f.request_format;
          if (f.response_format !== undefined) rec.response_format = f.response_format;
          if (f.metadata !== undefined) rec.metadata = f.metadata;
          // The manifest is reloaded on every wake: write only what changed.
          const had = catalog.functions.get(f.id);
          if (!had || JSON.stringify(had) !== JSON.stringify(rec)) catalog.putFunction(rec);
        }
        const keepTriggers = new Set(manifest.triggers.map((t) => t.id));
        for (const t of [...catalog.triggers.values()]) if (t.owner === owner && !keepTriggers.has(t.id)) this.engine.removeTrigger(t.id);
        for (const t of manifest.triggers) {
          // Unchanged bindings stay as they are (a cron schedule keeps its next occurrence).
          const had = catalog.triggers.get(t.id);
          const same =
            had &&
            had.owner === owner &&
            had.trigger_type === t.trigger_type &&
            had.function_id === t.function_id &&
            JSON.stringify(had.config ?? null) === JSON.stringify(t.config ?? null) &&
            JSON.stringify(had.metadata) === JSON.stringify(t.metadata);
          if (same) continue;
          const err = this.engine.registerTrigger(owner, {
            id: t.id,
            trigger_type: t.trigger_type,
            function_id: t.function_id,
            config: t.config ?? null,
            metadata: t.metadata,
          });
          if (err) this.ports.log.warn("edge host trigger refused", { host: name, id: t.id, ...err });
        }
      }
      this.engine.functionsMaybeChanged();
    };
    this.inFlight = run().finally(() => {
      this.inFlight = null;
    });
    return this.inFlight;
  }

  /** Call `fn` on its host (the engine puts it under the call's deadline). With `void`, the host
   * answers at once and runs the function after (nobody waits for its result). */
  async call(fn: FunctionRecord, req: CallRequest, invocationId: string, opts: { void?: true; key?: string } = {}): Promise<CallOutcome> {
    const host = this.ports.edgeHosts[fn.owner];
    if (!host) return { ok: false, error: { code: "function_not_found", message: `edge host ${fn.owner} is not bound` } };
    const payload: Parameters<typeof host.iiiInvoke>[0] = {
      function_id: fn.id,
      data: req.data,
      invocation_id: invocationId,
      namespace: this.ports.namespace,
    };
    if (req.metadata !== undefined) payload.metadata = req.metadata;
    if (req.traceparent) payload.traceparent = req.traceparent;
    if (req.baggage) payload.baggage = req.baggage;
    if (opts.void) payload.void = true;
    let r: EdgeInvokeResponse | undefined;
    const objects = this.keyedObjects.get(fn.owner);
    if (opts.key !== undefined) {
      payload.key = opts.key;
      // Straight to the key's object when this Worker has its binding: the host would only forward.
      if (objects && host.iiiKeyedInvoke) {
        r = await host.iiiKeyedInvoke(objects, keyedInstanceName(this.ports.namespace, fn.id, opts.key), { ...payload, key: opts.key });
      }
    }
    r ??= await host.iiiInvoke(payload);
    return "error" in r && r.error ? { ok: false, error: r.error } : { ok: true, result: (r as { result?: unknown }).result };
  }
}
