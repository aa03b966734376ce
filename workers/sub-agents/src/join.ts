// `harness::join` and the wake of a parked join. A model's join on a running child answers
// `{pending: true, held_by: "harness::join"}` at once; the orchestrator parks that call as an
// `awaiting_approval` entry (no queue step held, nothing in memory). When the child ends — its
// turn record's state trigger, or the sweep as a safety net — or the wait expires, this worker
// writes the `allow` decision for the parked call (`approval::resolve`); the orchestrator wakes,
// calls `harness::join` again, and this time gets the child's result. Every step repeats safely:
// the wait row is keyed by (parent, call id), a wake writes the same decision, and decisions are
// read fresh by the orchestrator.
import { IIIError } from "@iii-edge/protocol";
import {
  HARNESS_JOIN,
  JOIN_DEFAULT_TIMEOUT_MS,
  JOIN_MAX_INLINE_WAIT_MS,
  type HarnessJoinPending,
  type HarnessJoinRequest,
  type HarnessJoinResponse,
  type HarnessJoinResult,
  type SubAgentModelCall,
} from "@iii-edge/protocol/harness";
import {
  MAX_WAITERS_PER_CHILD,
  RESOLVE_TIMEOUT_MS,
  SCOPE_LINKS,
  SCOPE_WAITS,
  SWEEP,
  SWEEP_CRON,
  SWEEP_MAX_PAGES,
  SWEEP_PAGE,
  STORAGE_TIMEOUT_MS,
  WOKEN_WAIT_TTL_MS,
} from "./constants.ts";
import {
  awaitingOf,
  call,
  casOptions,
  casState,
  compareAndSet,
  deleteState,
  errorText,
  finalText,
  isTerminalState,
  joinWait,
  readState,
  readTurn,
  subAgentLink,
  waitKey,
  type JoinWait,
  type SubAgentLink,
  type Trigger,
  type TurnRecordView,
} from "./records.ts";

// ------------------------------------------------------------------ in-process wake (a cache)

/** Direct callers waiting in this process for a child's end. In Node the child's state trigger
 * runs here too and wakes them at once; in the Worker it may run in another isolate, and then the
 * call answers at its deadline with the state at that moment (correct, just not prompt). */
const inline = new Map<string, Set<() => void>>();

export function notifyEnded(child: string): void {
  for (const wake of inline.get(child) ?? []) wake();
  inline.delete(child);
}

function waitInline(child: string, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const set = inline.get(child) ?? new Set<() => void>();
    const done = () => {
      clearTimeout(timer);
      set.delete(done);
      if (set.size === 0 && inline.get(child) === set) inline.delete(child);
      resolve();
    };
    const timer = setTimeout(done, ms);
    set.add(done);
    inline.set(child, set);
  });
}

// ------------------------------------------------------------------ answers

export function outcome(child: string, t: TurnRecordView): HarnessJoinResult {
  const r: HarnessJoinResult = {
    child_session_id: child,
    state: t.state === "failed" ? "failed" : "stopped",
    final_message: finalText(t),
    turn_count: t.turn_count,
  };
  if (t.error) r.error = { kind: t.error.kind, message: t.error.message };
  // A child with a typed output (spawn `options.output`): its validated value, for the parent.
  if (t.result !== undefined) r.result = t.result;
  if (t.result_error !== undefined) r.result_error = t.result_error;
  return r;
}

function pending(child: string, t: TurnRecordView | undefined, expiresAt: number | undefined, waitedMs?: number): HarnessJoinPending {
  const state = t?.state ?? null;
  const approvals = t ? (awaitingOf(t) ?? []).filter((a) => (a as { held_by?: unknown }).held_by === undefined).length : 0;
  const why = approvals > 0 ? ` It is waiting for a person to approve ${approvals === 1 ? "a call" : `${approvals} calls`}.` : "";
  const message =
    waitedMs === undefined
      ? `Sub-agent ${child} is still running (state ${state ?? "starting"}).${why}`
      : `Sub-agent ${child} is still running after ${Math.round(waitedMs / 1000)} s of waiting (state ${state ?? "starting"}).${why} Call ${HARNESS_JOIN} again to keep waiting, or go on without its result.`;
  const p: HarnessJoinPending = { pending: true, held_by: HARNESS_JOIN, child_session_id: child, state, message };
  if (expiresAt !== undefined) p.expires_at = expiresAt;
  return p;
}

async function requireLink(trigger: Trigger, child: string): Promise<SubAgentLink> {
  const link = await readState(trigger, { scope: SCOPE_LINKS, key: child }, subAgentLink);
  if (!link) throw new IIIError("child_not_found", `there is no sub-agent ${child} (harness::spawn answers the child_session_id to join)`);
  return link;
}

// ------------------------------------------------------------------ harness::join

export interface JoinDeps {
  trigger: Trigger;
  now?: () => number;
}

