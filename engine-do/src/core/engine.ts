// The engine core: connections, the catalog's ownership rules (who may register, replace and remove
// functions, trigger types and bindings; grants; reattach; cleanup), frame dispatch, and the
// composition of its parts, as plain TypeScript over the ports of ./ports.ts. No `cloudflare:*`
// import here. The parts: invocations.ts (open calls, deadlines, bounds, eviction persistence),
// admission.ts (connection counts, frame budgets), edge-hosts.ts (Worker-hosted functions),
// introspection.ts (what the engine::* listings read). Features see the engine as EngineApi (api.ts).
import {
  CALLER_PRINCIPAL_KEY,
  DEFAULT_INVOKE_TIMEOUT_MS,
  IIIError,
  MAX_FRAME_BYTES,
  MAX_REGISTRATIONS_PER_WORKER,
  MAX_WORKER_TEXT,
  OPEN_GRANT,
  TRIGGER_TYPES,
  callerPrincipalIn,
  mayBind,
  mayBindDurably,
  mayCall,
  mayRegister,
  mayUseNamespace,
  type Grant,
  parseWorkerFrame,
  principalOf,
  rbacMayCall,
  seesAllSessions,
  peekResultId,
  toErrorBody,
  type EngineFrame,
  type ErrorBody,
  type InvokeFunction,
  type RegisterFunction,
  type RegisterTrigger,
  type RbacSession,
  type TriggerAction,
  type WorkerFrame,
  isRecord,
} from "@iii-edge/protocol";
import { AdmissionControl } from "./admission.ts";
import { migrate } from "./schema.ts";
import type {
  AlarmClient,
  BuiltinFunction,
  BuiltinTriggerType,
  CallContext,
  CallRequest,
  EngineApi,
  EnqueueRequest,
  FireOptions,
  QueueProvider,
} from "./api.ts";
import { MAX_REGISTRATIONS_PER_PRINCIPAL, type OpenCallLimits } from "./bounds.ts";
import { Catalog, type FunctionRecord, type TriggerRecord } from "./catalog.ts";
import { EdgeHostSync } from "./edge-hosts.ts";
import { callKey, keyedDeclarationProblem } from "./keyed.ts";
import { Introspection } from "./introspection.ts";
import { invokeFrame, sendResult, stampCaller, withoutClaimedPrincipal } from "./call-table.ts";
import { Invocations } from "./invocations.ts";
import { RbacConnections } from "./rbac.ts";
import type { CallOutcome, Conn, EnginePorts, TraceContext } from "./ports.ts";
import { traceOf } from "./trace.ts";
import { discoverySpan, endEnqueue, endFire, enqueueSpan, fireSpan, invokeSpan, remoteSpan, type InvokeTarget } from "./telemetry/hops.ts";
import { Telemetry, type TelemetryOptions } from "./telemetry/telemetry.ts";

/** What a deployment may tune in the core (the Engine object reads it from its vars). */
export interface EngineOptions {
  /** The deadline of a call that names none (`timeout_ms` absent): DEFAULT_INVOKE_TIMEOUT_MS
   * unless lowered or raised here (tests shorten it to show which deadline a delivery runs under). */
  defaultInvokeTimeoutMs?: number;
  /** Spans, their store and export (telemetry/); absent, tracing is off (plain core tests). */
  telemetry?: TelemetryOptions;
  /** The open-call bounds (bounds.ts openCallLimits); absent, DEFAULT_OPEN_CALL_LIMITS. */
  openCalls?: OpenCallLimits;
}

/** Characters iii strips from worker names/descriptions: C0/C1 controls and bidi overrides. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const UNSAFE_TEXT = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
const sanitize = (v: unknown, max = MAX_WORKER_TEXT): string | undefined =>
  typeof v === "string" ? v.replace(UNSAFE_TEXT, "").slice(0, max) : undefined;

/** Built-ins every connection may call whatever its grant says: they only touch the caller itself
 * (iii-sdk describes itself with engine::workers::register right after connecting). */
const SELF_FUNCTIONS = new Set(["engine::workers::register"]);

/** How long a burst of catalog changes is coalesced before `engine::functions-available` and
 * `engine::triggers-available` fire (one window for both). */
export const FUNCTIONS_CHANGED_DEBOUNCE_MS = 10;

/** Do two results of Introspection.triggerIdentities list the same bindings? */
function sameIdentities(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>): boolean {
  if (a.size !== b.size) return false;
  for (const [id, identity] of a) if (b.get(id) !== identity) return false;
  return true;
}

/** A binding's condition function (§8), if its config names one. */
const conditionOf = (b: TriggerRecord): string | undefined =>
  isRecord(b.config) && typeof b.config.condition_function_id === "string" ? b.config.condition_function_id : undefined;

/** Does a discovery binding ask for only what changed ({delta: true}, an iii-edge extension)? */
const wantsDelta = (b: TriggerRecord): boolean => isRecord(b.config) && b.config.delta === true;

/** An engine-held binding that ends with its maker's last connection (made without durable_bindings). */
const endsWithMaker = (t: TriggerRecord): t is TriggerRecord & { principal: string } =>
  t.owner === null && t.durable === false && t.principal !== undefined;
/** Registration metadata a function sets to be told who calls it (`_caller_principal` in its
 * payload): the functions that check ownership, such as an agent session's. Other functions'
 * payloads stay as the caller sent them. */
export const CALLER_PRINCIPAL_METADATA = "caller_principal";

export class EngineCore implements EngineApi {
  readonly ports: EnginePorts;
  readonly catalog: Catalog;
  readonly builtins = new Map<string, BuiltinFunction>();
  readonly triggerTypes = new Map<string, BuiltinTriggerType>();
  readonly conns = new Map<string, Conn>();
  /** Open calls: routing table, deadlines, bounds, eviction persistence. */
  private readonly invocations: Invocations;
  /** Connection counts and each connection's frame budget. */
  private readonly admission: AdmissionControl;
  private readonly edgeSync: EdgeHostSync;
  readonly introspection: Introspection;
  /** Connections of iii's RBAC listener and their sessions (rbac.ts). */
  readonly rbac: RbacConnections;
  private readonly alarmClients: AlarmClient[] = [];
  private queueProvider: QueueProvider | undefined;
  private functionsTimer: unknown = null;
  private lastFunctionsSignature: string | undefined;
  /** The function ids as of the last `functions_changed` (what a delta subscriber's added/removed is against). */
  private lastFunctionIds: ReadonlySet<string> = new Set();
  /** The listed bindings as of the last `triggers_changed` (what its delta is against). */
  private lastTriggerIdentities: ReadonlyMap<string, string> = new Map();

  /** The deadline of a call without `timeout_ms` (EngineOptions). */
  readonly defaultInvokeTimeoutMs: number;
  /** Spans of every hop, the trace store, export and metrics (telemetry/telemetry.ts). */
  readonly telemetry: Telemetry;

