// Direct calls between connection shards: the hot path of a sharded namespace. A worker's call to a
// function whose worker sits on a shard (its own or another) goes shard → shard in one DO RPC
// (`shardInvoke`) instead of four one-way hops through the catalog object. The catalog stays the
// source of truth: a route comes only from its answer (`shardRoute`), the target shard checks at
// every call that the worker still holds the function as far as it has seen (its socket is open,
// it has not unregistered the id since), and anything the direct path is unsure of — a first call,
// a built-in, an edge or HTTP function, an enqueue or void call, another namespace, a caller over
// its budget, a refused grant, a stale route, an unreachable shard — goes through the catalog
// exactly as before, whose answer (an error included) is authoritative.
import {
  DEFAULT_INVOKE_TIMEOUT_MS,
  MAX_FRAME_BYTES,
  byteSize,
  mayCall,
  parseWorkerFrame,
  peekCallIds,
  peekResultId,
  shardInvokeRequest,
  toErrorBody,
  type CallOutcome,
  type Grant,
  type ShardInvokeOutcome,
  type ShardInvokeRequest,
  type ShardRoute,
} from "@iii-edge/protocol";
import { MAX_OPEN_CALLS_PER_CALLER, MAX_OPEN_CALLS_PER_TARGET } from "../core/bounds.ts";
import { CallTable, Counts, invokeFrame, sendResult, stampCaller, timeoutOutcome, withoutClaimedPrincipal } from "../core/call-table.ts";
import type { OpenCall } from "../core/call-table.ts";
import { Deadlines } from "../core/deadlines.ts";
import type { Clock, Timers, TraceContext } from "../core/ports.ts";
import { SocketConn } from "../core/socket-conn.ts";
import { CONTROL_FRAMES, SocketBudget } from "../core/socket-budget.ts";
import { shardOf } from "./config.ts";

/** A route the catalog gave is used for this long, then looked up again: the target shard's view of
 * what its workers let go is memory, lost if it hibernates, so this bounds how long a route could
 * outlive an unregister the target did not see (a disconnect it always sees). */
export const ROUTE_TTL_MS = 10_000;
/** "Not a sharded worker's function" (a built-in, an edge function, unknown) is remembered this long:
 * such calls go through the catalog, and a function registered meanwhile goes direct after this. */
export const NO_ROUTE_TTL_MS = 1_000;
/** Route entries one shard keeps (about 100 bytes each); past it the cache starts over. */
export const MAX_ROUTES = 10_000;
/** The target shard ends a direct call this long after the caller's deadline, so its own timer never
 * beats the caller's (which answers `timeout`) and its entry never outlives the call. */
const TARGET_DEADLINE_SLACK_MS = 1_000;

export interface DirectPeers {
  /** This shard's object name. */
  readonly name: string;
  route(functionId: string): Promise<ShardRoute>;
  invokeOn(shard: string, req: ShardInvokeRequest): Promise<ShardInvokeOutcome>;
  /** The catalog path for a frame the direct path gave back. */
  viaCatalog(workerId: string, raw: string): void;
  socketOf(workerId: string): WebSocket | undefined;
}

/** The object's clock, timers and ids (the engine core's ports, core/ports.ts). */
export interface DirectCallPorts {
  clock: Clock;
  timers: Timers;
  newId(): string;
}

export class DirectCalls {
  private readonly peers: DirectPeers;
  private readonly ports: DirectCallPorts;
  private readonly defaultTimeoutMs: number;
  /** Every deadline of this shard's direct calls, both sides, under one timer (core/deadlines.ts):
   * workerd caps an isolate's active timers, and a timer per call cost ~9 % of a routed call. */
  private readonly deadlines: Deadlines;
  /** Names the caller side's deadlines: a caller picks its own invocation ids, and may repeat one. */
  private callSeq = 0;
  /** Caller side: the grant of each socket on this shard (from the front door, or its attachment). */
  readonly grants = new Map<string, Grant>();
  private readonly routes = new Map<string, { route: ShardRoute; until: number }>();
  private readonly lookups = new Set<string>();
  private readonly budgets = new Map<string, SocketBudget>();
  private readonly openByCaller = new Counts();
  /** Target side: calls sent to this shard's workers, by the invocation id written to the socket
   * (the engine's own table: core/call-table.ts). */
  private readonly pending: CallTable<OpenCall>;
  /** Function ids each worker here unregistered (since this object woke): routes to them are stale. */
  private readonly letGo = new Map<string, Set<string>>();

