// What every path that sends a call to a worker socket shares: the table of calls sent and not yet
// answered (counted per target, each under a deadline), the per-caller counts, the frames of a call
// and of its answer, and the caller's id stamped on the payload. The engine's invocations
// (invocations.ts) and a connection shard's direct calls (../shards/direct-calls.ts) both run on
// these, so a call answers alike whichever object routed it.
import { CALLER_PRINCIPAL_KEY, MAX_FRAME_BYTES, isRecord, type EngineFrame } from "@iii-edge/protocol";
import type { Deadlines } from "./deadlines.ts";
import type { CallOutcome, Conn, TraceContext } from "./ports.ts";

/** What a caller gets when the worker running its call disconnects (protocol/README.md §2.5, step 3). */
export const TARGET_GONE: CallOutcome = {
  ok: false,
  error: { code: "invocation_stopped", message: "Invocation stopped: the worker disconnected" },
};

export function timeoutOutcome(functionId: string, timeoutMs?: number): CallOutcome {
  const within = timeoutMs === undefined ? "before its deadline" : `within ${timeoutMs} ms`;
  return { ok: false, error: { code: "timeout", message: `${functionId} did not answer ${within}` } };
}

/** Open calls per key (a caller, a principal, a target): a key at zero is not kept. */
export class Counts {
  private readonly m = new Map<string, number>();
  get(key: string): number {
    return this.m.get(key) ?? 0;
  }
  add(key: string): void {
    this.m.set(key, (this.m.get(key) ?? 0) + 1);
  }
  drop(key: string): void {
    const left = (this.m.get(key) ?? 1) - 1;
    if (left > 0) this.m.set(key, left);
    else this.m.delete(key);
  }
}

/** One call sent to worker `target`, ended by `resolve` exactly once. */
export interface OpenCall {
  target: string;
  resolve(o: CallOutcome): void;
}

/**
 * Calls sent to workers and not yet answered, by the invocation id written to the worker's socket.
 * Each has a deadline on the shared `Deadlines` (one timer for all), and whichever comes first of
 * its answer, its deadline and its worker's disconnect ends it; the others find nothing. Only the
 * worker a call was sent to may answer it.
 */
export class CallTable<E extends OpenCall> {
  private readonly calls = new Map<string, E>();
  private readonly byTarget = new Counts();
  private readonly deadlines: Deadlines;
  /** Run as a call ends, before its caller hears (the engine deletes a persisted call's row). */
  private readonly onEnd: ((id: string, call: E) => void) | undefined;

  constructor(deadlines: Deadlines, onEnd?: (id: string, call: E) => void) {
    this.deadlines = deadlines;
    this.onEnd = onEnd;
  }

  get size(): number {
    return this.calls.size;
  }
  has(id: string): boolean {
    return this.calls.has(id);
  }
  values(): IterableIterator<E> {
    return this.calls.values();
  }
  entries(): IterableIterator<[string, E]> {
    return this.calls.entries();
  }

  /** The worker call `id` was sent to, while it is open. */
  targetOf(id: string): string | undefined {
    return this.calls.get(id)?.target;
  }

  /** Calls open on worker `target` (for MAX_OPEN_CALLS_PER_TARGET). */
  openOn(target: string): number {
    return this.byTarget.get(target);
  }

  /** Enter a call; at `deadline` (ms since epoch) it ends with `onTimeout`. */
  open(id: string, call: E, deadline: number, onTimeout: CallOutcome): void {
    this.deadlines.add(id, deadline, () => this.settle(id, onTimeout));
    this.byTarget.add(call.target);
    this.calls.set(id, call);
  }

  /** End a call (false: it had ended already). */
  settle(id: string, outcome: CallOutcome): boolean {
    const call = this.calls.get(id);
    if (!call) return false;
    this.calls.delete(id);
    this.deadlines.cancel(id);
    this.byTarget.drop(call.target);
    this.onEnd?.(id, call);
    call.resolve(outcome);
    return true;
  }

  /** An answer from worker `from`: it ends the call only if the call was sent to that worker. */
  answer(from: string, id: string, outcome: CallOutcome): boolean {
    const call = this.calls.get(id);
    if (!call || call.target !== from) return false;
    return this.settle(id, outcome);
  }

  /** Worker `target` disconnected: every call sent to it ends with `invocation_stopped`. */
  targetGone(target: string): void {
    for (const [id, call] of this.calls) if (call.target === target) this.settle(id, TARGET_GONE);
  }
}

/** The `invokefunction` frame of a call sent to a worker (without an invocation id: a fire nobody
 * waits for). */
export function invokeFrame(
  invocationId: string | undefined,
  functionId: string,
  data: unknown,
  extra: { metadata?: unknown; traceparent?: string | undefined; baggage?: string | undefined },
): EngineFrame {
  const frame: EngineFrame =
    invocationId === undefined
      ? { type: "invokefunction", function_id: functionId, data: data as never }
      : { type: "invokefunction", invocation_id: invocationId, function_id: functionId, data: data as never };
  if (extra.metadata !== undefined) frame.metadata = extra.metadata as never;
  if (extra.traceparent) frame.traceparent = extra.traceparent;
  if (extra.baggage) frame.baggage = extra.baggage;
  return frame;
}

/** Answer a caller's call on its connection. A result over the frame bound is not sent: the caller
 * gets `result_too_large` for that call instead, never silence until its deadline. */
export function sendResult(conn: Conn, invocationId: string, functionId: string, outcome: CallOutcome, trace?: TraceContext): void {
  const frame: EngineFrame = { type: "invocationresult", invocation_id: invocationId, function_id: functionId };
  if (outcome.ok) {
    if (outcome.result !== undefined) frame.result = outcome.result;
  } else frame.error = outcome.error;
  if (trace?.traceparent) frame.traceparent = trace.traceparent;
  if (trace?.baggage) frame.baggage = trace.baggage;
  if (conn.send(frame) === "too_large") {
    conn.send({
      type: "invocationresult",
      invocation_id: invocationId,
      function_id: functionId,
      error: { code: "result_too_large", message: `the result of ${functionId} is larger than ${MAX_FRAME_BYTES} bytes` },
    });
  }
}

/** The payload without a principal it claims (CALLER_PRINCIPAL_KEY): only the engine stamps one. */
export function withoutClaimedPrincipal(d: Record<string, unknown>): Record<string, unknown> {
  if (!(CALLER_PRINCIPAL_KEY in d)) return d;
  const { [CALLER_PRINCIPAL_KEY]: _claimed, ...rest } = d;
  return rest;
}

/** §4.6: an object payload from a worker carries its caller's id, stamped by the engine (never
 * trusted from the payload); `principal` stamps or drops the caller's principal first. Any other
 * payload goes as it is. */
export function stampCaller(data: unknown, workerId: string, principal: (d: Record<string, unknown>) => Record<string, unknown>): unknown {
  return isRecord(data) ? { ...principal(data), _caller_worker_id: workerId } : (data ?? null);
}
