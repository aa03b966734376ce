// The engine core: connections, catalog, invocation routing, trigger dispatch and the built-in
// functions, as plain TypeScript over the ports of ./ports.ts. No `cloudflare:*` import here.
import {
  DEFAULT_INVOKE_TIMEOUT_MS,
  BYTES_PER_SECOND,
  FLOOD_CLOSE_CODE,
  FRAMES_PER_SECOND,
  IIIError,
  MAX_FRAME_BYTES,
  MAX_REGISTRATIONS_PER_WORKER,
  OPEN_GRANT,
  TRIGGER_TYPES,
  mayBind,
  mayCall,
  mayRegister,
  mayUseNamespace,
  type Grant,
  parseWorkerFrame,
  peekCallIds,
  toErrorBody,
  type EngineFrame,
  type ErrorBody,
  type InvokeFunction,
  type RegisterFunction,
  type RegisterTrigger,
  type TriggerAction,
  type WorkerFrame,
} from "@iii-edge/protocol";
import {
  MAX_CONNECTIONS_PER_IP,
  MAX_CONNECTIONS_PER_PRINCIPAL,
  MAX_OPEN_CALLS,
  MAX_OPEN_CALLS_PER_CALLER,
  MAX_OPEN_CALLS_PER_TARGET,
  MAX_REGISTRATIONS_PER_PRINCIPAL,
} from "./bounds.ts";
import { Catalog, type FunctionRecord, type TriggerRecord } from "./catalog.ts";
import { Deadlines } from "./deadlines.ts";
import type { CallOutcome, Conn, EnginePorts } from "./ports.ts";
import { ERROR_NOTICES_PER_SECOND, FLOOD_CLOSE_REASON, SocketBudget } from "./socket-budget.ts";

/** What a built-in function receives besides its input. */
export interface CallContext {
  invocationId: string;
  callerWorkerId?: string;
  /** The caller's permissions (OPEN_GRANT for the engine itself and trusted edge code). */
  grant: Grant;
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
  /** Check a binding's config; return an error message (or a typed error, e.g. FORBIDDEN for a
   * route another worker holds) to refuse it, or nothing to accept. */
  validate(config: unknown, binding: TriggerRecord): string | ErrorBody | undefined;
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
}

export interface EnqueueRequest {
  queue: string;
  function_id: string;
  data: unknown;
  idempotency_key?: string;
  traceparent?: string;
  baggage?: string;
}
/** The `enqueue` action's provider (queues/). */
export interface QueueProvider {
  enqueue(req: EnqueueRequest): Promise<CallOutcome>;
}

interface Pending {
  target: string;
  function_id: string;
  deadline: number;
  startedAt: number;
  /** Set when a worker socket is the caller: what it takes to answer it after an eviction. */
  route?: SocketRoute;
  /** Written to `routed_calls` (long-running): deleted again when the call settles. */
  persisted?: boolean;
  resolve(o: CallOutcome): void;
}

/** A routed call's way back to its caller, as stored for calls that outlive PERSIST_AFTER_MS. */
interface SocketRoute {
  caller: string;
  traceparent?: string;
  baggage?: string;
}

/**
 * A routed call still open after this long is written to SQLite, so an eviction in the middle of
 * it (a long model call, say) loses neither the caller's answer nor its deadline. Shorter calls —
 * nearly all of them — never touch storage (the fast path stays in memory).
 */
const PERSIST_AFTER_MS = 1_000;

/** Characters iii strips from worker names/descriptions: C0/C1 controls and bidi overrides. */
const UNSAFE_TEXT = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
const sanitize = (v: unknown, max = 280): string | undefined =>
  typeof v === "string" ? v.replace(UNSAFE_TEXT, "").slice(0, max) : undefined;

/** Locally every client shares a loopback address, so the per-address bound is for real ones. */
const LOOPBACK_IP = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|::ffff:127\.\d{1,3}\.\d{1,3}\.\d{1,3})$/;

/** Built-ins every connection may call whatever its grant says: they only touch the caller itself
 * (iii-sdk describes itself with engine::workers::register right after connecting). */
const SELF_FUNCTIONS = new Set(["engine::workers::register"]);

/** What a caller gets when the worker running its call disconnects (wire-protocol §2.5 step 3). */
const TARGET_GONE: CallOutcome = { ok: false, error: { code: "invocation_stopped", message: "Invocation stopped: the worker disconnected" } };

/** How long a burst of catalog changes is coalesced before `engine::functions-available` fires. */
const FUNCTIONS_CHANGED_DEBOUNCE_MS = 10;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

export class EngineCore {
  readonly ports: EnginePorts;
  readonly catalog: Catalog;
  readonly builtins = new Map<string, BuiltinFunction>();
  readonly triggerTypes = new Map<string, BuiltinTriggerType>();
  readonly conns = new Map<string, Conn>();
  private readonly pending = new Map<string, Pending>();
  /** Every open call's deadline (routed, Worker-hosted, HTTP-invoked) on one timer. */
  private readonly deadlines: Deadlines;
  /** Open calls per caller and per target, for MAX_OPEN_CALLS_PER_*. */
  private readonly openByCaller = new Map<string, number>();
  private readonly openByTarget = new Map<string, number>();
  /** Live connections per principal and per client address, for MAX_CONNECTIONS_PER_*. */
  private readonly connsByPrincipal = new Map<string, number>();
  private readonly connsByIp = new Map<string, number>();
  private readonly counted = new Set<string>();
  /** Each connection's frame/byte budget (socket-budget.ts), by worker id. */
  private readonly buckets = new Map<string, SocketBudget>();
  private readonly alarmClients: AlarmClient[] = [];
  private queueProvider: QueueProvider | undefined;
  private functionsTimer: unknown = null;
  private lastFunctionsSignature: string | undefined;
  private edgeRefresh: Promise<void> | null = null;
  private persistTimer: unknown = null;