  constructor(ports: EnginePorts, opts: EngineOptions = {}) {
    this.ports = ports;
    this.defaultInvokeTimeoutMs = opts.defaultInvokeTimeoutMs ?? DEFAULT_INVOKE_TIMEOUT_MS;
    this.telemetry = new Telemetry(ports, opts.telemetry ?? { vars: { TRACING: "off" } });
    // Before any feature reads a table: the schema is brought to the current version here, once.
    migrate(ports.sql);
    this.catalog = new Catalog(ports.sql);
    this.catalog.onTriggersChanged = () => this.discoveryMaybeChanged();
    this.invocations = new Invocations(ports, () => this.rearmAlarm(), opts.openCalls);
    // Persisted calls' deadlines: the first alarm client.
    this.addAlarmClient(this.invocations);
    this.admission = new AdmissionControl(ports, this.catalog.workers);
    this.edgeSync = new EdgeHostSync(ports, this);
    this.introspection = new Introspection(this.catalog, this.builtins, this.triggerTypes, (workerId) =>
      this.invocations.activeFor(workerId),
    );
    this.rbac = new RbacConnections(ports);
    this.rbac.attach({
      handle: (conn, f) => this.handleFrame(conn, f),
      invoke: (req) => this.invoke(req),
      reply: (conn, id, functionId, outcome) => this.reply(conn, id, functionId, outcome),
      isConnected: (workerId) => this.conns.has(workerId),
      grantOf: (workerId) => this.grantOf(workerId),
      isBuiltin: (id) => this.builtins.has(id),
      functionOf: (id) => this.catalog.functions.get(id),
    });
    // A function registered under a prefixed or rewritten id is called by the id its worker knows.
    this.invocations.wireName = (fn) => this.rbac.wireName(fn.id, fn.owner);
  }

  // ---------------------------------------------------------------- extension points

  addBuiltin(fn: BuiltinFunction): void {
    this.builtins.set(fn.id, fn);
  }
  addTriggerType(t: BuiltinTriggerType): void {
    this.triggerTypes.set(t.id, t);
  }
  addAlarmClient(c: AlarmClient): void {
    this.alarmClients.push(c);
  }
  setQueueProvider(q: QueueProvider): void {
    this.queueProvider = q;
  }

  /**
   * Finish start-up once every extension is added: re-announce stored bindings of built-in trigger
   * types to their provider, drop what belonged to connections that no longer exist (a restart or
   * redeploy drops every socket without a close event), and arm the alarm.
   */
  start(liveConns: Conn[]): void {
    for (const c of liveConns) {
      this.conns.set(c.workerId, c);
      this.admission.connected(c.workerId);
    }
    for (const t of this.catalog.triggers.values()) {
      const provider = this.triggerTypes.get(t.trigger_type);
      if (provider && t.status === "active") provider.added?.(t);
    }
    for (const workerId of [...this.catalog.workers.keys()]) {
      if (!this.conns.has(workerId)) this.cleanup(workerId);
    }
    // Bindings that were to end with their maker's connections, whose maker has none left (its
    // worker rows may have gone before them, e.g. in a restart between two writes).
    const makers = new Set<string>();
    for (const t of this.catalog.triggers.values()) if (endsWithMaker(t)) makers.add(t.principal);
    for (const sub of makers) this.endBindingsOfDeparted(sub);
    // Functions or bindings whose owner vanished without a worker row (defensive).
    for (const f of [...this.catalog.functions.values()]) {
      if (f.kind !== "edge" && !this.conns.has(f.owner)) this.catalog.deleteFunction(f.id, f.owner);
    }
    this.rbac.retain((workerId) => this.conns.has(workerId));
    this.invocations.restore(this.conns, (conn, id, functionId, outcome, trace) => this.reply(conn, id, functionId, outcome, trace));
    this.lastFunctionsSignature = this.introspection.functionsSignature();
    this.lastFunctionIds = this.introspection.functionIds();
    this.lastTriggerIdentities = this.introspection.triggerIdentities();
    this.rearmAlarm();
    if (Object.keys(this.ports.edgeHosts).length > 0) this.refreshEdgeHosts().catch(() => {});
  }

  // ---------------------------------------------------------------- connections

  /** A new socket: give it an identity and announce it (protocol/README.md §2.5). */
  connect(conn: Conn, token: string, who: { grant?: Grant; ip?: string; rbac?: RbacSession } = {}): void {
    this.conns.set(conn.workerId, conn);
    if (who.rbac) this.rbac.open(conn.workerId, who.rbac);
    const w: { worker_id: string; token: string; connected_at: number; info: Record<string, unknown>; grant?: Grant; ip?: string } = {
      worker_id: conn.workerId,
      token,
      connected_at: this.ports.clock.now(),
      info: {},
    };
    if (who.grant) w.grant = who.grant;
    if (who.ip) w.ip = who.ip;
    this.catalog.putWorker(w);
    this.admission.connected(conn.workerId);
    conn.send({ type: "workerregistered", worker_id: conn.workerId, reattach_token: token });
    this.fireWorkersChanged("worker_connected", conn.workerId);
  }

  /** The socket closed or errored: clean up in the order of protocol/README.md §2.5,
   * ownership-checked. */
  disconnect(workerId: string): void {
    if (!this.catalog.workers.has(workerId) && !this.conns.has(workerId)) return;
    this.conns.delete(workerId);
    this.cleanup(workerId);
  }

  /** May one more connection of `grant` from `ip` be accepted? (admission.ts) */
  admitConnection(grant: Grant, ip: string | undefined, limits: { perPrincipal?: number; perIp?: number } = {}): ErrorBody | undefined {
    return this.admission.admitConnection(grant, ip, limits);
  }

  isConnected(workerId: string): boolean {
    return this.conns.has(workerId);
  }

  /** What a connection may do. Rows from before auth existed ran open. */
  grantOf(workerId: string): Grant {
    return this.catalog.workers.get(workerId)?.grant ?? OPEN_GRANT;
  }

  private cleanup(workerId: string): void {
    // Read before its row is deleted: whose bindings may end with this connection.
    const principal = this.grantOf(workerId).sub;
    this.admission.released(workerId);
    this.rbac.close(workerId);
    this.conns.delete(workerId);
    const { catalog } = this;
    catalog.transaction(() => {
      // 1–2. functions (worker-hosted and HTTP-invoked) this connection still owns
      for (const f of [...catalog.functions.values()]) if (f.owner === workerId) catalog.deleteFunction(f.id, workerId);
    });
    // 3. in-flight invocations that target it
    this.invocations.targetGone(workerId);
    catalog.transaction(() => {
      // 4. its triggers (providers told), parked ones dropped
      for (const t of [...catalog.triggers.values()]) if (t.owner === workerId) this.removeTrigger(t.id);
      // …and the engine-held ones its principal made to last only while it is connected, if this
      // was the principal's last connection here
      this.endBindingsOfDeparted(principal);
      // 5. trigger types it provided: their bindings are parked until a provider returns
      for (const tt of [...catalog.triggerTypes.values()]) {
        if (tt.owner !== workerId) continue;
        catalog.deleteTriggerType(tt.id, workerId);
        for (const b of catalog.triggersOfType(tt.id)) catalog.setTriggerStatus(b.id, "parked");
      }
      catalog.deleteWorker(workerId);
    });
    this.functionsMaybeChanged();
    this.fireWorkersChanged("worker_disconnected", workerId);
  }

  // ---------------------------------------------------------------- frames

