// What a feature of the engine (a built-in, a trigger type, a queue backend, channels) may use of
// it: `EngineApi`, and the shapes it is extended with. Features are typed against this, never the
// concrete EngineCore, so what they can reach is exactly what is listed here. In particular the
// catalog is read-only from here: a feature changes registrations only through the
// ownership-checked `registerTrigger` / `mayRemoveTrigger` / `removeTrigger`.
import type { ErrorBody, Grant, RegisterTrigger, RegisteredTriggerEntry } from "@iii-edge/protocol";
import type { FunctionRecord, HoldingKind, TriggerRecord, TriggerTypeRecord, WorkerRecord } from "./catalog.ts";
import type { CallOutcome, EnginePorts } from "./ports.ts";
import type { Telemetry } from "./telemetry/telemetry.ts";

/** What a built-in function receives besides its input. */
export interface CallContext {
  invocationId: string;
  callerWorkerId?: string;
  /** The caller's permissions (OPEN_GRANT for the engine itself and trusted edge code). */
  grant: Grant;
  /** Whose quotas the call spends (the grant's `sub`, or a trigger binding's maker); absent for
   * trusted callers (the engine itself, edge hosts), which no per-principal quota applies to. */
  principal?: string;
  metadata?: unknown;
  traceparent?: string;
  baggage?: string;
}
export type BuiltinHandler = (data: unknown, ctx: CallContext) => unknown;
export interface BuiltinFunction {
  id: string;
  description: string;
  handler: BuiltinHandler;
  request_format?: unknown;
  response_format?: unknown;
  /** Hidden from default listings (iii: ids under `engine::`). */
  internal?: boolean;
}

/** A trigger type the engine itself provides (state, cron, http, …). */
export interface BuiltinTriggerType {
  id: string;
  description: string;
  /** Check a binding's config; return an error message (or a typed error, e.g. forbidden for a
   * route another worker holds) to refuse it, or nothing to accept. */
  validate(config: unknown, binding: TriggerRecord): string | ErrorBody | undefined;
  /** The listing function a type pushes (discovery): a binding's maker must be allowed to call it,
   * or it would be told by push what it may not read by pull. */
  listing?: string;
  /** Called after an accepted binding is stored (also for bindings restored on wake). */
  added?(binding: TriggerRecord): void;
  /** Called after a binding is removed. */
  removed?(binding: TriggerRecord): void;
}

/** Something that needs the object's alarm: the core multiplexes them on the one alarm. */
export interface AlarmClient {
  /** Earliest time (ms) this client needs to run, or null. */
  nextDue(): number | null;
  run(now: number): Promise<void>;
}

/** A routed call's way back to its caller, as stored for calls that outlive PERSIST_AFTER_MS. */
export interface SocketRoute {
  caller: string;
  traceparent?: string;
  baggage?: string;
}

export interface CallRequest {
  /** For a call from a worker socket: answer it even if the object is evicted meanwhile. */
  route?: SocketRoute;
  function_id: string;
  data: unknown;
  metadata?: unknown;
  traceparent?: string;
  baggage?: string;
  timeoutMs?: number;
  invocationId?: string;
  callerWorkerId?: string;
  /** Whose permissions the call runs with; absent for the engine's own calls (trigger fires). */
  grant?: Grant;
  /** Counted against MAX_OPEN_CALLS_PER_CALLER: a worker id or `http:<sub>`. */
  caller?: string;
  /** Counted against MAX_OPEN_CALLS_PER_PRINCIPAL: the grant's `sub` unless set (a trigger fire
   * names the binding's maker). Neither: a trusted call, which may use TRUSTED_OPEN_CALLS_RESERVE. */
  principal?: string;
}

export interface EnqueueRequest {
  queue: string;
  function_id: string;
  data: unknown;
  /** Who enqueues (a grant's `sub`); absent for trusted callers (the engine, edge hosts). An owned
   * queue (queues/config.ts `consumers`) takes messages only from its owner. */
  principal?: string;
  idempotency_key?: string;
  traceparent?: string;
  baggage?: string;
}
/** The `enqueue` action's provider (queues/). */
export interface QueueProvider {
  enqueue(req: EnqueueRequest): Promise<CallOutcome>;
}

/** The catalog as features see it: read-only (Catalog implements it). */
export interface CatalogView {
  readonly functions: ReadonlyMap<string, FunctionRecord>;
  readonly triggerTypes: ReadonlyMap<string, TriggerTypeRecord>;
  readonly triggers: ReadonlyMap<string, TriggerRecord>;
  readonly workers: ReadonlyMap<string, WorkerRecord>;
  countOwnedBy(owner: string, kind?: HoldingKind): number;
  triggersOfType(type: string): TriggerRecord[];
}

