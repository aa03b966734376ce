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
import { StateConflict, loadRecord, Tx } from "./store.ts";
import { stepSpan } from "./trace.ts";

export const stepPayload = z.object({ session_id: z.string().min(1).max(128), step: z.number().int().min(0).optional() });
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
  const loaded = await loadRecord(trigger, payload.session_id);
  if (!loaded)
    throw new IIIError(
      "not_found",
      `turn::${state}: no turn record for session ${payload.session_id} (invariant: a step is only queued by a saved record)`,
    );
  if (loaded.rec.state !== state || (payload.step !== undefined && payload.step !== loaded.rec.step))
    return { ok: true, skipped: true, reason: "stale" };
  const tx = new Tx(trigger, payload.session_id, loaded, undefined, tracer);
  // The step's span, under the run's invoke_agent span: everything the step calls is its child.
  return stepSpan(tx.tracer, tx.rec, state, () => step(tx, state, payload, handler));
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
  } finally {
    await tx.events.flush();
  }
}