  message(conn: Conn, raw: string | ArrayBuffer): void {
    // The budget first, before the frame is decoded or parsed (socket-budget.ts).
    if (!this.admission.admit(conn, raw)) {
      // A dropped answer still ends its call now (every caller gets an answer), not at the deadline.
      const answered = peekResultId(raw);
      if (answered)
        this.invocations.answer(conn.workerId, answered, {
          ok: false,
          error: { code: "rate_limited", message: "the worker's answer was dropped: its connection is over its frame budget" },
        });
      return;
    }
    if (typeof raw !== "string") {
      // Telemetry prefixes on the control socket are accepted as on /otel (§11): stored, exported.
      const head = new TextDecoder().decode(new Uint8Array(raw, 0, Math.min(4, raw.byteLength)));
      if (head === "OTLP" || head === "MTRC" || head === "LOGS") {
        this.telemetry.ingest(raw);
        return;
      }
    }
    const parsed = parseWorkerFrame(raw);
    if (!parsed.ok) {
      if (parsed.ignore) {
        if (parsed.error.message !== "empty frame") this.admission.ignored(conn, parsed.error.message);
        return;
      }
      if (parsed.error.code === "frame_too_large") {
        // A result too large to read still ends its call now, with the code the caller would get
        // had the engine been the one to refuse it, not at the deadline: its invocation id sits in
        // the frame's envelope, read without parsing the rest (only from the worker it was sent to).
        const answered = peekResultId(raw);
        if (answered) {
          this.admission.refuse(conn, parsed.error);
          this.invocations.answer(conn.workerId, answered, {
            ok: false,
            error: { code: "result_too_large", message: `the worker's result is larger than ${MAX_FRAME_BYTES} bytes` },
          });
          return;
        }
      }
      if (parsed.frame_type === "invocationresult") {
        // A malformed result from the target still ends its call now, not at the deadline.
        this.admission.refuse(conn, parsed.error);
        // (Only from the worker the call was sent to.)
        if (parsed.invocation_id)
          this.invocations.answer(conn.workerId, parsed.invocation_id, {
            ok: false,
            error: { code: "invocation_failed", message: `the worker sent an invalid result: ${parsed.error.message}` },
          });
        return;
      }
      // Only a call expects an invocationresult back (echoing one for any other frame type
      // would answer the sender's own pending calls).
      this.admission.refuse(
        conn,
        parsed.error,
        parsed.frame_type === "invokefunction" ? parsed.invocation_id : undefined,
        parsed.function_id,
      );
      return;
    }
    try {
      this.handle(conn, parsed.frame);
    } catch (e) {
      // A frame must never take the engine down; the sender learns what went wrong.
      this.admission.refuse(conn, toErrorBody(e, "invalid_frame"));
    }
  }

  private handle(conn: Conn, f: WorkerFrame): void {
    // A connection of iii's RBAC listener: its session decides first (rbac.ts).
    if (this.rbac.takes(conn, f)) return;
    this.handleFrame(conn, f);
  }

  private handleFrame(conn: Conn, f: WorkerFrame): void {
    switch (f.type) {
      case "registerfunction":
        return this.registerFunction(conn, f);
      case "unregisterfunction":
        if (this.catalog.deleteFunction(f.id, conn.workerId)) this.functionsMaybeChanged();
        return;
      case "registertriggertype":
        return this.registerTriggerType(conn, f.id, f.description, f.trigger_request_format, f.call_request_format);
      case "unregistertriggertype": {
        if (!this.catalog.deleteTriggerType(f.id, conn.workerId)) return;
        for (const b of this.catalog.triggersOfType(f.id)) this.catalog.setTriggerStatus(b.id, "parked");
        return;
      }
      case "registertrigger":
        this.registerTrigger(conn.workerId, f, this.grantOf(conn.workerId));
        return;
      case "unregistertrigger": {
        const t = this.catalog.triggers.get(f.id);
        if (!t) return;
        const refused = this.mayUnbind(t, conn.workerId, this.grantOf(conn.workerId));
        if (refused) {
          conn.send({ type: "error", error: refused });
          return;
        }
        this.removeTrigger(f.id);
        return;
      }
      case "triggerregistrationresult": {
        const tt = this.catalog.triggerTypes.get(f.trigger_type);
        // Only the current provider of the type may report on its bindings (anti-spoofing).
        if (!tt || tt.owner !== conn.workerId || !f.error) return;
        const t = this.catalog.triggers.get(f.id);
        // …and only on bindings of its own type (found by the fuzz: any provider could park any binding).
        if (!t || t.trigger_type !== f.trigger_type) return;
        this.catalog.setTriggerStatus(t.id, "parked");
        if (t.owner)
          this.conns.get(t.owner)?.send({
            type: "triggerregistrationresult",
            id: t.id,
            trigger_type: t.trigger_type,
            function_id: t.function_id,
            error: f.error,
          });
        return;
      }
      case "invokefunction":
        return this.onInvoke(conn, f);
      case "invocationresult":
        // Results are accepted only from the worker the call was sent to.
        this.invocations.answer(
          conn.workerId,
          f.invocation_id,
          f.error ? { ok: false, error: f.error } : { ok: true, result: f.result ?? undefined },
        );
        return;
      case "reattach":
        return this.reattach(conn, f.previous_worker_id, f.reattach_token);
      case "ping":
        conn.send({ type: "pong" });
        return;
      case "pong":
      case "registerservice":
      case "workerregistered":
        return;
    }
  }

  private reattach(conn: Conn, previous: string, token: string | undefined): void {
    if (previous === conn.workerId) return;
    const old = this.catalog.workers.get(previous);
    if (!old || !token || old.token !== token) return;
    // The successor must be the same principal: a reattach token alone does not carry identity.
    if ((old.grant ?? OPEN_GRANT).sub !== this.grantOf(conn.workerId).sub) return;
    const oldConn = this.conns.get(previous);
    this.cleanup(previous);
    oldConn?.close(4000, "replaced by a reattached connection");
  }

  /** Does `sub` hold a live connection to this namespace? (Only asked when it made bindings that
   * end with it, so the walk over the connections is not paid on every disconnect.) */
  private principalConnected(sub: string): boolean {
    for (const id of this.conns.keys()) if (this.grantOf(id).sub === sub) return true;
    return false;
  }

  /** End the bindings `sub` made without durable_bindings, if it has no connection left. */
  private endBindingsOfDeparted(sub: string): void {
    let made: string[] | undefined;
    for (const t of this.catalog.triggers.values()) if (endsWithMaker(t) && t.principal === sub) (made ??= []).push(t.id);
    if (!made || this.principalConnected(sub)) return;
    this.ports.log.info("bindings ended with their maker's last connection", { principal: sub, triggers: made.length });
    for (const id of made) this.removeTrigger(id);
  }

  private checkQuota(conn: Conn): boolean {
    const forbid = (message: string) => {
      conn.send({ type: "error", error: { code: "forbidden", message } });
      return false;
    };
    if (this.catalog.countOwnedBy(conn.workerId) >= MAX_REGISTRATIONS_PER_WORKER)
      return forbid(`a worker may hold at most ${MAX_REGISTRATIONS_PER_WORKER} registrations`);
    const g = this.grantOf(conn.workerId);
    if (g !== OPEN_GRANT && this.catalog.countByPrincipal(g.sub) >= MAX_REGISTRATIONS_PER_PRINCIPAL) {
      return forbid(`'${g.sub}' may hold at most ${MAX_REGISTRATIONS_PER_PRINCIPAL} registrations in this namespace`);
    }
    return true;
  }

