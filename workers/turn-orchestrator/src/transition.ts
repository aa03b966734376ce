// `runTransition` (docs/harness-contracts.md §2.4): every `turn::<state>` step is load → stale guard → stop
// check → handler → write, with one error model: a TransientError goes back to the queue (retried,
// the session is not failed); a StateConflict stops the step (someone else moved the record);
// anything else fails the run, visibly, and the step is acknowledged.
import { IIIError } from "@iii-edge/protocol";
import type { TurnState, TurnStepResult } from "@iii-edge/protocol/harness";
import { z } from "zod";
import type { Tracer } from "@iii-edge/sdk-edge/worker";
import { errorText, TransientError, type Trigger } from "./calls.ts";
import { STOPPED_BY_USER_TEXT } from "./constants.ts";
import { closeBatchOnStop } from "./functions.ts";
import { failRun, finishSession, turnEndOnce } from "./lifecycle.ts";
import { syntheticAssistant } from "./messages.ts";
import { isStepable } from "./record.ts";
import { EventLog } from "./events.ts";
import { StateConflict, loadRecord, Tx } from "./store.ts";
import { stepSpan } from "./trace.ts";

export const stepPayload = z.object({
  session_id: z.string().min(1).max(128),
  step: z.number().int().min(0).optional(),
  /** Set on the orchestrator's own `turn-step` messages: the delivery holds the session's fifo group,
   * so the step may run the steps after it itself (runSteps). */
  queued: z.boolean().optional(),
});
export type StepPayload = z.infer<typeof stepPayload>;

export type StepResult = TurnStepResult;

export type StepHandler = (tx: Tx) => Promise<void>;

/** `turn::stop` took effect between steps: close any open batch, tell the UI, finish. */
export async function stopRun(tx: Tx): Promise<void> {
  if (tx.rec.state === "function_execute" || tx.rec.state === "function_awaiting_approval")
    await closeBatchOnStop(tx, STOPPED_BY_USER_TEXT);
  const notice = syntheticAssistant(STOPPED_BY_USER_TEXT, "aborted");
  tx.afterSave({ type: "message_complete", message: notice, body_streamed: false });
  turnEndOnce(tx, notice);
  await finishSession(tx);
}

export async function runTransition(
  trigger: Trigger,
  state: TurnState,
  payload: StepPayload,
  handler: StepHandler,
  tracer?: Tracer,
): Promise<StepResult> {
  // One step by itself: with no handler for any other state there is nothing to chain into.
  return runSteps(trigger, state, payload, { handlers: { [state]: handler }, tracer });
}

/** A step's result, and the step its save queued (a stepable state at a new step), if any. */
interface Stepped {
  result: StepResult;
  next?: { state: TurnState; step: number };
}

async function transition(
  trigger: Trigger,
  state: TurnState,
  payload: StepPayload,
  handler: StepHandler,
  events: EventLog,
  tracer?: Tracer,
  chainedFrom?: number,
): Promise<Stepped> {
  const loaded = await loadRecord(trigger, payload.session_id);
  if (!loaded)
    throw new IIIError(
      "not_found",
      `turn::${state}: no turn record for session ${payload.session_id} (invariant: a step is only queued by a saved record)`,
    );
  if (loaded.rec.state !== state || (payload.step !== undefined && payload.step !== loaded.rec.step))
    return { result: { ok: true, skipped: true, reason: "stale" } };
  const tx = new Tx(trigger, payload.session_id, loaded, undefined, tracer, events);
  // The step's span, under the run's invoke_agent span: everything the step calls is its child.
  const result = await stepSpan(tx.tracer, tx.rec, state, () => step(tx, state, payload, handler), chainedFrom);
  const saved = tx.persisted();
  if (!result.ok || "skipped" in result || !saved || !isStepable(saved.state) || saved.step === loaded.rec.step) return { result };
  return { result, next: { state: saved.state, step: saved.step } };
}

/**
 * How long after its delivery a step still runs the next one itself. A delivery has the queue's
 * deadline (360 s) for everything it runs, and each step is written to fit in it: an inline step
 * starts with all but this much of it left.
 */