/** One entry of `engine::functions::list` (and of the `functions_changed` event). */
export interface FunctionSummary {
  function_id: string;
  worker_name: string;
  description?: string;
  metadata?: Record<string, unknown>;
}

/** What the `engine::*` listings read besides the catalog (introspection.ts). */
export interface EngineIntrospection {
  /** A worker's reported name (else its id); an `edge:<host>` owner's host name. */
  workerName(ownerOrId: string): string;
  functionOwnerName(f: FunctionRecord): string;
  /** protocol's `served_by`: "engine", "deployment", or the registering connection's principal. */
  servedBy(id: string): string | undefined;
  /** A built-in's listed metadata (the kernel mark unless a model may call it). */
  builtinMetadata(id: string): Record<string, unknown> | undefined;
  /** Built-ins and registered functions, by id; internal ones only when asked for. */
  functionSummaries(includeInternal: boolean): FunctionSummary[];
  /** Every trigger binding as engine::registered-triggers::list lists it, by id. */
  triggerEntries(): RegisteredTriggerEntry[];
  builtin(id: string): BuiltinFunction | undefined;
  builtinTriggerTypes(): Iterable<BuiltinTriggerType>;
  /** Calls routed to the worker and not yet answered. */
  activeInvocations(workerId: string): number;
}

/** Extending the engine, while it is installed (install.ts). */
export interface EngineExtensions {
  addBuiltin(fn: BuiltinFunction): void;
  addTriggerType(t: BuiltinTriggerType): void;
  addAlarmClient(c: AlarmClient): void;
  setQueueProvider(q: QueueProvider): void;
  /** An alarm client's nextDue() moved earlier: re-arm the object's one alarm. */
  rearmAlarm(): void;
}

/** How a binding is fired (EngineCalls.fire). */
export interface FireOptions {
  /** Pass the binding's metadata (default true). */
  withMetadata?: boolean;
  timeoutMs?: number;
  /** The invocation id of the bound function's call (a durable fire's delivery id, the same on
   * every attempt); the condition function always gets a fresh one. */
  invocationId?: string;
  /** The trace context of what caused the fire (§4.8), for the condition and the function. */
  traceparent?: string;
  baggage?: string;
  /** A condition that fails (throws, is missing, times out) skips the fire (§8, the default), or
   * fails it (durable fires: the failure is retried like the function's own). */
  conditionErrors?: "skip" | "fail";
}

/** Calling functions and firing bindings. */
export interface EngineCalls {
  /** Call a function, wherever it lives. Always settles: result, error, or `timeout`. */
  invoke(req: CallRequest): Promise<CallOutcome>;
  /** Fire a binding: its condition first, then its function (with its metadata unless told not to). */
  fire(binding: TriggerRecord, payload: unknown, opts?: FireOptions): Promise<CallOutcome | "skipped">;
  functionExists(id: string): boolean;
}

/** Trigger bindings, with the engine's ownership rules. */
export interface EngineBindings {
  activeBindings(type: string): TriggerRecord[];
  /** Bind a function to a trigger type; the error if refused (also sent to a connected owner). */
  registerTrigger(
    owner: string | null,
    f: Pick<RegisterTrigger, "id" | "trigger_type" | "function_id" | "config" | "metadata">,
    grant?: Grant,
  ): ErrorBody | undefined;
  /** forbidden, or nothing when `workerId`/`grant` may remove or replace the binding (its maker). */
  mayRemoveTrigger(t: TriggerRecord, workerId: string | null, grant: Grant): ErrorBody | undefined;
  /** forbidden, or nothing when `workerId`/`grant` may remove the binding: its maker, the owner of
   * the function it calls, or trusted code (no grant, no connection). */
  mayUnbind(t: TriggerRecord, workerId: string | null, grant: Grant): ErrorBody | undefined;
  /** Remove a binding (its provider told); callers check mayRemoveTrigger first. */
  removeTrigger(id: string, opts?: { keepProviderQuiet?: boolean }): boolean;
}

export interface EngineApi extends EngineExtensions, EngineCalls, EngineBindings {
  readonly ports: EnginePorts;
  /** Spans of each hop (telemetry/hops.ts), the trace store and the engine's metrics. */
  readonly telemetry: Telemetry;
  readonly catalog: CatalogView;
  readonly introspection: EngineIntrospection;
  /** Is this worker connection live (an owner that still holds what it registered)? */
  isConnected(workerId: string): boolean;
  /** engine::workers::register: store what the worker says about itself. */
  describeWorker(workerId: string, info: Record<string, unknown>): void;
  /** Reload the manifests of Worker-hosted functions (edge-hosts.ts). */
  refreshEdgeHosts(): Promise<void>;
}
