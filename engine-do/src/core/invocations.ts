// The invocation table: every call the engine routed to a worker and that is not answered yet, its
// deadline (deadlines.ts: one timer for every open call, routed, Worker-hosted or HTTP-invoked),
// the open-call bounds of bounds.ts, and the eviction persistence of long calls: a routed call open
// longer than PERSIST_AFTER_MS is a row of `routed_calls`, so an eviction in the middle of it loses
// neither the caller's answer nor its deadline. Who may answer a call is decided here too: only the
// worker it was sent to.
import { MAX_FRAME_BYTES, toErrorBody } from "@iii-edge/protocol";
import type { AlarmClient, CallRequest, SocketRoute } from "./api.ts";
import { DEFAULT_OPEN_CALL_LIMITS, MAX_OPEN_CALLS_PER_CALLER, MAX_OPEN_CALLS_PER_TARGET, type OpenCallLimits } from "./bounds.ts";
import { CallTable, Counts, TARGET_GONE, invokeFrame, timeoutOutcome, type OpenCall } from "./call-table.ts";
import { Deadlines } from "./deadlines.ts";
import type { CallOutcome, Conn, EnginePorts, TraceContext } from "./ports.ts";

/**
 * A routed call still open after this long is written to SQLite, so an eviction in the middle of
 * it (a long model call, say) loses neither the caller's answer nor its deadline. Shorter calls —
 * nearly all of them — never touch storage (the fast path stays in memory).
 */
const PERSIST_AFTER_MS = 1_000;

interface Pending extends OpenCall {
  function_id: string;
  deadline: number;
  startedAt: number;
  /** Set when a worker socket is the caller: what it takes to answer it after an eviction. */
  route?: SocketRoute;
  /** Written to `routed_calls` (long-running): deleted again when the call settles. */
  persisted?: boolean;
}

/** How a restored call answers its caller (the engine's reply: dropped if the caller is gone). */
export type ReplyTo = (conn: Conn, invocationId: string, functionId: string, outcome: CallOutcome, trace?: TraceContext) => void;

export class Invocations implements AlarmClient {
  private readonly ports: EnginePorts;
  /** Every open call's deadline (routed, Worker-hosted, HTTP-invoked) on one timer. */
  private readonly deadlines: Deadlines;
  /** Routed calls, counted per target (MAX_OPEN_CALLS_PER_TARGET). */
  private readonly pending: CallTable<Pending>;
  /** Open calls per caller and per principal, for MAX_OPEN_CALLS_PER_*. */
  private readonly openByCaller = new Counts();
  private readonly openByPrincipal = new Counts();
  /** Calls counted against some principal, open now (what TRUSTED_OPEN_CALLS_RESERVE is kept from). */
  private openOfPrincipals = 0;
  private readonly limits: OpenCallLimits;
  private persistTimer: unknown = null;
  /** The id a function's worker knows it by, put in the invokefunction frame (the engine sets it:
   * iii's RBAC listener may register a function under a prefixed id). */
  wireName: (fn: { id: string; owner: string }) => string = (fn) => fn.id;
  /** The engine's alarm, re-armed once a persisted call's deadline needs it. */
  private readonly rearmAlarm: () => void;

  constructor(ports: EnginePorts, rearmAlarm: () => void, limits: OpenCallLimits = DEFAULT_OPEN_CALL_LIMITS) {
    this.ports = ports;
    this.limits = limits;
    this.rearmAlarm = rearmAlarm;
    this.deadlines = new Deadlines(ports.timers, ports.clock);
    this.pending = new CallTable<Pending>(this.deadlines, (id, p) => {
      if (p.persisted) this.ports.sql.exec("DELETE FROM routed_calls WHERE id = ?", id);
    });
  }

  // ---------------------------------------------------------------- the alarm (persisted calls)

  /** A persisted call's deadline, for an object that was evicted (its timers are gone). */
  nextDue(): number | null {
    let next: number | null = null;
    for (const p of this.pending.values()) if (p.persisted && (next === null || p.deadline < next)) next = p.deadline;
    return next;
  }

  async run(now: number): Promise<void> {
    for (const [id, p] of [...this.pending.entries()])
      if (p.persisted && p.deadline <= now) this.pending.settle(id, timeoutOutcome(p.function_id));
  }