/** `modelCall`: the orchestrator's call when a model joins (its metadata), absent for a worker. */
export async function join(deps: JoinDeps, req: HarnessJoinRequest, modelCall?: SubAgentModelCall): Promise<HarnessJoinResponse> {
  const { trigger } = deps;
  const now = deps.now?.() ?? Date.now();
  const child = req.child_session_id;
  const link = await requireLink(trigger, child);
  if (modelCall && modelCall.session_id !== link.parent_session_id) {
    throw new IIIError("forbidden", `sub-agent ${child} belongs to session ${link.parent_session_id}; only its parent may join it`);
  }
  let t = await readTurn(trigger, child);
  // A call the orchestrator dispatched for a model: it can park, keyed by (calling session, call id).
  if (modelCall) return joinParked(trigger, link, modelCall.session_id, modelCall.function_call_id, req.timeout_ms, t, now);
  if (t && isTerminalState(t.state)) return outcome(child, t);
  const waitMs = Math.min(req.timeout_ms ?? 0, JOIN_MAX_INLINE_WAIT_MS);
  if (waitMs > 0) {
    await waitInline(child, waitMs);
    t = await readTurn(trigger, child);
    if (t && isTerminalState(t.state)) return outcome(child, t);
  }
  return pending(child, t, undefined, waitMs > 0 ? waitMs : undefined);
}

async function joinParked(
  trigger: Trigger,
  link: SubAgentLink,
  parent: string,
  cid: string,
  timeoutMs: number | undefined,
  t: TurnRecordView | undefined,
  now: number,
): Promise<HarnessJoinResponse> {
  const child = link.child_session_id;
  const key = waitKey(parent, cid);
  const w = await readState(trigger, { scope: SCOPE_WAITS, key }, joinWait);
  if (t && isTerminalState(t.state)) {
    if (w) await forgetWait(trigger, key, child);
    return outcome(child, t);
  }
  if (w) {
    // The call came back to its wait: woken by its expiry, or let go early by a person's decision
    // on the parked entry (the orchestrator never dispatches a call's first attempt twice). The
    // child's state now is its result; it does not park again.
    await forgetWait(trigger, key, child);
    return pending(child, t, undefined, now - w.since_ms);
  }
  if (link.joiners.length >= MAX_WAITERS_PER_CHILD) {
    throw new IIIError("too_many_waiters", `sub-agent ${child} already has ${MAX_WAITERS_PER_CHILD} calls waiting for it; wait for those`);
  }
  const expires_at = now + (timeoutMs ?? JOIN_DEFAULT_TIMEOUT_MS);
  const wait: JoinWait = { parent_session_id: parent, function_call_id: cid, child_session_id: child, since_ms: now, expires_at };
  // Only written where there is none (every case with a wait returned above).
  if (!(await compareAndSet(trigger, { scope: SCOPE_WAITS, key }, wait, null, { timeoutMs: STORAGE_TIMEOUT_MS })).written)
    return pending(child, t, expires_at);
  await ensureSweep(trigger);
  await casState(
    trigger,
    { scope: SCOPE_LINKS, key: child },
    (cur) => (cur && !cur.joiners.includes(key) ? { ...cur, joiners: [...cur.joiners, key] } : undefined),
    casOptions(subAgentLink),
  );
  // The child may have ended between the first read and the wait being listed: its end handler
  // read the joiners before this one was there, so look again (after the listing, nothing is missed).
  const again = await readTurn(trigger, child);
  if (again && isTerminalState(again.state)) {
    await forgetWait(trigger, key, child);
    return outcome(child, again);
  }
  return pending(child, again ?? t, expires_at);
}

/** The wait is over for good: its row and its place on the link go. */
async function forgetWait(trigger: Trigger, key: string, child: string): Promise<void> {
  await deleteState(trigger, SCOPE_WAITS, key);
  await casState(
    trigger,
    { scope: SCOPE_LINKS, key: child },
    (cur) => (cur?.joiners.includes(key) ? { ...cur, joiners: cur.joiners.filter((k) => k !== key) } : undefined),
    casOptions(subAgentLink),
  );
}

// ------------------------------------------------------------------ the wake

/** Whether the parent may be parked on this call right now: parked with it, or in the middle of
 * the batch that is about to park it. Any other state means the call was answered already. */
async function parentMayBeWaiting(trigger: Trigger, w: JoinWait): Promise<boolean> {
  const p = await readTurn(trigger, w.parent_session_id);
  if (!p || isTerminalState(p.state)) return false;
  if (p.state === "function_execute") return true;
  if (p.state === "function_awaiting_approval") return (awaitingOf(p) ?? []).some((a) => a.function_call_id === w.function_call_id);
  return false;
}

/**
 * Wake one parked join: `approval::resolve allow` on the parent's call (the orchestrator's
 * approval wake then calls `harness::join` again), then mark the wait woken. A repeat writes the
 * same decision (harmless). A parent that has moved on gets nothing written: the wait just goes.
 */