export const INLINE_WINDOW_MS = 10_000;
/** The most steps one delivery runs after its own. */
export const MAX_INLINE_STEPS = 32;

export interface StepChain {
  handlers: Partial<Record<TurnState, StepHandler>>;
  tracer?: Tracer;
  now?: () => number;
  /** How many times the connection the delivery came on dropped (WorkerSurface.connectionEpoch). */
  connectionEpoch?: () => number;
}

/**
 * A delivered step, then the steps its saves queue, in this one invocation, while the window lasts:
 * no durable-queue hop between two steps of a session. Safe because the step's own delivery holds the
 * session's fifo group on `turn-step`: the message each save queued (saving is still the wake) waits
 * behind it, is delivered once this invocation answers, and is then stale (its step has run), so
 * nothing runs twice. A crash mid-chain loses nothing: the queued message of the step that was
 * running is delivered and runs it as any redelivery does. An engine restart voids the delivery's
 * lease and delivers the queued messages again at once: a chain whose connection dropped starts no
 * further step (the one it was running may run twice, as any step running across a restart could;
 * the compare-and-set lets one of them write). A step that throws ends the chain and leaves its
 * queued message to run it again; the delivery itself still answers its own step's result. Only a
 * `queued` delivery chains: a direct call holds no fifo group.
 */
export async function runSteps(trigger: Trigger, state: TurnState, payload: StepPayload, chain: StepChain): Promise<StepResult> {
  const now = chain.now ?? Date.now;
  const started = now();
  const handler = chain.handlers[state];
  if (!handler) throw new IIIError("invalid_arguments", `turn::${state} is not a stepable state`);
  // One event log for the chain: its steps' events go out in order, one batch at a time, from one
  // block of ids, and a step does not wait for the last one's events to be written before it starts.
  const events = new EventLog(trigger, payload.session_id);
  // The delivery still holds the session's fifo group: inside its window, and on the connection it
  // came on. After a drop the engine may have voided its lease (a restart does) and delivered the
  // queued messages already: a step started now could run beside the same step delivered again.
  const epoch = chain.connectionEpoch?.();
  const held = () => now() - started < INLINE_WINDOW_MS && chain.connectionEpoch?.() === epoch;
  try {
    const first = await transition(trigger, state, payload, handler, events, chain.tracer);
    let next = payload.queued ? first.next : undefined;
    for (let n = 0; next && n < MAX_INLINE_STEPS && held(); n++) {
      const { state: nextState, step: nextStep } = next;
      const nextHandler = chain.handlers[nextState];
      if (!nextHandler) break;
      try {
        const nextPayload = { session_id: payload.session_id, step: nextStep, queued: true };
        next = (await transition(trigger, nextState, nextPayload, nextHandler, events, chain.tracer, payload.step)).next;
      } catch (e) {
        // Its own queued message runs it again, with the queue's retries and backoff.
        console.warn(
          `turn-orchestrator: session ${payload.session_id}: turn::${nextState} (step ${nextStep}) left to its queued message: ${errorText(e)}`,
        );
        break;
      }
    }
    return first.result;
  } finally {
    await events.flush();
  }
}

async function step(tx: Tx, state: TurnState, payload: StepPayload, handler: StepHandler): Promise<StepResult> {
  try {
    await (tx.rec.stop_requested ? stopRun(tx) : handler(tx));
    return { ok: true, from_state: state, to_state: tx.rec.state };
  } catch (e) {
    if (e instanceof TransientError) throw e;
    if (e instanceof StateConflict) return { ok: true, skipped: true, reason: "state_conflict" };
    const message = `from ${state}: ${errorText(e)}`;
    console.warn(`turn-orchestrator: session ${payload.session_id} failed ${message}`);
    tx.tracer.log("error", `turn::${state} of session ${payload.session_id} failed: ${message}`, {
      "iii.session.id": payload.session_id,
      "iii.turn.state": state,
    });
    try {
      await failRun(tx, "transition_error", message, { fromPersisted: true });
    } catch (e2) {
      if (e2 instanceof StateConflict) return { ok: true, skipped: true, reason: "state_conflict" };
      throw e2;
    }
    return { ok: false, from_state: state, to_state: "failed", error: message };
  }
}