  // ---------------------------------------------------------------- bounds

  /** The call's invocation id: the requested one unless a call of that id is open already. */
  idFor(requested: string | undefined): string {
    return requested && !this.pending.has(requested) ? requested : this.ports.newId();
  }

  /** Run `call` counted against its caller (MAX_OPEN_CALLS_PER_CALLER) and the principal it runs
   * for (MAX_OPEN_CALLS_PER_PRINCIPAL): one flood of never-answered calls cannot hold the object's
   * memory, and one principal's many connections cannot take the table from everyone else. Either
   * key may be absent (the engine's own calls are neither a caller's nor a principal's). */
  async counted(who: { caller?: string; principal?: string }, call: () => Promise<CallOutcome>): Promise<CallOutcome> {
    const { caller, principal } = who;
    const open = caller === undefined ? 0 : this.openByCaller.get(caller);
    if (open >= MAX_OPEN_CALLS_PER_CALLER)
      return {
        ok: false,
        error: {
          code: "too_many_calls",
          message: `${MAX_OPEN_CALLS_PER_CALLER} calls of this caller are open already; wait for some to finish`,
        },
      };
    const held = principal === undefined ? 0 : this.openByPrincipal.get(principal);
    if (held >= this.limits.perPrincipal)
      return {
        ok: false,
        error: {
          code: "too_many_calls",
          message: `'${principal}' has ${this.limits.perPrincipal} calls open in this namespace already; wait for some to finish`,
        },
      };
    if (caller !== undefined) this.openByCaller.add(caller);
    if (principal !== undefined) {
      this.openByPrincipal.add(principal);
      this.openOfPrincipals++;
    }
    try {
      return await call();
    } finally {
      if (caller !== undefined) this.openByCaller.drop(caller);
      if (principal !== undefined) {
        this.openByPrincipal.drop(principal);
        this.openOfPrincipals--;
      }
    }
  }

  /** The answer for one more call when the table is full for it, else nothing: principals' calls
   * together may hold the table but for TRUSTED_OPEN_CALLS_RESERVE, trusted calls all of it. */
  full(ofPrincipal: boolean): CallOutcome | undefined {
    // Every open call, routed or not, has exactly one deadline.
    const open = this.deadlines.size;
    if (open >= this.limits.total)
      return { ok: false, error: { code: "too_many_calls", message: `the engine has ${this.limits.total} calls open; try again shortly` } };
    // The principal's own call is counted already (counted() runs before the table is looked at).
    if (ofPrincipal && this.openOfPrincipals > this.limits.total - this.limits.trustedReserve) {
      return {
        ok: false,
        error: {
          code: "too_many_calls",
          message: `callers with a token have ${this.limits.total - this.limits.trustedReserve} calls open in this namespace; try again shortly`,
        },
      };
    }
    return undefined;
  }

  // ---------------------------------------------------------------- calls

  /** Send a call to the worker `conn` (which owns `fn`) and wait for its result or deadline. */
  route(conn: Conn, fn: { id: string; owner: string }, req: CallRequest, invocationId: string, timeoutMs: number): Promise<CallOutcome> {
    if (this.pending.openOn(fn.owner) >= MAX_OPEN_CALLS_PER_TARGET) {
      return Promise.resolve({
        ok: false,
        error: { code: "too_many_calls", message: `the worker owning ${fn.id} has ${MAX_OPEN_CALLS_PER_TARGET} calls open already` },
      });
    }
    return new Promise<CallOutcome>((resolve) => {
      const now = this.ports.clock.now();
      const entry: Pending = { target: fn.owner, function_id: fn.id, resolve, deadline: now + timeoutMs, startedAt: now };
      // The caller id in the route must be the invocation's, so only the caller's own id qualifies.
      if (req.route && invocationId === req.invocationId) entry.route = req.route;
      this.pending.open(invocationId, entry, entry.deadline, timeoutOutcome(fn.id, timeoutMs));
      if (entry.route) this.schedulePersist();
      const sent = conn.send(invokeFrame(invocationId, this.wireName(fn), req.data, req));
      // A call whose frame is over the frame bound was never sent: answered now, not at its deadline.
      if (sent === "too_large")
        this.pending.settle(invocationId, {
          ok: false,
          error: {
            code: "value_too_large",
            message: `the call to ${fn.id} is larger than ${MAX_FRAME_BYTES} bytes with its envelope; send less data`,
          },
        });
      else if (!sent)
        this.pending.settle(invocationId, {
          ok: false,
          error: { code: "channel_send_failed", message: `could not write to the worker owning ${fn.id}` },
        });
    });
  }

