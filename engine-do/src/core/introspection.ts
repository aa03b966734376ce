// What the `engine::*::list` / `info` built-ins (builtins/engine-fns.ts) and the discovery trigger
// types read besides the catalog: function summaries, whose a function or binding is by name, the
// engine's own built-ins and trigger types, and the calls open on a worker. Read-only.
import {
  MODEL_CALLABLE_BUILTINS,
  MODEL_METADATA_KEY,
  MODEL_NEVER,
  OPEN_GRANT,
  SERVED_BY_DEPLOYMENT,
  SERVED_BY_ENGINE,
  type RegisteredTriggerEntry,
} from "@iii-edge/protocol";
import type { BuiltinFunction, BuiltinTriggerType, CatalogView, EngineIntrospection, FunctionSummary } from "./api.ts";
import type { FunctionRecord, TriggerRecord } from "./catalog.ts";

/** The catalog as introspection reads it: with the change counters its caches are keyed by. */
type VersionedCatalog = CatalogView & { readonly version: number; readonly triggersVersion: number };

/** Bindings of the engine's own trigger types (the discovery subscriptions themselves, say): left
 * out of listings unless asked for, and out of `engine::triggers-available`. */
export const isInternalTriggerType = (type: string): boolean => type.startsWith("engine::");

/** What identifies a binding for `engine::triggers-available`: the same id bound anew to another
 * type or function is a change, a new config or status is not. */
const bindingIdentity = (t: { trigger_type: string; function_id: string }) => `${t.trigger_type}\u0000${t.function_id}`;

export class Introspection implements EngineIntrospection {
  private readonly catalog: VersionedCatalog;
  /** The sorted summaries (with and without internal functions) and the signature, as of a catalog
   * version: a listing of a 10,000-function catalog must not rebuild and sort it on every call. */
  private cached: { version: number; builtins: number; summaries: Map<boolean, FunctionSummary[]>; signature?: string } | undefined;
  /** The binding entries, as of a catalog version and trigger version (worker names are in them). */
  private cachedTriggers: { version: number; triggers: number; entries: RegisteredTriggerEntry[]; signature?: string } | undefined;
  private readonly builtins: ReadonlyMap<string, BuiltinFunction>;
  private readonly triggerTypes: ReadonlyMap<string, BuiltinTriggerType>;
  private readonly openCalls: (workerId: string) => number;

  constructor(
    catalog: VersionedCatalog,
    builtins: ReadonlyMap<string, BuiltinFunction>,
    triggerTypes: ReadonlyMap<string, BuiltinTriggerType>,
    openCalls: (workerId: string) => number,
  ) {
    this.catalog = catalog;
    this.builtins = builtins;
    this.triggerTypes = triggerTypes;
    this.openCalls = openCalls;
  }

  workerName(ownerOrId: string): string {
    if (ownerOrId.startsWith("edge:")) return ownerOrId.slice(5);
    const w = this.catalog.workers.get(ownerOrId);
    const name = w?.info.name;
    return typeof name === "string" && name ? name : ownerOrId;
  }

  functionOwnerName(f: FunctionRecord): string {
    return f.kind === "edge" ? f.owner : this.workerName(f.owner);
  }

  /** Who serves a function (protocol's `served_by`): the engine, the deployment, or the principal
   * of the connection that registered it. */
  servedBy(id: string): string | undefined {
    if (this.builtins.has(id)) return SERVED_BY_ENGINE;
    const f = this.catalog.functions.get(id);
    if (!f) return undefined;
    if (f.kind === "edge") return SERVED_BY_DEPLOYMENT;
    return (this.catalog.workers.get(f.owner)?.grant ?? OPEN_GRANT).sub;
  }

  /** A built-in's metadata as listed: the kernel mark on every one a model may not call. */
  builtinMetadata(id: string): Record<string, unknown> | undefined {
    return MODEL_CALLABLE_BUILTINS.has(id) ? undefined : { [MODEL_METADATA_KEY]: MODEL_NEVER };
  }

  isInternal(id: string, metadata?: Record<string, unknown>): boolean {
    if (metadata?.internal === true) return true;
    const b = this.builtins.get(id);
    return b?.internal === true;
  }

  /** The cache for the catalog as it is now (dropped when functions, workers or built-ins changed). */
  private current(): NonNullable<Introspection["cached"]> {
    const c = this.cached;
    if (c && c.version === this.catalog.version && c.builtins === this.builtins.size) return c;
    return (this.cached = { version: this.catalog.version, builtins: this.builtins.size, summaries: new Map() });
  }

  /** Every function, sorted by id. Shared between callers until the catalog changes: read it, never
   * modify it (filter or slice instead). */
  functionSummaries(includeInternal: boolean): FunctionSummary[] {
    const c = this.current();
    let out = c.summaries.get(includeInternal);
    if (!out) c.summaries.set(includeInternal, (out = this.buildSummaries(includeInternal)));
    return out;
  }