  /** forbidden, or nothing when the connection may register the id (a function or trigger type). */
  private mayRegisterId(conn: Conn, kind: "function" | "trigger type", id: string, heldBy: string | undefined): ErrorBody | undefined {
    const g = this.grantOf(conn.workerId);
    if (!mayRegister(g, id))
      return {
        code: "forbidden",
        message: `'${g.sub}' may not register ${kind} ${id} (allowed prefixes: ${g.register?.join(", ") || "none"})`,
      };
    // Ownership, not last-writer-wins: a live holder keeps its id until it disconnects.
    if (heldBy !== undefined && heldBy !== conn.workerId && (heldBy.startsWith("edge:") || this.conns.has(heldBy))) {
      return { code: "forbidden", message: `${kind} ${id} is registered by another worker` };
    }
    return undefined;
  }

  private registerFunction(conn: Conn, f: RegisterFunction): void {
    if (this.builtins.has(f.id)) {
      conn.send({ type: "error", error: { code: "forbidden", message: `function id ${f.id} is reserved by the engine` } });
      return;
    }
    const existing = this.catalog.functions.get(f.id);
    const refused = this.mayRegisterId(
      conn,
      "function",
      f.id,
      existing ? (existing.kind === "edge" ? `edge:${existing.owner}` : existing.owner) : undefined,
    );
    if (refused) {
      conn.send({ type: "error", error: refused });
      return;
    }
    if (existing?.owner !== conn.workerId && !this.checkQuota(conn)) return;
    const keyed = keyedDeclarationProblem(f.metadata);
    if (keyed) {
      conn.send({ type: "error", error: { code: "invalid_arguments", message: `${f.id}: ${keyed}` } });
      return;
    }
    if (f.invocation) {
      const check = this.ports.httpFunctions?.validate(f.invocation) ?? {
        ok: false as const,
        message: "HTTP-invoked functions are not enabled",
      };
      if (!check.ok) {
        conn.send({ type: "error", error: { code: "url_validation_failed", message: `${f.id}: ${check.message}` } });
        return;
      }
    }
    const rec: FunctionRecord = { id: f.id, kind: f.invocation ? "http" : "worker", owner: conn.workerId };
    if (f.description !== undefined) rec.description = f.description;
    if (f.request_format !== undefined) rec.request_format = f.request_format;
    if (f.response_format !== undefined) rec.response_format = f.response_format;
    if (f.metadata !== undefined) rec.metadata = f.metadata;
    if (f.invocation) rec.invocation = f.invocation;
    this.catalog.putFunction(rec);
    this.functionsMaybeChanged();
  }

  private registerTriggerType(conn: Conn, id: string, description?: string, trf?: unknown, crf?: unknown): void {
    if (this.triggerTypes.has(id)) {
      conn.send({ type: "error", error: { code: "forbidden", message: `trigger type ${id} is provided by the engine` } });
      return;
    }
    const existing = this.catalog.triggerTypes.get(id);
    const refused = this.mayRegisterId(conn, "trigger type", id, existing?.owner);
    if (refused) {
      conn.send({ type: "error", error: refused });
      return;
    }
    if (existing?.owner !== conn.workerId && !this.checkQuota(conn)) return;
    this.catalog.putTriggerType({ id, owner: conn.workerId, description, trigger_request_format: trf, call_request_format: crf });
    // Deliver every binding of this type to the (new) provider; parked ones whose owner is gone are dropped.
    for (const b of this.catalog.triggersOfType(id)) {
      if (b.owner !== null && !b.owner.startsWith("edge:") && !this.conns.has(b.owner)) {
        this.catalog.deleteTrigger(b.id);
        continue;
      }
      this.catalog.setTriggerStatus(b.id, "active");
      conn.send(this.triggerFrame(b));
    }
  }

  private triggerFrame(b: TriggerRecord): EngineFrame {
    const frame: EngineFrame = {
      type: "registertrigger",
      id: b.id,
      trigger_type: b.trigger_type,
      function_id: b.function_id,
      config: b.config ?? null,
    };
    if (b.metadata !== undefined) frame.metadata = b.metadata;
    return frame;
  }

  /**
   * Bind a function to a trigger type. Built-in types validate the config and refuse with
   * `trigger_registration_failed`; worker-provided types get the binding forwarded; unknown
   * types park it until a provider appears. Returns the error, if refused.
   */
  registerTrigger(
    owner: string | null,
    f: Pick<RegisterTrigger, "id" | "trigger_type" | "function_id" | "config" | "metadata">,
    grant?: Grant,
  ): ErrorBody | undefined {
    const ownerConn = owner ? this.conns.get(owner) : undefined;
    const refuse = (error: ErrorBody) => {
      ownerConn?.send({ type: "triggerregistrationresult", id: f.id, trigger_type: f.trigger_type, function_id: f.function_id, error });
      return error;
    };
    if (grant && !mayBind(grant, f.trigger_type))
      return refuse({ code: "forbidden", message: `'${grant.sub}' may not bind trigger type ${f.trigger_type}` });
    // A binding calls its function with the engine's hand: only for a function its maker may call.
    if (grant && !mayCall(grant, f.function_id))
      return refuse({ code: "forbidden", message: `'${grant.sub}' may not call ${f.function_id}, so it may not bind it` });
    const refusedListing = this.mayReadListing(f.trigger_type, owner, grant);
    if (refusedListing) return refuse(refusedListing);
    // An engine-held binding made without durable_bindings lasts while its maker is connected here:
    // a maker with no connection (an HTTP caller, a worker in another namespace) could never end it.
    const endsWithItsMaker = owner === null && grant !== undefined && !mayBindDurably(grant);
    if (endsWithItsMaker && !this.principalConnected(grant.sub)) {
      return refuse({
        code: "forbidden",
        message: `'${grant.sub}' has no connection to this namespace: without durable_bindings in its grant, a binding it makes lasts only while it is connected here`,
      });
    }
    const existing = this.catalog.triggers.get(f.id);
    if (existing) {
      // An engine-held binding belongs to its principal; a connection's or edge host's to it while it lives.
      const held =
        existing.owner === null
          ? this.mayRemoveTrigger(existing, null, grant ?? OPEN_GRANT)
          : existing.owner !== owner && (existing.owner.startsWith("edge:") || this.conns.has(existing.owner))
            ? { code: "forbidden", message: `trigger id ${f.id} is owned by another worker` }
            : undefined;
      if (held) return refuse(held);
    }
    if (ownerConn && existing?.owner !== owner && !this.checkQuota(ownerConn)) {
      return { code: "forbidden", message: "registration quota exceeded" };
    }
    const rec: TriggerRecord = {
      id: f.id,
      trigger_type: f.trigger_type,
      function_id: f.function_id,
      config: f.config ?? null,
      owner,
      status: "active",
    };
    if (f.metadata !== undefined) rec.metadata = f.metadata;
    if (grant) rec.principal = grant.sub;
    if (endsWithItsMaker) rec.durable = false;
    const builtin = this.triggerTypes.get(f.trigger_type);
    if (builtin) {
      const problem = builtin.validate(rec.config, rec);
      if (typeof problem === "string") return refuse({ code: "trigger_registration_failed", message: `${f.trigger_type}: ${problem}` });
      if (problem) return refuse(problem);
      if (existing) this.removeTrigger(existing.id);
      this.catalog.putTrigger(rec);
      builtin.added?.(rec);
      return undefined;
    }
    if (existing) this.removeTrigger(existing.id, { keepProviderQuiet: true });
    const provider = this.catalog.triggerTypes.get(f.trigger_type);
    const providerConn = provider ? this.conns.get(provider.owner) : undefined;
    if (!providerConn) rec.status = "parked";
    this.catalog.putTrigger(rec);
    if (providerConn) providerConn.send(this.triggerFrame(rec));
    else this.ports.log.info("trigger parked until its type has a provider", { id: rec.id, trigger_type: rec.trigger_type });
    return undefined;
  }