export async function wake(trigger: Trigger, key: string, w: JoinWait, reason: string, now: number): Promise<void> {
  if (w.woken_at !== undefined) return;
  if (!(await parentMayBeWaiting(trigger, w))) {
    await forgetWait(trigger, key, w.child_session_id);
    return;
  }
  const r = await call<{ ok?: unknown; error?: unknown }>(
    trigger,
    "approval::resolve",
    { session_id: w.parent_session_id, function_call_id: w.function_call_id, decision: "allow", reason },
    RESOLVE_TIMEOUT_MS,
  );
  if (r?.ok !== true) throw new IIIError("resume_failed", `approval::resolve for ${key} answered ${JSON.stringify(r)}`);
  await casState(
    trigger,
    { scope: SCOPE_WAITS, key },
    (cur) => (cur && cur.woken_at === undefined ? { ...cur, woken_at: now, woken_reason: reason } : undefined),
    casOptions(joinWait),
  );
}

/** A child ended: wake every join parked on it. */
export async function wakeJoiners(trigger: Trigger, link: SubAgentLink, state: string, now: number): Promise<void> {
  for (const key of link.joiners) {
    const w = await readState(trigger, { scope: SCOPE_WAITS, key }, joinWait);
    if (w) await wake(trigger, key, w, `sub-agent ${link.child_session_id} ${state}`, now);
  }
}

// ------------------------------------------------------------------ the sweep

/** The sweep's cron binding exists only while there are waits: an idle engine is never woken by it. */
const SWEEP_TRIGGER_ID = "sub-agents:sweep";

/** Bind the sweep to its cron (idempotent by id). Best effort: without it a join still wakes on its
 * child's end; only its `timeout_ms` (and the repair of a lost wake) would wait for the next one. */
export async function ensureSweep(trigger: Trigger): Promise<void> {
  try {
    await call(trigger, "engine::register_trigger", {
      id: SWEEP_TRIGGER_ID,
      trigger_type: "cron",
      function_id: SWEEP,
      config: { expression: SWEEP_CRON },
    });
  } catch (e) {
    console.warn(`sub-agents: the join sweep could not be scheduled: ${errorText(e)}`);
  }
}

/** No waits left: unbind the cron, then look once more — a wait written meanwhile binds it again
 * (its join binds after writing the wait, so one of the two always sees the other). */
async function retireSweepIfIdle(trigger: Trigger): Promise<void> {
  const empty = async () => {
    const rows = await call<unknown[]>(trigger, "state::list", { scope: SCOPE_WAITS, limit: 1 });
    return !Array.isArray(rows) || rows.length === 0;
  };
  if (!(await empty())) return;
  await call(trigger, "engine::unregister_trigger", { id: SWEEP_TRIGGER_ID });
  if (!(await empty())) await ensureSweep(trigger);
}

/**
 * The sweep (cron, while waits exist): waits past `expires_at` are woken (the resumed call gets the child's current
 * state), waits whose child ended are woken (a wake the state trigger could not deliver), and woken
 * waits whose call never came back are dropped after WOKEN_WAIT_TTL_MS.
 */
export async function sweep(trigger: Trigger, now: number): Promise<{ woken: number; dropped: number }> {
  let woken = 0;
  let dropped = 0;
  for (let page = 0; page < SWEEP_MAX_PAGES; page++) {
    const rows = await call<unknown[]>(trigger, "state::list", { scope: SCOPE_WAITS, limit: SWEEP_PAGE, offset: page * SWEEP_PAGE });
    const list = Array.isArray(rows) ? rows : [];
    for (const row of list) {
      const r = joinWait.safeParse(row);
      if (!r.success) continue;
      const w = r.data;
      const key = waitKey(w.parent_session_id, w.function_call_id);
      try {
        if (w.woken_at !== undefined) {
          if (now - w.woken_at > WOKEN_WAIT_TTL_MS) {
            await forgetWait(trigger, key, w.child_session_id);
            dropped++;
          }
          continue;
        }
        const t = await readTurn(trigger, w.child_session_id);
        if (t && isTerminalState(t.state)) {
          await wake(trigger, key, w, `sub-agent ${w.child_session_id} ${t.state}`, now);
          woken++;
        } else if (now >= w.expires_at) {
          await wake(trigger, key, w, `waited ${Math.round((now - w.since_ms) / 1000)} s for sub-agent ${w.child_session_id}`, now);
          woken++;
        }
      } catch (e) {
        console.warn(`sub-agents: sweep of wait ${key} failed (next tick retries): ${errorText(e)}`);
      }
    }
    if (list.length < SWEEP_PAGE) break;
  }
  try {
    await retireSweepIfIdle(trigger);
  } catch (e) {
    console.warn(`sub-agents: the idle join sweep could not be retired (it runs again, harmlessly): ${errorText(e)}`);
  }
  return { woken, dropped };
}