  private buildSummaries(includeInternal: boolean): FunctionSummary[] {
    const out: FunctionSummary[] = [];
    for (const b of this.builtins.values()) {
      if (!includeInternal && b.internal) continue;
      const s: FunctionSummary = { function_id: b.id, worker_name: b.id.split("::")[0] ?? b.id, description: b.description };
      const metadata = this.builtinMetadata(b.id);
      if (metadata) s.metadata = metadata;
      out.push(s);
    }
    for (const f of this.catalog.functions.values()) {
      if (!includeInternal && this.isInternal(f.id, f.metadata)) continue;
      const s: FunctionSummary = { function_id: f.id, worker_name: this.functionOwnerName(f) };
      if (f.description !== undefined) s.description = f.description;
      if (f.metadata !== undefined) s.metadata = f.metadata;
      out.push(s);
    }
    return out.sort((a, b) => (a.function_id < b.function_id ? -1 : a.function_id > b.function_id ? 1 : 0));
  }

  /** Every function id, built-in or registered: what `engine::functions-available` compares. */
  functionsSignature(): string {
    const c = this.current();
    return (c.signature ??= [...this.builtins.keys(), ...this.catalog.functions.keys()].sort().join("\n"));
  }

  /** Every function id, built-in or registered (what a delta of `functions_changed` is against). */
  functionIds(): ReadonlySet<string> {
    return new Set([...this.builtins.keys(), ...this.catalog.functions.keys()]);
  }

  /** What changed from `before` to `now` (two results of functionIds): the summaries of the
   * functions added, the ids of those removed. */
  functionsDelta(before: ReadonlySet<string>, now: ReadonlySet<string>): { added: FunctionSummary[]; removed: string[] } {
    const added = this.functionSummaries(true).filter((f) => !before.has(f.function_id));
    const removed: string[] = [];
    for (const id of before) if (!now.has(id)) removed.push(id);
    return { added, removed: removed.sort() };
  }

  /** Who made a binding and whether it outlives its maker's connections (what a function's owner
   * reads to find bindings to its function it did not make). */
  madeBy(t: TriggerRecord): { made_by: string | null; durable: boolean } {
    if (t.owner === null) return { made_by: t.principal ?? null, durable: t.durable !== false };
    // A connection's binding ends with the connection; an edge host's lasts as its manifest says.
    if (t.owner.startsWith("edge:")) return { made_by: null, durable: true };
    return { made_by: this.catalog.workers.get(t.owner)?.grant?.sub ?? OPEN_GRANT.sub, durable: false };
  }

  /** Every binding as engine::registered-triggers::list lists it, sorted by id. Shared until the
   * catalog changes: read it, never modify it. */
  triggerEntries(): RegisteredTriggerEntry[] {
    const c = this.cachedTriggers;
    if (c && c.version === this.catalog.version && c.triggers === this.catalog.triggersVersion) return c.entries;
    const entries = [...this.catalog.triggers.values()]
      .map(
        (t): RegisteredTriggerEntry => ({
          id: t.id,
          trigger_type: t.trigger_type,
          function_id: t.function_id,
          worker_name: t.owner ? this.workerName(t.owner) : "engine",
          config: t.config,
          config_summary: JSON.stringify(t.config ?? null).slice(0, 120),
          status: t.status,
          ...this.madeBy(t),
        }),
      )
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    this.cachedTriggers = { version: this.catalog.version, triggers: this.catalog.triggersVersion, entries };
    return entries;
  }

  /** The bindings of worker-facing types: what `engine::triggers-available` sends in full. */
  visibleTriggerEntries(): RegisteredTriggerEntry[] {
    return this.triggerEntries().filter((t) => !isInternalTriggerType(t.trigger_type));
  }

  /** Each listed binding's identity by id: what `engine::triggers-available` compares, and what a
   * delta of `triggers_changed` is against. */
  triggerIdentities(): ReadonlyMap<string, string> {
    const out = new Map<string, string>();
    for (const t of this.catalog.triggers.values()) if (!isInternalTriggerType(t.trigger_type)) out.set(t.id, bindingIdentity(t));
    return out;
  }

  /** The bindings whose identity is new since `before` (new ids, or ids bound anew), the ids gone. */
  triggersDelta(
    before: ReadonlyMap<string, string>,
    now: ReadonlyMap<string, string>,
  ): { added: RegisteredTriggerEntry[]; removed: string[] } {
    const added = this.visibleTriggerEntries().filter((t) => before.get(t.id) !== bindingIdentity(t));
    const removed: string[] = [];
    for (const id of before.keys()) if (!now.has(id)) removed.push(id);
    return { added, removed: removed.sort() };
  }

  builtin(id: string): BuiltinFunction | undefined {
    return this.builtins.get(id);
  }

  builtinTriggerTypes(): Iterable<BuiltinTriggerType> {
    return this.triggerTypes.values();
  }

  activeInvocations(workerId: string): number {
    return this.openCalls(workerId);
  }
}