  constructor(peers: DirectPeers, ports: DirectCallPorts, defaultTimeoutMs = DEFAULT_INVOKE_TIMEOUT_MS) {
    this.peers = peers;
    this.ports = ports;
    this.defaultTimeoutMs = defaultTimeoutMs;
    this.deadlines = new Deadlines(ports.timers, ports.clock);
    this.pending = new CallTable(this.deadlines);
  }

  /** Deadlines armed (caller and target side): none once every call has ended. */
  get openDeadlines(): number {
    return this.deadlines.size;
  }

  // ---------------------------------------------------------------- caller side

  private routeFor(functionId: string, now: number): ShardRoute {
    const e = this.routes.get(functionId);
    if (e && e.until > now) return e.route;
    if (!this.lookups.has(functionId)) {
      this.lookups.add(functionId);
      this.peers
        .route(functionId)
        .then((route) => {
          if (this.routes.size >= MAX_ROUTES) this.routes.clear();
          this.routes.set(functionId, { route, until: this.ports.clock.now() + (route ? ROUTE_TTL_MS : NO_ROUTE_TTL_MS) });
        })
        .catch(() => {})
        .finally(() => this.lookups.delete(functionId));
    }
    return null;
  }

  /**
   * A frame from worker `workerId`: a result of a direct call to it (consumed), or a call that can go
   * direct (dispatched). False: the frame goes to the catalog. `inOrder` says no earlier frame of this
   * socket is still on its way to the catalog (a direct call never overtakes one).
   */
  intercept(workerId: string, _ws: WebSocket, raw: string | ArrayBuffer, inOrder: boolean): boolean {
    if (typeof raw !== "string") return false;
    if (this.pending.size > 0 && this.onResult(workerId, raw)) return true;
    this.observe(workerId, raw);
    // Out of turn, or over the frame limit (the catalog refuses that one with frame_too_large).
    if (!inOrder || byteSize(raw) > MAX_FRAME_BYTES) return false;
    const ids = peekCallIds(raw);
    if (!ids) return false;
    const grant = this.grants.get(workerId);
    if (!grant) return false;
    const now = this.ports.clock.now();
    const route = this.routeFor(ids.function_id, now);
    if (!route) return false;
    let budget = this.budgets.get(workerId);
    if (!budget) this.budgets.set(workerId, (budget = new SocketBudget(now, CONTROL_FRAMES)));
    // Over its budget, a socket's calls go where the catalog's own budget answers them.
    if (budget.admit(raw.length, now) !== "admit") return false;
    if (this.openByCaller.get(workerId) >= MAX_OPEN_CALLS_PER_CALLER) return false;
    const parsed = parseWorkerFrame(raw);
    if (!parsed.ok || parsed.frame.type !== "invokefunction") return false;
    const f = parsed.frame;
    if (!f.invocation_id || f.action || f.function_id !== ids.function_id) return false;
    if (f.namespace && f.namespace !== shardOf(this.peers.name)?.namespace) return false;
    // A refused call is the catalog's to answer (its error text, its log line).
    if (!mayCall(grant, f.function_id)) return false;
    // The caller's id, stamped as the core stamps it. Functions told who calls them are never routed
    // here (catalog-side.ts route): a claimed principal is dropped, as the core drops it for a
    // function that did not ask.
    const data = stampCaller(f.data, workerId, withoutClaimedPrincipal);
    const timeoutMs = f.timeout_ms ?? this.defaultTimeoutMs;
    const req: ShardInvokeRequest = { worker_id: route.worker_id, function_id: f.function_id, data, timeout_ms: timeoutMs };
    if (f.metadata !== undefined) req.metadata = f.metadata;
    if (f.traceparent) req.traceparent = f.traceparent;
    if (f.baggage) req.baggage = f.baggage;
    this.openByCaller.add(workerId);
    const invocationId = f.invocation_id;
    const key = `call:${++this.callSeq}`;
    let ended = false;
    // The first of the answer and the deadline ends the call; the other is ignored.
    const end = (outcome: ShardInvokeOutcome): void => {
      if (ended) return;
      ended = true;
      this.deadlines.cancel(key);
      this.openByCaller.drop(workerId);
      if ("stale" in outcome) {
        this.routes.delete(f.function_id);
        this.peers.viaCatalog(workerId, raw);
        return;
      }
      this.reply(workerId, invocationId, f.function_id, outcome, f);
    };
    this.deadlines.add(key, now + timeoutMs, () => end(timeoutOutcome(f.function_id, timeoutMs)));
    const call: Promise<ShardInvokeOutcome> =
      route.shard === this.peers.name ? this.invokeHere(req) : this.peers.invokeOn(route.shard, req);
    call.then(end, () => end({ stale: true }));
    return true;
  }