  constructor(ports: EnginePorts) {
    this.ports = ports;
    this.catalog = new Catalog(ports.sql);
    this.deadlines = new Deadlines(ports.timers, ports.clock);
    ports.sql.exec(
      "CREATE TABLE IF NOT EXISTS routed_calls (id TEXT PRIMARY KEY, function_id TEXT NOT NULL, target TEXT NOT NULL, caller TEXT NOT NULL, deadline INTEGER NOT NULL, traceparent TEXT, baggage TEXT)",
    );
    this.addAlarmClient({
      nextDue: () => {
        let next: number | null = null;
        for (const p of this.pending.values()) if (p.persisted && (next === null || p.deadline < next)) next = p.deadline;
        return next;
      },
      run: async (now) => {
        for (const [id, p] of [...this.pending]) if (p.persisted && p.deadline <= now) this.settle(id, this.timeoutOutcome(p.function_id));
      },
    });
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
      this.countConnection(c.workerId, +1);
    }
    for (const t of this.catalog.triggers.values()) {
      const provider = this.triggerTypes.get(t.trigger_type);
      if (provider && t.status === "active") provider.added?.(t);
    }
    for (const workerId of [...this.catalog.workers.keys()]) {
      if (!this.conns.has(workerId)) this.cleanup(workerId);
    }
    // Functions or bindings whose owner vanished without a worker row (defensive).
    for (const f of [...this.catalog.functions.values()]) {
      if (f.kind !== "edge" && !this.conns.has(f.owner)) this.catalog.deleteFunction(f.id, f.owner);
    }
    this.restoreRoutedCalls();
    this.lastFunctionsSignature = this.functionsSignature();
    this.rearmAlarm();
    if (Object.keys(this.ports.edgeHosts).length > 0) this.refreshEdgeHosts().catch(() => {});
  }

  // ---------------------------------------------------------------- connections

  /** A new socket: give it an identity and announce it (wire-protocol §2.5). */
  connect(conn: Conn, token: string, who: { grant?: Grant; ip?: string } = {}): void {
    this.conns.set(conn.workerId, conn);
    const w: { worker_id: string; token: string; connected_at: number; info: Record<string, unknown>; grant?: Grant; ip?: string } = { worker_id: conn.workerId, token, connected_at: this.ports.clock.now(), info: {} };
    if (who.grant) w.grant = who.grant;
    if (who.ip) w.ip = who.ip;
    this.catalog.putWorker(w);
    this.countConnection(conn.workerId, +1);
    conn.send({ type: "workerregistered", worker_id: conn.workerId, reattach_token: token });
    this.fireWorkersChanged("worker_connected", conn.workerId);
  }

  /** The socket closed or errored: clean up in the spec's order, ownership-checked. */
  disconnect(workerId: string): void {
    if (!this.catalog.workers.has(workerId) && !this.conns.has(workerId)) return;
    this.conns.delete(workerId);
    this.cleanup(workerId);
  }

  /**
   * May one more connection of `grant` from `ip` be accepted? (Checked before the upgrade is
   * answered.) The open grant of a loopback engine is nobody in particular: only the per-address
   * bound applies to it.
   */
  admitConnection(grant: Grant, ip: string | undefined, limits: { perPrincipal?: number; perIp?: number } = {}): ErrorBody | undefined {
    const perPrincipal = limits.perPrincipal ?? MAX_CONNECTIONS_PER_PRINCIPAL;
    const perIp = limits.perIp ?? MAX_CONNECTIONS_PER_IP;
    if (grant !== OPEN_GRANT && (this.connsByPrincipal.get(grant.sub) ?? 0) >= perPrincipal) {
      return { code: "too_many_connections", message: `'${grant.sub}' already holds ${perPrincipal} connections to this namespace` };
    }
    if (ip && !LOOPBACK_IP.test(ip) && (this.connsByIp.get(ip) ?? 0) >= perIp) {
      return { code: "too_many_connections", message: `${perIp} connections from this address are open already` };
    }
    return undefined;
  }

  private countConnection(workerId: string, delta: 1 | -1): void {
    const w = this.catalog.workers.get(workerId);
    if (!w || this.counted.has(workerId) === (delta === 1)) return;
    if (delta === 1) this.counted.add(workerId);
    else this.counted.delete(workerId);
    const bump = (m: Map<string, number>, k: string) => {
      const n = (m.get(k) ?? 0) + delta;
      if (n > 0) m.set(k, n);
      else m.delete(k);
    };
    bump(this.connsByPrincipal, (w.grant ?? OPEN_GRANT).sub);
    if (w.ip) bump(this.connsByIp, w.ip);
  }

  /** What a connection may do. Rows from before auth existed ran open. */
  grantOf(workerId: string): Grant {
    return this.catalog.workers.get(workerId)?.grant ?? OPEN_GRANT;
  }

  private cleanup(workerId: string): void {
    this.countConnection(workerId, -1);
    this.conns.delete(workerId);
    this.buckets.delete(workerId);
    const { catalog } = this;
    catalog.transaction(() => {
      // 1–2. functions (worker-hosted and HTTP-invoked) this connection still owns
      for (const f of [...catalog.functions.values()]) if (f.owner === workerId) catalog.deleteFunction(f.id, workerId);
    });
    // 3. in-flight invocations that target it
    for (const [id, p] of this.pending) {
      if (p.target === workerId) this.settle(id, TARGET_GONE);
    }
    catalog.transaction(() => {
      // 4. its triggers (providers told), parked ones dropped
      for (const t of [...catalog.triggers.values()]) if (t.owner === workerId) this.removeTrigger(t.id);
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
    if (!this.admit(conn, raw)) return;
    if (typeof raw !== "string") {
      // Telemetry prefixes on the control socket are accepted and dropped (§11).
      const head = new TextDecoder().decode(new Uint8Array(raw, 0, Math.min(4, raw.byteLength)));
      if (head === "OTLP" || head === "MTRC" || head === "LOGS") return;
    }
    const parsed = parseWorkerFrame(raw);
    if (!parsed.ok) {
      if (parsed.ignore) {
        if (parsed.error.message !== "empty frame") {
          this.buckets.get(conn.workerId)?.refused();
          this.abuseLog(conn, "ignored frame", { reason: parsed.error.message });
        }
        return;
      }
      if (parsed.frame_type === "invocationresult") {
        // A malformed result from the target still ends its call now, not at the deadline.
        this.refuse(conn, parsed.error);
        const p = parsed.invocation_id ? this.pending.get(parsed.invocation_id) : undefined;
        if (p && p.target === conn.workerId) this.settle(parsed.invocation_id!, { ok: false, error: { code: "invocation_failed", message: `the worker sent an invalid result: ${parsed.error.message}` } });
        return;
      }
      // Only a call expects an invocationresult back (echoing one for any other frame type
      // would answer the sender's own pending calls).
      this.refuse(conn, parsed.error, parsed.frame_type === "invokefunction" ? parsed.invocation_id : undefined, parsed.function_id);
      return;
    }
    try {
      this.handle(conn, parsed.frame);
    } catch (e) {
      // A frame must never take the engine down; the sender learns what went wrong.
      this.refuse(conn, toErrorBody(e, "invalid_frame"));
    }
  }

  private refuse(conn: Conn, error: ErrorBody, invocationId?: string, functionId?: string): void {
    this.abuseLog(conn, "refused frame", { ...error });
    const budget = this.buckets.get(conn.workerId);
    budget?.refused();
    // The `error` frame within the socket's notice budget; a call's answer always.
    const notice = budget?.notice(this.ports.clock.now()) ?? "answer";
    if (notice === "answer") conn.send({ type: "error", error });
    else if (notice === "warn") conn.send({ type: "error", error: { code: "rate_limited", message: `more than ${ERROR_NOTICES_PER_SECOND} refused frames/s: refused frames are no longer answered (calls still are)` } });
    if (invocationId) conn.send({ type: "invocationresult", invocation_id: invocationId, function_id: functionId ?? "", error });
  }

  /** A warning about a connection, at most one line per ABUSE_LOG_INTERVAL_MS per connection (the
   * next says how many it left out): a flood must not turn into a flood of log lines. */
  private abuseLog(conn: Conn, msg: string, fields: Record<string, unknown>): void {
    const budget = this.buckets.get(conn.workerId);
    const leftOut = budget ? budget.log(this.ports.clock.now()) : 0;
    if (leftOut === undefined) return;
    this.ports.log.warn(msg, { worker_id: conn.workerId, ...fields, ...(leftOut > 0 ? { lines_left_out: leftOut } : {}) });
  }

  /**
   * A call dropped by the budget still gets its answer (every caller gets one). The frame is not
   * parsed — that would spend the CPU the budget protects — its ids are picked out of the head and
   * tail of the text (peekCallIds), whatever its size.
   */
  private answerDropped(conn: Conn, raw: string | ArrayBuffer): void {
    const call = peekCallIds(raw);
    if (!call) return;
    conn.send({ type: "invocationresult", ...call, error: { code: "rate_limited", message: `over this connection's budget (${FRAMES_PER_SECOND} frames/s, ${BYTES_PER_SECOND} bytes/s); this call was dropped` } });
  }

  /**
   * The connection's frame and byte budget (socket-budget.ts): a flood is dropped, not queued; the
   * sender is told once a second (`rate_limited`), every dropped call is answered, and a connection
   * still over budget FLOOD_GRACE_MS after being told is closed with FLOOD_CLOSE_CODE.
   */
  private admit(conn: Conn, raw: string | ArrayBuffer): boolean {
    const now = this.ports.clock.now();
    let b = this.buckets.get(conn.workerId);
    if (!b) this.buckets.set(conn.workerId, (b = new SocketBudget(now)));
    // Closing: what the runtime still delivers is dropped unseen (the socket cannot be answered).
    if (b.closed) return false;
    const verdict = b.admit(typeof raw === "string" ? raw.length : raw.byteLength, now);
    if (verdict === "admit") return true;
    if (verdict === "close") {
      this.ports.log.warn("connection closed for flooding", { worker_id: conn.workerId, dropped: b.dropped });
      conn.send({ type: "error", error: { code: "rate_limited", message: `closing the connection: ${FLOOD_CLOSE_REASON}` } });
      conn.close(FLOOD_CLOSE_CODE, FLOOD_CLOSE_REASON);
      return false;
    }
    if (verdict === "warn") {
      this.abuseLog(conn, "rate limited", { dropped: b.dropped });
      conn.send({ type: "error", error: { code: "rate_limited", message: `more than ${FRAMES_PER_SECOND} frames/s or ${BYTES_PER_SECOND} bytes/s; frames are being dropped` } });
    }
    this.answerDropped(conn, raw);
    return false;
  }

  private handle(conn: Conn, f: WorkerFrame): void {
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
        const refused = this.mayRemoveTrigger(t, conn.workerId, this.grantOf(conn.workerId));
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
        if (t.owner) this.conns.get(t.owner)?.send({ type: "triggerregistrationresult", id: t.id, trigger_type: t.trigger_type, function_id: t.function_id, error: f.error });
        return;
      }
      case "invokefunction":
        return this.onInvoke(conn, f);
      case "invocationresult": {
        const p = this.pending.get(f.invocation_id);
        // Results are accepted only from the worker the call was sent to.
        if (!p || p.target !== conn.workerId) return;
        this.settle(f.invocation_id, f.error ? { ok: false, error: f.error } : { ok: true, result: f.result ?? undefined });
        return;
      }
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

  private checkQuota(conn: Conn): boolean {
    const forbid = (message: string) => {
      conn.send({ type: "error", error: { code: "FORBIDDEN", message } });
      return false;
    };
    if (this.catalog.countOwnedBy(conn.workerId) >= MAX_REGISTRATIONS_PER_WORKER) return forbid(`a worker may hold at most ${MAX_REGISTRATIONS_PER_WORKER} registrations`);
    const g = this.grantOf(conn.workerId);
    if (g !== OPEN_GRANT && this.catalog.countByPrincipal(g.sub) >= MAX_REGISTRATIONS_PER_PRINCIPAL) {
      return forbid(`'${g.sub}' may hold at most ${MAX_REGISTRATIONS_PER_PRINCIPAL} registrations in this namespace`);
    }
    return true;
  }

  /** FORBIDDEN, or nothing when the connection may register the id (a function or trigger type). */
  private mayRegisterId(conn: Conn, kind: "function" | "trigger type", id: string, heldBy: string | undefined): ErrorBody | undefined {
    const g = this.grantOf(conn.workerId);
    if (!mayRegister(g, id)) return { code: "FORBIDDEN", message: `'${g.sub}' may not register ${kind} ${id} (allowed prefixes: ${g.register?.join(", ") || "none"})` };
    // Ownership, not last-writer-wins: a live holder keeps its id until it disconnects.
    if (heldBy !== undefined && heldBy !== conn.workerId && (heldBy.startsWith("edge:") || this.conns.has(heldBy))) {
      return { code: "FORBIDDEN", message: `${kind} ${id} is registered by another worker` };
    }
    return undefined;
  }

  private registerFunction(conn: Conn, f: RegisterFunction): void {
    if (this.builtins.has(f.id)) {
      conn.send({ type: "error", error: { code: "FORBIDDEN", message: `function id ${f.id} is reserved by the engine` } });
      return;
    }
    const existing = this.catalog.functions.get(f.id);
    const refused = this.mayRegisterId(conn, "function", f.id, existing ? (existing.kind === "edge" ? `edge:${existing.owner}` : existing.owner) : undefined);
    if (refused) {
      conn.send({ type: "error", error: refused });
      return;
    }
    if (existing?.owner !== conn.workerId && !this.checkQuota(conn)) return;
    if (f.invocation) {
      const check = this.ports.httpFunctions?.validate(f.invocation) ?? { ok: false as const, message: "HTTP-invoked functions are not enabled" };
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
      conn.send({ type: "error", error: { code: "FORBIDDEN", message: `trigger type ${id} is provided by the engine` } });
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
    const frame: EngineFrame = { type: "registertrigger", id: b.id, trigger_type: b.trigger_type, function_id: b.function_id, config: b.config ?? null };
    if (b.metadata !== undefined) frame.metadata = b.metadata;
    return frame;
  }

  /**
   * Bind a function to a trigger type. Built-in types validate the config and refuse with
   * `trigger_registration_failed`; worker-provided types get the binding forwarded; unknown
   * types park it until a provider appears. Returns the error, if refused.
   */
  registerTrigger(owner: string | null, f: Pick<RegisterTrigger, "id" | "trigger_type" | "function_id" | "config" | "metadata">, grant?: Grant): ErrorBody | undefined {
    const ownerConn = owner ? this.conns.get(owner) : undefined;
    const refuse = (error: ErrorBody) => {
      ownerConn?.send({ type: "triggerregistrationresult", id: f.id, trigger_type: f.trigger_type, function_id: f.function_id, error });
      return error;
    };
    if (grant && !mayBind(grant, f.trigger_type)) return refuse({ code: "FORBIDDEN", message: `'${grant.sub}' may not bind trigger type ${f.trigger_type}` });
    // A binding calls its function with the engine's hand: only for a function its maker may call.
    if (grant && !mayCall(grant, f.function_id)) return refuse({ code: "FORBIDDEN", message: `'${grant.sub}' may not call ${f.function_id}, so it may not bind it` });
    const existing = this.catalog.triggers.get(f.id);
    if (existing) {
      // An engine-held binding belongs to its principal; a connection's or edge host's to it while it lives.
      const held =
        existing.owner === null
          ? this.mayRemoveTrigger(existing, null, grant ?? OPEN_GRANT)
          : existing.owner !== owner && (existing.owner.startsWith("edge:") || this.conns.has(existing.owner))
            ? { code: "FORBIDDEN", message: `trigger id ${f.id} is owned by another worker` }
            : undefined;
      if (held) return refuse(held);
    }
    if (ownerConn && existing?.owner !== owner && !this.checkQuota(ownerConn)) {
      return { code: "FORBIDDEN", message: "registration quota exceeded" };
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

  /**
   * Ownership of a binding: a connection's belongs to it (and its reattach successor), an edge
   * host's to its manifest, an engine-held one (engine::register_trigger) to the principal that made
   * it. Returns FORBIDDEN, or nothing when `workerId`/`grant` may remove or replace it.
   */
  mayRemoveTrigger(t: TriggerRecord, workerId: string | null, grant: Grant): ErrorBody | undefined {
    if (t.owner === null) {
      if ((t.principal ?? OPEN_GRANT.sub) === grant.sub) return undefined;
      return { code: "FORBIDDEN", message: `trigger ${t.id} belongs to '${t.principal ?? OPEN_GRANT.sub}'` };
    }
    if (t.owner === workerId) return undefined;
    return { code: "FORBIDDEN", message: `trigger ${t.id} belongs to another worker` };
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
      if (!mayUseNamespace(grant, f.namespace)) return deny({ code: "FORBIDDEN", message: `'${grant.sub}' may not use namespace '${f.namespace}'` });
      return this.onRemoteInvoke(conn, f, f.namespace);
    }
    if (!SELF_FUNCTIONS.has(f.function_id) && !mayCall(grant, f.function_id)) return deny({ code: "FORBIDDEN", message: `'${grant.sub}' may not call ${f.function_id}` });
    if (action?.type === "enqueue") {
      this.enqueue({
        queue: action.queue,
        function_id: f.function_id,
        data: f.data ?? null,
        idempotency_key: action.idempotency_key,
        traceparent: f.traceparent,
        baggage: f.baggage,
      }).then((outcome) => {
        if (f.invocation_id) this.reply(conn, f.invocation_id, f.function_id, outcome);
      });
      return;
    }
    // §4.6: object payloads from a worker carry the caller's id, stamped here (never trusted from the payload).
    const data = isObject(f.data) ? { ...f.data, _caller_worker_id: conn.workerId } : (f.data ?? null);
    const req: CallRequest = { function_id: f.function_id, data, callerWorkerId: conn.workerId, timeoutMs: f.timeout_ms, grant, caller: conn.workerId };
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
      if (expectsReply) this.reply(conn, f.invocation_id!, f.function_id, { ok: false, error: { code: "function_not_found", message: `namespace ${namespace} is not reachable` } });
      return;
    }
    // The target namespace checks the same grant and stamps the caller itself.
    const req: Parameters<typeof remote.trigger>[0] = { function_id: f.function_id, payload: f.data ?? null, timeout_ms: f.timeout_ms, grant: this.grantOf(conn.workerId), caller: `${this.ports.namespace}/${conn.workerId}` };
    if (f.action) req.action = f.action;
    if (f.metadata !== undefined) req.metadata = f.metadata;
    if (f.traceparent) req.traceparent = f.traceparent;
    if (f.baggage) req.baggage = f.baggage;
    const call = remote.trigger(req).catch((e): CallOutcome => ({ ok: false, error: toErrorBody(e, "invocation_error") }));
    if (expectsReply) call.then((o) => this.reply(conn, f.invocation_id!, f.function_id, o, f));
    else this.ports.background(call);
  }

  private reply(conn: Conn, invocationId: string, functionId: string, outcome: CallOutcome, trace?: { traceparent?: string; baggage?: string }): void {
    // The caller may have gone meanwhile: its result is dropped (§2.5 step 3).
    if (this.conns.get(conn.workerId) !== conn) return;
    const frame: EngineFrame = { type: "invocationresult", invocation_id: invocationId, function_id: functionId };
    if (outcome.ok) {
      if (outcome.result !== undefined) frame.result = outcome.result;
    } else frame.error = outcome.error;
    if (trace?.traceparent) frame.traceparent = trace.traceparent;
    if (trace?.baggage) frame.baggage = trace.baggage;
    if (conn.send(frame) === "too_large") {
      conn.send({ type: "invocationresult", invocation_id: invocationId, function_id: functionId, error: { code: "result_too_large", message: `the result of ${functionId} is larger than ${MAX_FRAME_BYTES} bytes` } });
    }
  }

  async enqueue(req: EnqueueRequest): Promise<CallOutcome> {
    if (!this.queueProvider) return { ok: false, error: { code: "enqueue_error", message: "no queue provider is configured" } };
    try {
      return await this.queueProvider.enqueue(req);
    } catch (e) {
      return { ok: false, error: toErrorBody(e, "enqueue_error") };
    }
  }

  /**
   * A call from outside this object by RPC (the front door's /_iii/invoke, another namespace, an
   * edge host): a caller with a grant is checked against it, and `_caller_worker_id` is always
   * stamped here, never taken from the payload.
   */
  invokeFrom(req: Omit<CallRequest, "callerWorkerId" | "route" | "caller"> & { stampCaller?: string }): Promise<CallOutcome> {
    const { stampCaller, ...call } = req;
    if (call.grant && !mayCall(call.grant, call.function_id)) {
      return Promise.resolve({ ok: false, error: { code: "FORBIDDEN", message: `'${call.grant.sub}' may not call ${call.function_id}` } });
    }
    // A worker in another namespace is stamped as `<namespace>/<worker id>`; an HTTP caller is no
    // worker, so it gets none — and a claimed one is dropped either way.
    let data = call.data;
    if (isObject(data)) {
      const { _caller_worker_id: _claimed, ...rest } = data;
      data = stampCaller ? { ...rest, _caller_worker_id: stampCaller } : rest;
    }
    const caller = stampCaller ?? (call.grant ? `http:${call.grant.sub}` : undefined);
    return this.invoke(caller ? { ...call, data, caller } : { ...call, data });
  }

  /** Call a function, wherever it lives. Always settles: result, error, or `timeout`. */
  async invoke(req: CallRequest): Promise<CallOutcome> {
    if (req.caller === undefined) return this.invokeUncounted(req);
    // Bounded per caller: one flood of never-answered calls cannot hold the object's memory.
    const open = this.openByCaller.get(req.caller) ?? 0;
    if (open >= MAX_OPEN_CALLS_PER_CALLER) return { ok: false, error: { code: "too_many_calls", message: `${MAX_OPEN_CALLS_PER_CALLER} calls of this caller are open already; wait for some to finish` } };
    this.openByCaller.set(req.caller, open + 1);
    try {
      return await this.invokeUncounted(req);
    } finally {
      const left = (this.openByCaller.get(req.caller) ?? 1) - 1;
      if (left > 0) this.openByCaller.set(req.caller, left);
      else this.openByCaller.delete(req.caller);
    }
  }

  private async invokeUncounted(req: CallRequest): Promise<CallOutcome> {
    const invocationId = req.invocationId && !this.pending.has(req.invocationId) ? req.invocationId : this.ports.newId();
    const builtin = this.builtins.get(req.function_id);
    if (builtin) {
      try {
        const ctx: CallContext = { invocationId, callerWorkerId: req.callerWorkerId, grant: req.grant ?? OPEN_GRANT, metadata: req.metadata, traceparent: req.traceparent, baggage: req.baggage };
        const result = await builtin.handler(req.data, ctx);
        return { ok: true, result };
      } catch (e) {
        return { ok: false, error: toErrorBody(e) };
      }
    }
    let fn = this.catalog.functions.get(req.function_id);
    if (!fn && this.edgeRefresh) {
      await this.edgeRefresh;
      fn = this.catalog.functions.get(req.function_id);
    }
    if (!fn) return { ok: false, error: { code: "function_not_found", message: `Function ${req.function_id} not found` } };
    if (this.pending.size + this.deadlines.size >= MAX_OPEN_CALLS) {
      return { ok: false, error: { code: "too_many_calls", message: `the engine has ${MAX_OPEN_CALLS} calls open; try again shortly` } };
    }
    const timeoutMs = req.timeoutMs ?? DEFAULT_INVOKE_TIMEOUT_MS;
    switch (fn.kind) {
      case "worker":
        return this.invokeWorker(fn, req, invocationId, timeoutMs);
      case "edge":
        return this.withDeadline(fn, timeoutMs, async () => {
          const host = this.ports.edgeHosts[fn.owner];
          if (!host) return { ok: false, error: { code: "function_not_found", message: `edge host ${fn.owner} is not bound` } };
          const payload: Parameters<typeof host.iiiInvoke>[0] = { function_id: fn.id, data: req.data, invocation_id: invocationId, namespace: this.ports.namespace };
          if (req.metadata !== undefined) payload.metadata = req.metadata;
          if (req.traceparent) payload.traceparent = req.traceparent;
          if (req.baggage) payload.baggage = req.baggage;
          const r = await host.iiiInvoke(payload);
          return "error" in r && r.error ? { ok: false, error: r.error } : { ok: true, result: (r as { result?: unknown }).result };
        });
      case "http":
        return this.withDeadline(fn, timeoutMs, async () => {
          if (!this.ports.httpFunctions || !fn.invocation) return { ok: false, error: { code: "function_not_invokable", message: "HTTP-invoked functions are not enabled" } };
          return this.ports.httpFunctions.invoke({ id: fn.id, invocation: fn.invocation }, req.data, invocationId);
        });
    }
  }

  private invokeWorker(fn: FunctionRecord, req: CallRequest, invocationId: string, timeoutMs: number): Promise<CallOutcome> {
    const conn = this.conns.get(fn.owner);
    if (!conn) return Promise.resolve({ ok: false, error: { code: "invocation_stopped", message: `the worker owning ${fn.id} is not connected` } });
    const busy = this.openByTarget.get(fn.owner) ?? 0;
    if (busy >= MAX_OPEN_CALLS_PER_TARGET) {
      return Promise.resolve({ ok: false, error: { code: "too_many_calls", message: `the worker owning ${fn.id} has ${MAX_OPEN_CALLS_PER_TARGET} calls open already` } });
    }
    return new Promise<CallOutcome>((resolve) => {
      const now = this.ports.clock.now();
      const entry: Pending = { target: fn.owner, function_id: fn.id, resolve, deadline: now + timeoutMs, startedAt: now };
      this.deadlines.add(invocationId, entry.deadline, () => this.settle(invocationId, this.timeoutOutcome(fn.id, timeoutMs)));
      this.openByTarget.set(fn.owner, busy + 1);
      // The caller id in the route must be the invocation's, so only the caller's own id qualifies.
      if (req.route && invocationId === req.invocationId) {
        entry.route = req.route;
        this.schedulePersist();
      }
      this.pending.set(invocationId, entry);
      const frame: EngineFrame = { type: "invokefunction", invocation_id: invocationId, function_id: fn.id, data: req.data };
      if (req.metadata !== undefined) frame.metadata = req.metadata;
      if (req.traceparent) frame.traceparent = req.traceparent;
      if (req.baggage) frame.baggage = req.baggage;
      if (!conn.send(frame)) this.settle(invocationId, { ok: false, error: { code: "channel_send_failed", message: `could not write to the worker owning ${fn.id}` } });
    });
  }

  private async withDeadline(fn: FunctionRecord, timeoutMs: number, run: () => Promise<CallOutcome>): Promise<CallOutcome> {
    const id = `deadline:${this.ports.newId()}`;
    const deadline = new Promise<CallOutcome>((resolve) => {
      this.deadlines.add(id, this.ports.clock.now() + timeoutMs, () => resolve({ ok: false, error: { code: "timeout", message: `${fn.id} did not answer within ${timeoutMs} ms` } }));
    });
    try {
      return await Promise.race([run().catch((e): CallOutcome => ({ ok: false, error: toErrorBody(e) })), deadline]);
    } finally {
      this.deadlines.cancel(id);
    }
  }

  private settle(invocationId: string, outcome: CallOutcome): void {
    const p = this.pending.get(invocationId);
    if (!p) return;
    this.pending.delete(invocationId);
    this.deadlines.cancel(invocationId);
    const busy = (this.openByTarget.get(p.target) ?? 1) - 1;
    if (busy > 0) this.openByTarget.set(p.target, busy);
    else this.openByTarget.delete(p.target);
    if (p.persisted) this.ports.sql.exec("DELETE FROM routed_calls WHERE id = ?", invocationId);
    p.resolve(outcome);
  }

  private timeoutOutcome(functionId: string, timeoutMs?: number): CallOutcome {
    const within = timeoutMs === undefined ? "before its deadline" : `within ${timeoutMs} ms`;
    return { ok: false, error: { code: "timeout", message: `${functionId} did not answer ${within}` } };
  }

  /** Write routed calls open longer than PERSIST_AFTER_MS; one timer for all of them. */
  private schedulePersist(): void {
    if (this.persistTimer !== null) return;
    this.persistTimer = this.ports.timers.set(() => {
      this.persistTimer = null;
      const now = this.ports.clock.now();
      let waiting = false;
      let wrote = false;
      for (const [id, p] of this.pending) {
        if (!p.route || p.persisted) continue;
        // Timers fire a little early or late: anything at least half-way there goes now.
        if (now - p.startedAt < PERSIST_AFTER_MS / 2) {
          waiting = true;
          continue;
        }
        this.ports.sql.exec(
          "INSERT OR REPLACE INTO routed_calls (id, function_id, target, caller, deadline, traceparent, baggage) VALUES (?, ?, ?, ?, ?, ?, ?)",
          id, p.function_id, p.target, p.route.caller, p.deadline, p.route.traceparent ?? null, p.route.baggage ?? null,
        );
        p.persisted = true;
        wrote = true;
      }
      if (wrote) this.rearmAlarm();
      if (waiting) this.schedulePersist();
    }, PERSIST_AFTER_MS);
  }

  /**
   * After an eviction: routed calls that were open are re-attached to their caller. Their target
   * answers on the same socket (it never knew), so the result still finds its way back; a target
   * that is gone ends the call with `invocation_stopped`, a passed deadline with `timeout`.
   */
  private restoreRoutedCalls(): void {
    const now = this.ports.clock.now();
    const rows = this.ports.sql.exec<{ id: string; function_id: string; target: string; caller: string; deadline: number; traceparent: string | null; baggage: string | null }>(
      "SELECT * FROM routed_calls",
    );
    for (const r of rows) {
      const caller = this.conns.get(r.caller);
      const trace = { traceparent: r.traceparent ?? undefined, baggage: r.baggage ?? undefined };
      const answer = (o: CallOutcome) => {
        if (caller) this.reply(caller, r.id, r.function_id, o, trace);
      };
      if (this.pending.has(r.id)) continue;
      if (!caller || !this.conns.has(r.target) || r.deadline <= now) {
        this.ports.sql.exec("DELETE FROM routed_calls WHERE id = ?", r.id);
        if (!this.conns.has(r.target)) answer(TARGET_GONE);
        else answer(this.timeoutOutcome(r.function_id));
        continue;
      }
      this.deadlines.add(r.id, r.deadline, () => this.settle(r.id, this.timeoutOutcome(r.function_id)));
      this.openByTarget.set(r.target, (this.openByTarget.get(r.target) ?? 0) + 1);
      this.pending.set(r.id, { target: r.target, function_id: r.function_id, deadline: r.deadline, startedAt: now, route: { caller: r.caller, ...trace }, persisted: true, resolve: answer });
    }
  }

  activeInvocations(workerId: string): number {
    let n = 0;
    for (const p of this.pending.values()) if (p.target === workerId) n++;
    return n;
  }

  /**
   * Fire a trigger binding: condition first (only a literal `false` or an error skips, §8), then
   * the bound function with the binding's metadata. A binding to a function that does not exist
   * (yet) is dropped with a log line (§4.5).
   */
  async fire(binding: TriggerRecord, payload: unknown, opts: { withMetadata?: boolean; timeoutMs?: number } = {}): Promise<CallOutcome | "skipped"> {
    const cond = isObject(binding.config) && typeof binding.config.condition_function_id === "string" ? binding.config.condition_function_id : undefined;
    if (cond) {
      const c = await this.invoke({ function_id: cond, data: payload, timeoutMs: opts.timeoutMs });
      if (!c.ok || c.result === false) return "skipped";
    }
    if (!this.functionExists(binding.function_id)) {
      this.ports.log.info("trigger fired for a function that is not registered", { trigger: binding.id, function_id: binding.function_id });
      return { ok: false, error: { code: "function_not_found", message: `Function ${binding.function_id} not found` } };
    }
    const req: CallRequest = { function_id: binding.function_id, data: payload, timeoutMs: opts.timeoutMs };
    if (opts.withMetadata !== false && binding.metadata !== undefined) req.metadata = binding.metadata;
    return this.invoke(req);
  }

  functionExists(id: string): boolean {
    return this.builtins.has(id) || this.catalog.functions.has(id);
  }

  activeBindings(type: string): TriggerRecord[] {
    return this.catalog.triggersOfType(type).filter((t) => t.status === "active");
  }

  // ---------------------------------------------------------------- discovery (pushed on change)

  private functionsSignature(): string {
    return [...this.builtins.keys(), ...this.catalog.functions.keys()].sort().join("\n");
  }

  functionsMaybeChanged(): void {
    if (this.functionsTimer !== null) return;
    this.functionsTimer = this.ports.timers.set(() => {
      this.functionsTimer = null;
      const sig = this.functionsSignature();
      if (sig === this.lastFunctionsSignature) return;
      this.lastFunctionsSignature = sig;
      const bindings = this.activeBindings(TRIGGER_TYPES.functionsAvailable);
      if (bindings.length === 0) return;
      const payload = { event: "functions_changed", functions: this.functionSummaries(true) };
      for (const b of bindings) this.ports.background(this.fire(b, payload));
    }, FUNCTIONS_CHANGED_DEBOUNCE_MS);
  }

  private fireWorkersChanged(event: "worker_connected" | "worker_disconnected" | "worker_metadata_updated", workerId: string): void {
    for (const b of this.activeBindings(TRIGGER_TYPES.workersAvailable)) {
      this.ports.background(this.fire(b, { event, worker_id: workerId }));
    }
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

  isInternal(id: string, metadata?: Record<string, unknown>): boolean {
    if (metadata?.internal === true) return true;
    const b = this.builtins.get(id);
    return b?.internal === true;
  }

  functionSummaries(includeInternal: boolean): { function_id: string; worker_name: string; description?: string; metadata?: Record<string, unknown> }[] {
    const out: { function_id: string; worker_name: string; description?: string; metadata?: Record<string, unknown> }[] = [];
    for (const b of this.builtins.values()) {
      if (!includeInternal && b.internal) continue;
      out.push({ function_id: b.id, worker_name: b.id.split("::")[0] ?? b.id, description: b.description });
    }
    for (const f of this.catalog.functions.values()) {
      if (!includeInternal && this.isInternal(f.id, f.metadata)) continue;
      const s: { function_id: string; worker_name: string; description?: string; metadata?: Record<string, unknown> } = { function_id: f.id, worker_name: this.functionOwnerName(f) };
      if (f.description !== undefined) s.description = f.description;
      if (f.metadata !== undefined) s.metadata = f.metadata;
      out.push(s);
    }
    return out.sort((a, b) => (a.function_id < b.function_id ? -1 : a.function_id > b.function_id ? 1 : 0));
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

  refreshEdgeHosts(): Promise<void> {
    if (this.edgeRefresh) return this.edgeRefresh;
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
        const keep = new Set(manifest.functions.map((f) => f.id));
        for (const f of [...this.catalog.functions.values()]) {
          if (f.kind === "edge" && f.owner === name && !keep.has(f.id)) this.catalog.deleteFunction(f.id, name);
        }
        for (const f of manifest.functions) {
          if (this.builtins.has(f.id)) continue;
          const rec: FunctionRecord = { id: f.id, kind: "edge", owner: name };
          if (f.description !== undefined) rec.description = f.description;
          if (f.request_format !== undefined) rec.request_format = f.request_format;
          if (f.response_format !== undefined) rec.response_format = f.response_format;
          if (f.metadata !== undefined) rec.metadata = f.metadata;
          // The manifest is reloaded on every wake: write only what changed.
          const had = this.catalog.functions.get(f.id);
          if (!had || JSON.stringify(had) !== JSON.stringify(rec)) this.catalog.putFunction(rec);
        }
        const keepTriggers = new Set(manifest.triggers.map((t) => t.id));
        for (const t of [...this.catalog.triggers.values()]) if (t.owner === owner && !keepTriggers.has(t.id)) this.removeTrigger(t.id);
        for (const t of manifest.triggers) {
          // Unchanged bindings stay as they are (a cron schedule keeps its next occurrence).
          const had = this.catalog.triggers.get(t.id);
          const same = had && had.owner === owner && had.trigger_type === t.trigger_type && had.function_id === t.function_id &&
            JSON.stringify(had.config ?? null) === JSON.stringify(t.config ?? null) && JSON.stringify(had.metadata) === JSON.stringify(t.metadata);
          if (same) continue;
          const err = this.registerTrigger(owner, { id: t.id, trigger_type: t.trigger_type, function_id: t.function_id, config: t.config ?? null, metadata: t.metadata });
          if (err) this.ports.log.warn("edge host trigger refused", { host: name, id: t.id, ...err });
        }
      }
      this.functionsMaybeChanged();
    };
    this.edgeRefresh = run().finally(() => {
      this.edgeRefresh = null;
    });
    return this.edgeRefresh;
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