  /** forbidden when the type pushes a listing (discovery) its maker may not call: by its grant, or
   * by its RBAC session (whose engine::functions::list is narrowed, and so may not pull this). */
  private mayReadListing(triggerType: string, owner: string | null, grant: Grant | undefined): ErrorBody | undefined {
    const listing = this.triggerTypes.get(triggerType)?.listing;
    if (!listing) return undefined;
    const session = owner ? this.rbac.sessionOf(owner) : undefined;
    if ((grant && !mayCall(grant, listing)) || (session && !rbacMayCall(session, listing))) {
      return { code: "forbidden", message: `${triggerType} pushes what ${listing} answers, which '${grant?.sub ?? owner}' may not call` };
    }
    return undefined;
  }

  /**
   * Ownership of a binding: a connection's belongs to it (and its reattach successor), an edge
   * host's to its manifest, an engine-held one (engine::register_trigger) to the principal that made
   * it. Returns forbidden, or nothing when `workerId`/`grant` may remove or replace it.
   */
  mayRemoveTrigger(t: TriggerRecord, workerId: string | null, grant: Grant): ErrorBody | undefined {
    if (t.owner === null) {
      if ((t.principal ?? OPEN_GRANT.sub) === grant.sub) return undefined;
      return { code: "forbidden", message: `trigger ${t.id} belongs to '${t.principal ?? OPEN_GRANT.sub}'` };
    }
    if (t.owner === workerId) return undefined;
    return { code: "forbidden", message: `trigger ${t.id} belongs to another worker` };
  }

  /**
   * Who may remove a binding (frame or engine::unregister_trigger): who may replace it
   * (mayRemoveTrigger), and besides the owner of the function it calls — a binding runs that
   * function with the engine's hand, so its owner can always end one, whoever made it — and
   * trusted code (a call with no grant and no connection: the engine's own, an edge host). The
   * function's owner is its connection, or another connection of the same principal; the open
   * engine's "anonymous" is nobody in particular, so there only the connection counts.
   */
  mayUnbind(t: TriggerRecord, workerId: string | null, grant: Grant): ErrorBody | undefined {
    const asMaker = this.mayRemoveTrigger(t, workerId, grant);
    if (!asMaker) return undefined;
    if (workerId === null && grant === OPEN_GRANT) return undefined;
    const fn = this.catalog.functions.get(t.function_id);
    if (fn && fn.kind !== "edge") {
      if (workerId !== null && fn.owner === workerId) return undefined;
      if (grant.sub !== OPEN_GRANT.sub && this.grantOf(fn.owner).sub === grant.sub) return undefined;
    }
    return { code: "forbidden", message: `${asMaker.message}; besides its maker only the owner of ${t.function_id} may remove it` };
  }

  removeTrigger(id: string, opts: { keepProviderQuiet?: boolean } = {}): boolean {
    const t = this.catalog.deleteTrigger(id);
    if (!t) return false;
    const builtin = this.triggerTypes.get(t.trigger_type);
    if (builtin) {
      builtin.removed?.(t);
      return true;
    }
    if (t.status === "active" && !opts.keepProviderQuiet) {
      const provider = this.catalog.triggerTypes.get(t.trigger_type);
      if (provider) this.conns.get(provider.owner)?.send({ type: "unregistertrigger", id: t.id, trigger_type: t.trigger_type });
    }
    return true;
  }

  // ---------------------------------------------------------------- invocation

  private onInvoke(conn: Conn, f: InvokeFunction): void {
    const action: TriggerAction | undefined = f.action;
    const grant = this.grantOf(conn.workerId);
    const expectsReply = !!f.invocation_id && action?.type !== "void";
    const deny = (error: ErrorBody) => {
      if (expectsReply) this.reply(conn, f.invocation_id!, f.function_id, { ok: false, error });
      else conn.send({ type: "error", error });
    };
    if (f.namespace && f.namespace !== this.ports.namespace) {
      if (!mayUseNamespace(grant, f.namespace))
        return deny({ code: "forbidden", message: `'${grant.sub}' may not use namespace '${f.namespace}'` });
      return this.onRemoteInvoke(conn, f, f.namespace);
    }
    if (!SELF_FUNCTIONS.has(f.function_id) && !mayCall(grant, f.function_id))
      return deny({ code: "forbidden", message: `'${grant.sub}' may not call ${f.function_id}` });
    if (action?.type === "enqueue") {
      this.enqueue({
        queue: action.queue,
        function_id: f.function_id,
        // Stamped now: the delivery runs without the caller's grant, as trusted code would.
        data: isRecord(f.data) ? this.stampPrincipal(f.data, f.function_id, grant) : (f.data ?? null),
        principal: grant.sub,
        idempotency_key: action.idempotency_key,
        traceparent: f.traceparent,
        baggage: f.baggage,
      }).then((outcome) => {
        if (f.invocation_id) this.reply(conn, f.invocation_id, f.function_id, outcome);
      });
      return;
    }
    const data = stampCaller(f.data, conn.workerId, (d) => this.stampPrincipal(d, f.function_id, grant));
    const req: CallRequest = {
      function_id: f.function_id,
      data,
      callerWorkerId: conn.workerId,
      timeoutMs: f.timeout_ms,
      grant,
      caller: conn.workerId,
    };
    if (f.metadata !== undefined) req.metadata = f.metadata;
    if (f.traceparent) req.traceparent = f.traceparent;
    if (f.baggage) req.baggage = f.baggage;
    if (action?.type === "void" || !f.invocation_id) {
      this.ports.background(this.invoke(req));
      return;
    }
    req.invocationId = f.invocation_id;
    req.route = { caller: conn.workerId, traceparent: req.traceparent, baggage: req.baggage };
    const invocationId = f.invocation_id;
    this.invoke(req).then((outcome) => this.reply(conn, invocationId, f.function_id, outcome, req));
  }

