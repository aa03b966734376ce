// How a run ends (docs/harness-contracts.md §2.3): `finishSession` inline (no queued teardown step), a
// failure with the reason shown to the UI, the max_turns notice, and the one `turn_end` per round.
import type { AssistantMessage, TurnStateRecord } from "@iii-edge/protocol/harness";
import { callBestEffort, errorText } from "./calls.ts";
import { stopChildren } from "./children.ts";
import { RELEASE_TIMEOUT_MS } from "./constants.ts";
import { syntheticAssistant } from "./messages.ts";
import { maxTurnsEntryId } from "./record.ts";
import { loadRunRequest } from "./run-request.ts";
import type { Tx } from "./store.ts";
import { appendMany } from "./transcript.ts";
import { afterFinalWrite } from "./turn-end.ts";

/** `provisioning::release` with the run's sandbox: best effort, a run ends either way. */
async function releaseRun(tx: Tx): Promise<void> {
  let sandbox_id: string | undefined;
  try {
    sandbox_id = (await loadRunRequest(tx.trigger, tx.sid)).req?.sandbox_id;
  } catch (e) {
    console.warn(`turn-orchestrator: run request of ${tx.sid} unreadable at release: ${errorText(e)}`);
  }
  const payload: Record<string, unknown> = { session_id: tx.sid };
  if (sandbox_id) payload.sandbox_id = sandbox_id;
  await callBestEffort(tx.trigger, "provisioning::release", payload, RELEASE_TIMEOUT_MS);
}

function clearBatch(rec: TurnStateRecord): void {
  delete rec.work;
  delete rec.awaiting_approval;
}

/** Release, `stopped`, and `agent_end` once that is saved. */
export async function finishSession(tx: Tx): Promise<void> {
  await releaseRun(tx);
  tx.rec.state = "stopped";
  clearBatch(tx.rec);
  tx.afterSave({ type: "agent_end", messages: [] });
  await tx.save();
  await stopChildren(tx.trigger, tx.sid, "parent_ended");
  await afterFinalWrite(tx);
}

/**
 * End the run `failed` with `error:{kind, message}`; the UI gets `message_complete` with an error
 * assistant (the given one, or a synthetic one saying why) and `agent_end`. `fromPersisted` starts
 * from the last saved record (a handler that threw may have left its copy half-changed).
 */
export async function failRun(
  tx: Tx,
  kind: string,
  message: string,
  opts: { assistant?: AssistantMessage; bodyStreamed?: boolean; fromPersisted?: boolean } = {},
): Promise<void> {
  if (opts.fromPersisted) tx.resetToPersisted();
  await releaseRun(tx);
  tx.rec.state = "failed";
  tx.rec.error = { kind, message };
  clearBatch(tx.rec);
  const assistant = opts.assistant ?? syntheticAssistant(message, "error");
  tx.afterSave({ type: "message_complete", message: assistant, body_streamed: opts.bodyStreamed ?? false });
  tx.afterSave({ type: "agent_end", messages: [] });
  await tx.save();
  await stopChildren(tx.trigger, tx.sid, "parent_failed");
}

/** At most one `turn_end` per round (`turn_end_emitted`), sent with the next write. */
export function turnEndOnce(tx: Tx, message: AssistantMessage): void {
  if (tx.rec.turn_end_emitted) return;
  tx.rec.turn_end_emitted = true;
  tx.afterSave({ type: "turn_end", message, function_results: tx.rec.function_results });
}

export const maxTurnsReached = (rec: TurnStateRecord): boolean => rec.max_turns !== undefined && rec.turn_count >= rec.max_turns;

/** The loop's cap (§2.3): the notice joins the transcript and the UI, one turn_end, finish. */
export async function endAtMaxTurns(tx: Tx): Promise<void> {
  const notice = syntheticAssistant(`loop stopped: max_turns (${tx.rec.max_turns}) reached`, "end");
  await appendMany(tx.trigger, tx.sid, [{ entry_id: maxTurnsEntryId(tx.rec.run_id, tx.rec.turn_count), message: notice }]);
  tx.rec.last_assistant = notice;
  tx.afterSave({ type: "message_complete", message: notice, body_streamed: false });
  turnEndOnce(tx, notice);
  await finishSession(tx);
}