  private reply(workerId: string, invocationId: string, functionId: string, outcome: CallOutcome, trace: TraceContext): void {
    const ws = this.peers.socketOf(workerId);
    // The caller may have gone meanwhile: its result is dropped (§2.5 step 3).
    if (!ws) return;
    sendResult(new SocketConn(ws, workerId), invocationId, functionId, outcome, trace);
  }

  /** The worker's unregistrations, as this shard sees them pass (the frames still go on to the
   * catalog): an id it let go is never called directly on it again, even if it registers the id
   * anew — the catalog may have given the id to another worker meanwhile, and only the catalog knows,
   * so such calls go through it. */
  private observe(workerId: string, raw: string): void {
    if (!raw.includes("unregisterfunction")) return;
    const parsed = parseWorkerFrame(raw);
    if (!parsed.ok || parsed.frame.type !== "unregisterfunction") return;
    let s = this.letGo.get(workerId);
    if (!s) this.letGo.set(workerId, (s = new Set()));
    s.add(parsed.frame.id);
  }

  // ---------------------------------------------------------------- target side

  /** Run a direct call on one of this shard's workers (the `shardInvoke` RPC, or a same-shard call). */
  invokeHere(sent: unknown): Promise<ShardInvokeOutcome> {
    const parsed = shardInvokeRequest.safeParse(sent);
    if (!parsed.success)
      return Promise.resolve({
        ok: false,
        error: { code: "invalid_frame", message: `shardInvoke: ${parsed.error.issues[0]?.message ?? "invalid"}` },
      });
    const req = parsed.data;
    const ws = this.peers.socketOf(req.worker_id);
    if (!ws || this.letGo.get(req.worker_id)?.has(req.function_id)) return Promise.resolve({ stale: true });
    // At the bound, the catalog answers (too_many_calls, with its own count of the target's calls).
    if (this.pending.openOn(req.worker_id) >= MAX_OPEN_CALLS_PER_TARGET) return Promise.resolve({ stale: true });
    const invocationId = this.ports.newId();
    const text = JSON.stringify(invokeFrame(invocationId, req.function_id, req.data, req));
    if (byteSize(text) > MAX_FRAME_BYTES) return Promise.resolve({ stale: true });
    return new Promise<CallOutcome>((resolve) => {
      const deadline = this.ports.clock.now() + req.timeout_ms + TARGET_DEADLINE_SLACK_MS;
      this.pending.open(invocationId, { target: req.worker_id, resolve }, deadline, timeoutOutcome(req.function_id, req.timeout_ms));
      try {
        ws.send(text);
      } catch (e) {
        this.pending.settle(invocationId, { ok: false, error: toErrorBody(e, "channel_send_failed") });
      }
    });
  }

  /** A result from `workerId` for a direct call sent to it (results count only from that worker). */
  private onResult(workerId: string, raw: string): boolean {
    const id = peekResultId(raw);
    if (!id || this.pending.targetOf(id) !== workerId) return false;
    const parsed = parseWorkerFrame(raw);
    if (!parsed.ok || parsed.frame.type !== "invocationresult") {
      this.pending.settle(id, {
        ok: false,
        error: {
          code: "invocation_failed",
          message: `the worker sent an invalid result: ${parsed.ok ? "not a result" : parsed.error.message}`,
        },
      });
      return true;
    }
    const f = parsed.frame;
    this.pending.settle(id, f.error ? { ok: false, error: f.error } : { ok: true, result: f.result ?? undefined });
    return true;
  }

  /** A socket here closed: direct calls sent to it end now, and what was kept for it goes. */
  gone(workerId: string): void {
    this.pending.targetGone(workerId);
    this.grants.delete(workerId);
    this.budgets.delete(workerId);
    this.letGo.delete(workerId);
  }
}