  /** A call into another namespace goes to that namespace's engine object by RPC. */
  private onRemoteInvoke(conn: Conn, f: InvokeFunction, namespace: string): void {
    const remote = this.ports.otherNamespace?.(namespace);
    const expectsReply = !!f.invocation_id && f.action?.type !== "void";
    if (!remote) {
      if (expectsReply)
        this.reply(conn, f.invocation_id!, f.function_id, {
          ok: false,
          error: { code: "function_not_found", message: `namespace ${namespace} is not reachable` },
        });
      return;
    }
    // The target namespace checks the same grant and stamps the caller itself.
    const req: Parameters<typeof remote.trigger>[0] = {
      function_id: f.function_id,
      payload: f.data ?? null,
      timeout_ms: f.timeout_ms,
      grant: this.grantOf(conn.workerId),
      caller: `${this.ports.namespace}/${conn.workerId}`,
    };
    if (f.action) req.action = f.action;
    if (f.metadata !== undefined) req.metadata = f.metadata;
    if (f.traceparent) req.traceparent = f.traceparent;
    if (f.baggage) req.baggage = f.baggage;
    const span = remoteSpan(this.telemetry, f, namespace);
    if (span) req.traceparent = span.traceparent;
    const call = remote.trigger(req).catch((e): CallOutcome => ({ ok: false, error: toErrorBody(e, "invocation_error") }));
    if (span) call.then((o) => span.end(o));
    if (expectsReply) call.then((o) => this.reply(conn, f.invocation_id!, f.function_id, o, f));
    else this.ports.background(call);
  }

  private reply(conn: Conn, invocationId: string, functionId: string, outcome: CallOutcome, trace?: TraceContext): void {
    // The caller may have gone meanwhile: its result is dropped (§2.5 step 3).
    if (this.conns.get(conn.workerId) !== conn) return;
    sendResult(conn, invocationId, functionId, outcome, trace);
  }

  async enqueue(req: EnqueueRequest): Promise<CallOutcome> {
    if (!this.queueProvider) return { ok: false, error: { code: "enqueue_error", message: "no queue provider is configured" } };
    const span = enqueueSpan(this.telemetry, req);
    let out: CallOutcome;
    try {
      out = await this.queueProvider.enqueue(span ? { ...req, traceparent: span.traceparent } : req);
    } catch (e) {
      out = { ok: false, error: toErrorBody(e, "enqueue_error") };
    }
    endEnqueue(span, out);
    return out;
  }

  /**
   * A call from outside this object by RPC (the front door's /_iii/invoke, another namespace, an
   * edge host): a caller with a grant is checked against it, and `_caller_worker_id` is always
   * stamped here, never taken from the payload.
   */
  invokeFrom(req: Omit<CallRequest, "callerWorkerId" | "route" | "caller"> & { stampCaller?: string }): Promise<CallOutcome> {
    const { stampCaller, ...call } = req;
    if (call.grant && !mayCall(call.grant, call.function_id)) {
      return Promise.resolve({ ok: false, error: { code: "forbidden", message: `'${call.grant.sub}' may not call ${call.function_id}` } });
    }
    // A worker in another namespace is stamped as `<namespace>/<worker id>`; an HTTP caller is no
    // worker, so it gets none — and a claimed one is dropped either way.
    let data = call.data;
    if (isRecord(data)) {
      const { _caller_worker_id: _claimed, ...rest } = data;
      const stamped = this.stampPrincipal(rest, call.function_id, call.grant);
      data = stampCaller ? { ...stamped, _caller_worker_id: stampCaller } : stamped;
    }
    const caller = stampCaller ?? (call.grant ? `http:${call.grant.sub}` : undefined);
    return this.invoke(caller ? { ...call, data, caller } : { ...call, data });
  }

  /**
   * Who calls, for a function that checks ownership (CALLER_PRINCIPAL_METADATA; an id not in the
   * catalog yet is treated as one). A caller with a grant is stamped from it, whatever it claimed;
   * only an operator (`sessions: ["*"]`, which may act on every session anyway) may name the
   * principal it acts for. A call without a grant is trusted code of this deployment (an edge host
   * such as the harness, a queue delivery stamped at enqueue): what it supplies stands. Functions
   * that did not ask never see a claimed principal either.
   */
  stampPrincipal(data: Record<string, unknown>, functionId: string, grant: Grant | undefined): Record<string, unknown> {
    const fn = this.catalog.functions.get(functionId);
    const wants = fn ? fn.metadata?.[CALLER_PRINCIPAL_METADATA] === true : !this.builtins.has(functionId);
    if (!wants && !(CALLER_PRINCIPAL_KEY in data)) return data;
    if (!grant) return data;
    const rest = withoutClaimedPrincipal(data);
    if (!wants) return rest;
    const claimed = seesAllSessions(grant) ? callerPrincipalIn(data) : undefined;
    return { ...rest, [CALLER_PRINCIPAL_KEY]: claimed ?? principalOf(grant) };
  }

  /** Call a function, wherever it lives. Always settles: result, error, or `timeout`. */
  async invoke(req: CallRequest): Promise<CallOutcome> {
    // The call's span; what it calls is its child (its traceparent goes on in place of the caller's).
    const span = invokeSpan(this.telemetry, req, this.targetOf(req.function_id));
    const r = span ? { ...req, traceparent: span.traceparent } : req;
    const started = this.ports.clock.now();
    // Bounded per caller and per principal: one flood of never-answered calls cannot hold the
    // object's memory, nor one principal's many connections the whole table.
    const principal = r.principal ?? r.grant?.sub;
    const who = { caller: r.caller, principal };
    const outcome = await (r.caller === undefined && principal === undefined
      ? this.invokeUncounted(r)
      : this.invocations.counted(who, () => this.invokeUncounted(r)));
    this.telemetry.metrics.invocation(req.function_id, outcome.ok, this.ports.clock.now() - started);
    span?.end(outcome);
    return outcome;
  }

  /** Where a function lives, for its invoke span. */
  private targetOf(id: string): InvokeTarget {
    if (!this.telemetry.tracing) return { kind: "missing" };
    if (this.builtins.has(id)) return { kind: "builtin" };
    const fn = this.catalog.functions.get(id);
    return fn ? { kind: fn.kind, owner: fn.owner } : { kind: "missing" };
  }

  private async invokeUncounted(req: CallRequest): Promise<CallOutcome> {
    const invocationId = this.invocations.idFor(req.invocationId);
    const builtin = this.builtins.get(req.function_id);
    if (builtin) {
      try {
        const ctx: CallContext = {
          invocationId,
          callerWorkerId: req.callerWorkerId,
          grant: req.grant ?? OPEN_GRANT,
          metadata: req.metadata,
          traceparent: req.traceparent,
          baggage: req.baggage,
        };
        const principal = req.principal ?? req.grant?.sub;
        if (principal !== undefined) ctx.principal = principal;
        const result = await builtin.handler(req.data, ctx);
        return { ok: true, result };
      } catch (e) {
        return { ok: false, error: toErrorBody(e) };
      }
    }
    let fn = this.catalog.functions.get(req.function_id);
    const refreshing = this.edgeSync.refreshing;
    if (!fn && refreshing) {
      await refreshing;
      fn = this.catalog.functions.get(req.function_id);
    }
    if (!fn) return { ok: false, error: { code: "function_not_found", message: `Function ${req.function_id} not found` } };
    // A keyed function's call names its instance; one that cannot is answered now (./keyed.ts).
    const key = callKey(fn, req.data);
    if (typeof key === "object") return { ok: false, error: key.error };
    const full = this.invocations.full((req.principal ?? req.grant?.sub) !== undefined);
    if (full) return full;
    const timeoutMs = req.timeoutMs ?? this.defaultInvokeTimeoutMs;
    switch (fn.kind) {
      case "worker": {
        const conn = this.conns.get(fn.owner);
        if (!conn) return { ok: false, error: { code: "invocation_stopped", message: `the worker owning ${fn.id} is not connected` } };
        return this.invocations.route(conn, fn, req, invocationId, timeoutMs);
      }
      case "edge":
        return this.invocations.withDeadline(fn.id, timeoutMs, () =>
          this.edgeSync.call(fn, req, invocationId, key === undefined ? {} : { key }),
        );
      case "http":
        return this.invocations.withDeadline(fn.id, timeoutMs, async () => {
          if (!this.ports.httpFunctions || !fn.invocation)
            return { ok: false, error: { code: "function_not_invokable", message: "HTTP-invoked functions are not enabled" } };
          return this.ports.httpFunctions.invoke({ id: fn.id, invocation: fn.invocation }, req.data, invocationId, traceOf(req));
        });
    }
  }

