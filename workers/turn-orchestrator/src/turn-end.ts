// How a turn decides it is over, for iii's harness surface (docs/harness.md, "iii's harness
// surface"): the steering watermark that folds in messages `harness::send` merged while the turn
// ran, the check after the final write that starts a fresh turn for a merge that raced it, and the
// nudge of a typed turn whose answer did not validate.
//
// Why a merge cannot be lost: `harness::send` appends the message, then bumps the record's
// `merge_seq` by compare-and-set while the record is live. A generate step copies `merge_seq` into
// `folded_seq` from the record it loaded *before* reading the transcript, so every merge counted in
// `folded_seq` is on the transcript it read. A merge not counted there either lands before the
// turn's final write (the write conflicts, is retried with the bump kept — store.ts — and the check
// after it finds `merge_seq > folded_seq`), or after it (the send sees a terminal record and starts
// the fresh turn itself). Both may try: `run::start`'s claim lets one through.
import {
  MAX_VALIDATION_RETRIES,
  SUBMIT_RESULT_TOOL,
  type AgentMessage,
  type FunctionResult,
  type PreparedCall,
  type TurnStateRecord,
} from "@iii-edge/protocol/harness";
import { errorText } from "./calls.ts";
import { judgeFinalAnswer, nudgeOrGiveUp, submittedValue, validateOutput } from "./output-contract.ts";
import { boundedKey } from "./record.ts";
import type { Tx } from "./store.ts";
import { appendMany, readTranscript, type Entry } from "./transcript.ts";

/** The generate step's watermark: the last entry it read, and the merges it has seen. */
export function markWatermark(rec: TurnStateRecord, read: Entry[]): void {
  rec.folded_seq = rec.merge_seq ?? 0;
  const last = read.at(-1);
  if (last) rec.watermark_entry_id = last.entry_id;
}

export const hasUnfoldedMerge = (rec: TurnStateRecord): boolean => (rec.merge_seq ?? 0) > (rec.folded_seq ?? 0);

/** User messages on the active path after the watermark entry (all of them when it is gone). */
export function userAfterWatermark(entries: Entry[], watermark: string | undefined): AgentMessage[] {
  const at = watermark === undefined ? -1 : entries.findIndex((e) => e.entry_id === watermark);
  return entries.slice(at + 1).flatMap((e) => (e.message.role === "user" ? [e.message] : []));
}

/** The steering check's part: a send merged since the last generate step's read put a user
 * message after the watermark. Reads the transcript only when a merge happened. */
export async function mergedSinceWatermark(tx: Tx): Promise<boolean> {
  if (!hasUnfoldedMerge(tx.rec)) return false;
  const seenSeq = tx.rec.merge_seq ?? 0;
  const found = userAfterWatermark(await readTranscript(tx.trigger, tx.sid), tx.rec.watermark_entry_id);
  // Nothing after the watermark: the merged message was already read (it landed before the read).
  if (found.length === 0) tx.rec.folded_seq = seenSeq;
  return found.length > 0;
}

/** Starts a turn on the transcript as it stands (registered by surface.ts, which owns run::start's
 * dependencies); the answer is the new turn's id, or undefined when the session was busy. */
export type FreshTurnStarter = (tx: Tx) => Promise<string | undefined>;
let freshTurn: FreshTurnStarter | undefined;
export function setFreshTurnStarter(start: FreshTurnStarter): void {
  freshTurn = start;
}

/** After the turn's final write: a merge that raced the end gets a turn of its own. */
export async function afterFinalWrite(tx: Tx): Promise<void> {
  const rec = tx.rec;
  if (!hasUnfoldedMerge(rec) || rec.stop_requested || !freshTurn) return;
  try {
    const found = userAfterWatermark(await readTranscript(tx.trigger, tx.sid), rec.watermark_entry_id);
    if (found.length > 0) await freshTurn(tx);
  } catch (e) {
    console.warn(`turn-orchestrator: a message merged into ${tx.sid} as its turn ended could not start a turn: ${errorText(e)}`);
  }
}

/** Entry id of the n-th nudge of a run (deterministic: a redelivered step appends it once). */
const nudgeEntryId = (runId: string, n: number): string => boundedKey(`e_${runId}_output_nudge_${n}`);