  /** A call that is not routed (Worker-hosted, HTTP-invoked), under a deadline on the same timer. */
  async withDeadline(functionId: string, timeoutMs: number, run: () => Promise<CallOutcome>): Promise<CallOutcome> {
    const id = `deadline:${this.ports.newId()}`;
    const deadline = new Promise<CallOutcome>((resolve) => {
      this.deadlines.add(id, this.ports.clock.now() + timeoutMs, () =>
        resolve({ ok: false, error: { code: "timeout", message: `${functionId} did not answer within ${timeoutMs} ms` } }),
      );
    });
    try {
      return await Promise.race([run().catch((e): CallOutcome => ({ ok: false, error: toErrorBody(e) })), deadline]);
    } finally {
      this.deadlines.cancel(id);
    }
  }

  /** A result from worker `from`: it ends the call only if the call was sent to that worker. */
  answer(from: string, invocationId: string, outcome: CallOutcome): void {
    this.pending.answer(from, invocationId, outcome);
  }

  /** The worker disconnected: every call sent to it ends with `invocation_stopped`. */
  targetGone(workerId: string): void {
    this.pending.targetGone(workerId);
  }

  activeFor(workerId: string): number {
    return this.pending.openOn(workerId);
  }

  // ---------------------------------------------------------------- eviction

  /** Write routed calls open longer than PERSIST_AFTER_MS; one timer for all of them. */
  private schedulePersist(): void {
    if (this.persistTimer !== null) return;
    this.persistTimer = this.ports.timers.set(() => {
      this.persistTimer = null;
      const now = this.ports.clock.now();
      let waiting = false;
      let wrote = false;
      for (const [id, p] of this.pending.entries()) {
        if (!p.route || p.persisted) continue;
        // Timers fire a little early or late: anything at least half-way there goes now.
        if (now - p.startedAt < PERSIST_AFTER_MS / 2) {
          waiting = true;
          continue;
        }
        this.ports.sql.exec(
          "INSERT OR REPLACE INTO routed_calls (id, function_id, target, caller, deadline, traceparent, baggage) VALUES (?, ?, ?, ?, ?, ?, ?)",
          id,
          p.function_id,
          p.target,
          p.route.caller,
          p.deadline,
          p.route.traceparent ?? null,
          p.route.baggage ?? null,
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
  restore(conns: ReadonlyMap<string, Conn>, reply: ReplyTo): void {
    const now = this.ports.clock.now();
    const rows = this.ports.sql.exec<{
      id: string;
      function_id: string;
      target: string;
      caller: string;
      deadline: number;
      traceparent: string | null;
      baggage: string | null;
    }>("SELECT * FROM routed_calls");
    for (const r of rows) {
      const caller = conns.get(r.caller);
      const trace = { traceparent: r.traceparent ?? undefined, baggage: r.baggage ?? undefined };
      const answer = (o: CallOutcome) => {
        if (caller) reply(caller, r.id, r.function_id, o, trace);
      };
      if (this.pending.has(r.id)) continue;
      if (!caller || !conns.has(r.target) || r.deadline <= now) {
        this.ports.sql.exec("DELETE FROM routed_calls WHERE id = ?", r.id);
        if (!conns.has(r.target)) answer(TARGET_GONE);
        else answer(timeoutOutcome(r.function_id));
        continue;
      }
      this.pending.open(
        r.id,
        {
          target: r.target,
          function_id: r.function_id,
          deadline: r.deadline,
          startedAt: now,
          route: { caller: r.caller, ...trace },
          persisted: true,
          resolve: answer,
        },
        r.deadline,
        timeoutOutcome(r.function_id),
      );
    }
  }
}