  /**
   * Fire a trigger binding: condition first (only a literal `false` or an error skips, §8), then
   * the bound function with the binding's metadata and the trace context of what caused the fire
   * (§4.8). A binding to a function that does not exist (yet) fails with `function_not_found` and
   * a log line (§4.5); a durable fire retries it.
   */
  async fire(binding: TriggerRecord, payload: unknown, opts: FireOptions = {}): Promise<CallOutcome | "skipped"> {
    const span = fireSpan(this.telemetry, binding, opts.traceparent);
    if (!span) return this.fireTraced(binding, payload, opts);
    const out = await this.fireTraced(binding, payload, { ...opts, traceparent: span.traceparent });
    endFire(span, out);
    return out;
  }

  private async fireTraced(binding: TriggerRecord, payload: unknown, opts: FireOptions): Promise<CallOutcome | "skipped"> {
    const share = this.shareOf(binding);
    // Without a condition the frame goes out in this turn, as fires always have (callers and tests
    // read it synchronously; fires of one record keep their order).
    const gate = conditionOf(binding) ? await this.gate(binding, payload, opts, share) : this.functionReady(binding);
    if (gate !== true) return gate;
    return this.invoke(this.fireRequest(binding, payload, opts, share));
  }

  /**
   * Fire a binding and wait for nothing (iii's void call, §4.3): a worker is sent an
   * `invokefunction` without `invocation_id`, which it runs and does not answer (iii-sdk, sdk-edge),
   * so there is no open call, no deadline, nothing counted against the binding's maker, and a
   * subscriber that never answers costs nothing. A condition is still a call (its answer decides).
   * A Worker-hosted function's host is told the same (`void`: it answers at once and runs the
   * function after). Built-ins and HTTP-invoked functions have no void form: they are called as
   * usual, under their deadline, but nobody waits for them.
   */
  notify(binding: TriggerRecord, payload: unknown, opts: Pick<FireOptions, "traceparent" | "baggage"> & { inFanOut?: boolean } = {}): void {
    // In a fan-out the change has one span (discoverySpan) and its frames carry it: no span per
    // subscriber, which would be a thousand for one registration.
    const traced = opts.inFanOut !== true;
    const span = traced ? fireSpan(this.telemetry, binding, opts.traceparent) : undefined;
    const o = span ? { ...opts, traceparent: span.traceparent } : opts;
    const share = this.shareOf(binding);
    if (conditionOf(binding) === undefined) {
      // The common case stays synchronous: every subscriber's frame is out before this returns.
      const ready = this.functionReady(binding);
      endFire(span, ready === true ? this.invokeVoid(this.fireRequest(binding, payload, o, share), traced) : ready);
      return;
    }
    const run = async () => {
      const gate = await this.gate(binding, payload, o, share);
      endFire(span, gate === true ? this.invokeVoid(this.fireRequest(binding, payload, o, share), traced) : gate);
    };
    this.ports.background(run());
  }

  /** Whose share of the open-call table a fire runs on: whoever made the binding (a connection's
   * principal, or the maker of an engine-held one), so a route anyone may request cannot let its
   * maker spend the reserve kept for trusted callers. Bindings of edge hosts are trusted, and so
   * are engine-held ones made without a grant (engine::register_trigger records OPEN_GRANT's sub
   * for those: the harness's sub-agent links). */
  private shareOf(binding: TriggerRecord): { principal?: string } {
    const principal =
      binding.owner === null
        ? binding.principal === OPEN_GRANT.sub
          ? undefined
          : binding.principal
        : (binding.principal ?? this.catalog.principalOf(binding.owner));
    return principal === undefined ? {} : { principal };
  }

  /** The condition (only a literal `false` or an error skips, §8), then whether the function exists:
   * true to go on, else what the fire ends with. */
  private async gate(
    binding: TriggerRecord,
    payload: unknown,
    opts: FireOptions,
    share: { principal?: string },
  ): Promise<true | CallOutcome | "skipped"> {
    const cond = conditionOf(binding);
    if (cond) {
      const c = await this.invoke({ function_id: cond, data: payload, timeoutMs: opts.timeoutMs, ...traceOf(opts), ...share });
      if (!c.ok)
        return opts.conditionErrors === "fail"
          ? { ok: false, error: { code: c.error.code, message: `condition ${cond}: ${c.error.message}` } }
          : "skipped";
      if (c.result === false) return "skipped";
    }
    return this.functionReady(binding);
  }

  private functionReady(binding: TriggerRecord): true | CallOutcome {
    if (this.functionExists(binding.function_id)) return true;
    this.ports.log.info("trigger fired for a function that is not registered", { trigger: binding.id, function_id: binding.function_id });
    return { ok: false, error: { code: "function_not_found", message: `Function ${binding.function_id} not found` } };
  }

  private fireRequest(binding: TriggerRecord, payload: unknown, opts: FireOptions, share: { principal?: string }): CallRequest {
    const req: CallRequest = { function_id: binding.function_id, data: payload, timeoutMs: opts.timeoutMs, ...traceOf(opts), ...share };
    if (opts.invocationId) req.invocationId = opts.invocationId;
    if (opts.withMetadata !== false && binding.metadata !== undefined) req.metadata = binding.metadata;
    return req;
  }