/**
 * A `json` output contract at the end of a turn: accept the final answer (result), or ask again
 * (a user nudge on the transcript, another round; true is returned and the record saved), or give
 * up after MAX_VALIDATION_RETRIES (`result_error`, the raw text as a best-effort result).
 */
export async function nudgeForOutput(tx: Tx): Promise<boolean> {
  const rec = tx.rec;
  const contract = rec.output;
  if (contract?.type !== "json" || rec.result !== undefined || rec.result_error !== undefined) return false;
  const retries = rec.validation_retries ?? 0;
  const decision = judgeFinalAnswer(contract, rec.last_assistant, retries, rec.last_assistant?.provider ?? "");
  if (decision.kind === "accept") {
    rec.result = decision.value;
    return false;
  }
  if (decision.kind === "give_up") {
    rec.result_error = `no valid result after ${MAX_VALIDATION_RETRIES} retries: ${decision.error}`;
    rec.result = decision.raw;
    return false;
  }
  const message: AgentMessage = { role: "user", content: [{ type: "text", text: decision.text }], timestamp: Date.now() };
  await appendMany(tx.trigger, tx.sid, [{ entry_id: nudgeEntryId(rec.run_id, retries + 1), message }]);
  tx.afterSave({ type: "message_start", message });
  tx.afterSave({ type: "message_end", message });
  rec.validation_retries = retries + 1;
  rec.state = "assistant_streaming";
  await tx.save();
  return true;
}

/**
 * `submit_result` in a batch (a typed turn on a provider without native structured output): the
 * harness answers it itself, never dispatching it. A valid value becomes the turn's result and the
 * call's result says `terminate` (a batch of nothing else ends the turn); an invalid one is
 * answered with the validation errors as an error result the model sees (a nudge), at most
 * MAX_VALIDATION_RETRIES times, then the turn ends with `result_error`.
 */
export function consumeSubmitResult(rec: TurnStateRecord, prepared: PreparedCall[]): PreparedCall[] {
  const contract = rec.output;
  if (contract?.type !== "json") return prepared;
  return prepared.map((p) => {
    if (p.call.function_id !== SUBMIT_RESULT_TOOL) return p;
    const checked = validateOutput(contract, submittedValue(contract, p.call));
    if (checked.ok) {
      rec.result = checked.value;
      return synthetic(p.call, "Result accepted.", false, true);
    }
    const retries = rec.validation_retries ?? 0;
    const decision = nudgeOrGiveUp(checked.error, JSON.stringify(p.call.arguments ?? null), retries, true);
    if (decision.kind === "give_up") {
      rec.result_error = `no valid result after ${MAX_VALIDATION_RETRIES} retries: ${decision.error}`;
      rec.result = p.call.arguments;
      return synthetic(p.call, rec.result_error, true, true);
    }
    rec.validation_retries = retries + 1;
    return synthetic(p.call, decision.kind === "nudge" ? decision.text : "", true, false);
  });
}

function synthetic(call: PreparedCall["call"], text: string, isError: boolean, terminate: boolean): PreparedCall {
  const result: FunctionResult = { content: [{ type: "text", text }], details: isError ? { error: text } : { accepted: true } };
  if (terminate) result.terminate = true;
  return { route: "synthetic", call, result, is_error: isError };
}

/**
 * The window a generate step sends: a message merged while a batch of calls was open sits on the
 * transcript between the calls and their results (entries keep arrival order), but a provider wants
 * each call's result right after it. Such user messages are moved to just after the batch's last
 * result; nothing is dropped, and the stored transcript is unchanged.
 */
export function deferMergedMessages(entries: Entry[]): Entry[] {
  const out: Entry[] = [];
  let open = new Set<string>();
  let held: Entry[] = [];
  const release = () => {
    out.push(...held);
    held = [];
  };
  for (const e of entries) {
    const m = e.message;
    if (m.role === "assistant") {
      release();
      open = new Set(m.content.flatMap((b) => (b.type === "function_call" ? [b.id] : [])));
      out.push(e);
    } else if (m.role === "function_result") {
      out.push(e);
      open.delete(m.function_call_id);
      if (open.size === 0) release();
    } else if (m.role === "user" && open.size > 0) {
      held.push(e);
    } else {
      out.push(e);
    }
  }
  release();
  return out;
}