  /** Send a call nobody waits for (notify): what it ends with is whether it went out. */
  private invokeVoid(req: CallRequest, traced: boolean): CallOutcome {
    const fn = this.catalog.functions.get(req.function_id);
    const key = fn ? callKey(fn, req.data) : undefined;
    if (typeof key === "object") {
      this.ports.log.info("a fire nobody waits for names no key of its keyed function", { function_id: req.function_id, ...key.error });
      return { ok: false, error: key.error };
    }
    if (fn?.kind === "edge") {
      // The host answers at once (`void`), so the RPC needs no deadline and holds no open call.
      const span = traced ? invokeSpan(this.telemetry, req, { kind: fn.kind, owner: fn.owner }) : undefined;
      const r = span ? { ...req, traceparent: span.traceparent } : req;
      const sent = this.edgeSync
        .call(fn, r, this.ports.newId(), key === undefined ? { void: true } : { void: true, key })
        .catch((e): CallOutcome => ({ ok: false, error: toErrorBody(e) }));
      this.ports.background(
        sent.then((out) => {
          if (!out.ok) this.ports.log.info("a fire nobody waits for was not taken by its edge host", { function_id: fn.id, ...out.error });
          span?.end(out);
        }),
      );
      return { ok: true };
    }
    if (fn?.kind !== "worker") {
      this.ports.background(this.invoke(req));
      return { ok: true };
    }
    const span = traced ? invokeSpan(this.telemetry, req, { kind: fn.kind, owner: fn.owner }) : undefined;
    const conn = this.conns.get(fn.owner);
    let out: CallOutcome;
    if (!conn) out = { ok: false, error: { code: "invocation_stopped", message: `the worker owning ${fn.id} is not connected` } };
    else {
      const sent = conn.send(
        invokeFrame(undefined, this.rbac.wireName(fn.id, fn.owner), req.data, {
          metadata: req.metadata,
          traceparent: span?.traceparent ?? req.traceparent,
          baggage: req.baggage,
        }),
      );
      out =
        sent === true
          ? { ok: true }
          : sent === "too_large"
            ? {
                ok: false,
                error: {
                  code: "value_too_large",
                  message: `the call to ${fn.id} is larger than ${MAX_FRAME_BYTES} bytes with its envelope`,
                },
              }
            : { ok: false, error: { code: "channel_send_failed", message: `could not write to the worker owning ${fn.id}` } };
    }
    if (!out.ok) this.ports.log.info("a fire nobody waits for was not sent", { function_id: fn.id, ...out.error });
    span?.end(out);
    return out;
  }

  functionExists(id: string): boolean {
    return this.builtins.has(id) || this.catalog.functions.has(id);
  }

  activeBindings(type: string): TriggerRecord[] {
    return this.catalog.triggersOfType(type).filter((t) => t.status === "active");
  }

  // ---------------------------------------------------------------- discovery (pushed on change)

  /** The functions may have changed (EdgeHostOwner's name for discoveryMaybeChanged). */
  functionsMaybeChanged(): void {
    this.discoveryMaybeChanged();
  }

  /**
   * The function ids or the trigger bindings may have changed: one debounce window for both
   * (FUNCTIONS_CHANGED_DEBOUNCE_MS), after which `engine::functions-available` and
   * `engine::triggers-available` fire if what they report did change. Every fire is sent without
   * waiting for its result (notify), so one registration reaching N subscribers costs N frames,
   * not N open calls.
   */
  discoveryMaybeChanged(): void {
    if (this.functionsTimer !== null) return;
    this.functionsTimer = this.ports.timers.set(() => {
      this.functionsTimer = null;
      this.functionsChanged();
      this.triggersChanged();
    }, FUNCTIONS_CHANGED_DEBOUNCE_MS);
  }

  private functionsChanged(): void {
    const sig = this.introspection.functionsSignature();
    if (sig === this.lastFunctionsSignature) return;
    this.lastFunctionsSignature = sig;
    const before = this.lastFunctionIds;
    this.lastFunctionIds = this.introspection.functionIds();
    // iii's payload is the full list; a binding with config {delta: true} (iii-edge extension) gets
    // only what changed, so one registration costs each subscriber a small frame rather than the
    // whole catalog (fan-out linear in subscribers, not subscribers × catalog).
    this.fanOutChange(
      TRIGGER_TYPES.functionsAvailable,
      () => ({ event: "functions_changed", functions: this.introspection.functionSummaries(true) }),
      () => ({ event: "functions_changed", ...this.introspection.functionsDelta(before, this.lastFunctionIds) }),
    );
  }

  private triggersChanged(): void {
    const now = this.introspection.triggerIdentities();
    if (sameIdentities(now, this.lastTriggerIdentities)) return;
    const before = this.lastTriggerIdentities;
    this.lastTriggerIdentities = now;
    this.fanOutChange(
      TRIGGER_TYPES.triggersAvailable,
      () => ({ event: "triggers_changed", triggers: this.introspection.visibleTriggerEntries() }),
      () => ({ event: "triggers_changed", ...this.introspection.triggersDelta(before, now) }),
    );
  }

  /** One discovery change to every binding of `type`, under one span: the full payload or the
   * delta, each built once and only if a binding wants it. */
  private fanOutChange(type: string, full: () => unknown, delta: () => unknown): void {
    const bindings = this.activeBindings(type);
    if (bindings.length === 0) return;
    let fullPayload: unknown;
    let deltaPayload: unknown;
    const span = discoverySpan(this.telemetry, type, bindings.length);
    const opts = { inFanOut: true, traceparent: span?.traceparent };
    // A type that pushes a listing: its maker was allowed to read the listing when it bound; a
    // connection's grant cannot change since, but a maker's grant is asked again where it is at
    // hand (mayReadListing).
    const listed = this.triggerTypes.get(type)?.listing !== undefined;
    for (const b of bindings) {
      if (listed && b.owner !== null && !b.owner.startsWith("edge:") && this.mayReadListing(type, b.owner, this.grantOf(b.owner))) continue;
      const payload = wantsDelta(b) ? (deltaPayload ??= delta()) : (fullPayload ??= full());
      this.notify(b, payload, opts);
    }
    span?.end({ ok: true });
  }

  private fireWorkersChanged(event: "worker_connected" | "worker_disconnected" | "worker_metadata_updated", workerId: string): void {
    const bindings = this.activeBindings(TRIGGER_TYPES.workersAvailable);
    if (bindings.length === 0) return;
    const span = discoverySpan(this.telemetry, TRIGGER_TYPES.workersAvailable, bindings.length);
    const opts = { inFanOut: true, traceparent: span?.traceparent };
    for (const b of bindings) this.notify(b, { event, worker_id: workerId }, opts);
    span?.end({ ok: true });
  }

  /** engine::workers::register: store what the worker says about itself. */
  describeWorker(workerId: string, info: Record<string, unknown>): void {
    const w = this.catalog.workers.get(workerId);
    if (!w) return;
    const clean: Record<string, unknown> = { ...info };
    for (const k of ["name", "description", "runtime", "version", "os", "isolation"] as const) {
      if (k in clean) clean[k] = sanitize(clean[k]) ?? null;
    }
    delete clean._caller_worker_id;
    this.catalog.putWorker({ ...w, info: clean });
    this.fireWorkersChanged("worker_metadata_updated", workerId);
  }

  // ---------------------------------------------------------------- edge hosts

  /** Reload the manifests of Worker-hosted functions (edge-hosts.ts). */
  refreshEdgeHosts(): Promise<void> {
    return this.edgeSync.refresh();
  }

  // ---------------------------------------------------------------- alarm

  rearmAlarm(): void {
    let next: number | null = null;
    for (const c of this.alarmClients) {
      const due = c.nextDue();
      if (due !== null && (next === null || due < next)) next = due;
    }
    if (next !== null) this.ports.alarm.request(next);
  }

  async alarm(): Promise<void> {
    const now = this.ports.clock.now();
    for (const c of this.alarmClients) {
      const due = c.nextDue();
      if (due !== null && due <= now) {
        try {
          await c.run(now);
        } catch (e) {
          this.ports.log.warn("alarm client failed", { error: String(e) });
        }
      }
    }
    this.rearmAlarm();
  }
}

export { IIIError };
