// The stepable states' handlers (docs/harness-contracts.md §2.3). Each gets the step's Tx (the record, a deep
// copy of what was loaded) and ends with the write that moves the record on.
import { formatIssues } from "@iii-edge/protocol";
import { z } from "zod";
import {
  agentMessageSchema,
  INBOX_FOLLOWUP,
  INBOX_STEERING,
  HOOK_DENIED,
  provisioningPrepareResponse,
  type AgentMessage,
} from "@iii-edge/protocol/harness";
import type { Channels } from "@iii-edge/sdk-edge/worker";
import { callRequired, errorCode, errorText, isTransportFailure, TransientError } from "./calls.ts";
import { PROVISIONING_TIMEOUT_MS } from "./constants.ts";
import { endAtMaxTurns, failRun, finishSession, maxTurnsReached, turnEndOnce } from "./lifecycle.ts";
import { postGenerate, preGenerate, preTurn } from "./hook-points.ts";
import { functionCallsOf, normaliseMessage } from "./messages.ts";
import { assistantEntryId, inboxEntryId } from "./record.ts";
import { requireRunRequest, saveRunRequest } from "./run-request.ts";
import { recordBudgetSpend } from "./budget.ts";
import { checkBudgetBeforeProviderCall, compactionPreflight } from "./seams.ts";
import type { Tx } from "./store.ts";
import { streamAssistant } from "./streaming.ts";
import { readContextWindow } from "./compaction.ts";
import { appendMany, appendOne, updateMessage, type Entry } from "./transcript.ts";
import { deferMergedMessages, markWatermark, mergedSinceWatermark, nudgeForOutput } from "./turn-end.ts";

/** `turn::provisioning`: prompt, schemas and model from `provisioning::prepare`, kept on the run
 * request and the record (model_meta resolved once per run, §7). */
export async function provisioning(tx: Tx): Promise<void> {
  const req = await requireRunRequest(tx.trigger, tx.sid);
  // pre_turn hooks, before anything is spent on the run (no prompt built, no sandbox made).
  const denied = await preTurn(tx, req);
  if (denied) return failRun(tx, HOOK_DENIED, denied);
  let reply: unknown;
  try {
    reply = await tx.trigger({
      function_id: "provisioning::prepare",
      payload: { session_id: tx.sid, run_request: req },
      timeoutMs: PROVISIONING_TIMEOUT_MS,
    });
  } catch (e) {
    if (errorCode(e) === "function_not_found")
      throw new Error(
        "provisioning::prepare is not registered: no provisioning worker is connected, so the run cannot get its prompt and functions",
      );
    if (isTransportFailure(e)) throw new TransientError(`provisioning::prepare: ${errorText(e)}`, { cause: e });
    throw new Error(`provisioning::prepare failed: ${errorCode(e) ?? "error"}: ${errorText(e)}`);
  }
  const prep = provisioningPrepareResponse.safeParse(reply);
  if (!prep.success) throw new Error(`provisioning::prepare answered an unreadable result: ${formatIssues(prep.error)}`);
  req.system_prompt = prep.data.system_prompt;
  req.function_schemas = prep.data.function_schemas;
  if (prep.data.sandbox_id) req.sandbox_id = prep.data.sandbox_id;
  await saveRunRequest(tx.trigger, tx.sid, req);
  tx.rec.model_meta = prep.data.model_meta ?? null;
  tx.rec.state = "assistant_streaming";
  await tx.save();
}

/** `turn::assistant_streaming`. */
export async function assistantStreaming(tx: Tx, channels: Channels): Promise<void> {
  const rec = tx.rec;
  if (maxTurnsReached(rec)) return endAtMaxTurns(tx);
  // The round's first delta should not wait for the event ids' counter write: take the block now.
  tx.events.reserve();
  // A batch's results come straight here (no steering_check hop on the function path, which saves a
  // queue round trip per batch; docs/harness-contracts.md §2.8): steering sent meanwhile joins the transcript
  // before this round. The three reads go out together: a steering message appended while the
  // transcript is read is either on it already or added here, once (entry ids are deterministic).
  const [req, steered, entries] = await Promise.all([
    requireRunRequest(tx.trigger, tx.sid),
    rec.function_results.length > 0 ? takeInbox(tx, INBOX_STEERING, "steer") : Promise.resolve([]),
    readContextWindow(tx.trigger, tx.sid),
  ]);
  announce(
    tx,
    steered.map((e) => e.message),
  );
  const seen = new Set(entries.map((e) => e.entry_id));
  const stored = [...entries, ...steered.filter((e) => !seen.has(e.entry_id))];
  // The steering watermark: this round saw every send merged before the record was loaded.
  markWatermark(rec, stored);
  const transcriptEntries = deferMergedMessages(stored);
  const transcript = transcriptEntries.map((e) => e.message);
  rec.turn_count += 1;
  rec.turn_end_emitted = false;
  rec.assistant_body_streamed = false;
  rec.function_results = [];
  if (req.budget_id) {
    const refused = await checkBudgetBeforeProviderCall(tx.trigger, rec, req, transcript);
    if (refused) return failRun(tx, refused.kind, refused.message, { assistant: refused.assistant });
  }
  const window = await compactionPreflight(tx, req, transcriptEntries);
  // pre_generate hooks over what is about to be sent: they may replace the system prompt and append
  // messages to this round's context (not to the transcript), or deny the round.
  const generate = await preGenerate(tx, req, window);
  if ("deny" in generate) return failRun(tx, HOOK_DENIED, generate.deny);
  const sent = generate.system_prompt === req.system_prompt ? req : { ...req, system_prompt: generate.system_prompt };
  const { message, bodyStreamed } = await streamAssistant(tx.trigger, channels, tx.events, sent, generate.messages, tx.tracer);
  rec.last_assistant = message;
  rec.assistant_body_streamed = bodyStreamed;
  if (req.budget_id) await recordBudgetSpend(tx.trigger, rec, req, message);

  if (message.stop_reason === "error") {
    // A provider error ends the run `failed` (the provider already retried what it could).
    const text = message.error_message || message.content.map((b) => (b.type === "text" ? b.text : "")).join("") || "provider error";
    return failRun(tx, message.error_kind ?? "transient", text, { assistant: message, bodyStreamed });
  }
  // The round's message is complete as the provider's last frame arrives: the UI hears it now, not
  // after the transcript append and the save (its deltas are out already; spec §2.3 emits it first).
  tx.emitNow({ type: "message_complete", message, body_streamed: bodyStreamed });
  if (message.stop_reason === "aborted") {
    turnEndOnce(tx, message);
    return finishSession(tx);
  }
  // A redelivered round streams again; its entry id is the same, so it replaces the first copy.
  const entry: Entry = { entry_id: assistantEntryId(rec.run_id, rec.turn_count), message };
  if (!(await appendOne(tx.trigger, tx.sid, entry))) await updateMessage(tx.trigger, tx.sid, entry);
  // post_generate hooks see the final message, read-only; only a fail_closed one that failed stops the run.
  const postFailed = await postGenerate(tx, req, message);
  if (postFailed) return failRun(tx, HOOK_DENIED, postFailed);
  if (functionCallsOf(message).length > 0) {
    delete rec.work;
    delete rec.awaiting_approval;
    rec.state = "function_execute";
  } else {
    rec.state = "steering_check";
  }
  await tx.save();
}

const inboxItem = z.union([z.string().min(1), agentMessageSchema]);

/** Messages taken from an inbox reach the UI once the step's write is saved. */
function announce(tx: Tx, taken: AgentMessage[]): void {
  for (const message of taken) {
    tx.afterSave({ type: "message_start", message });
    tx.afterSave({ type: "message_end", message });
  }
}

/**
 * Take an inbox's messages onto the transcript without losing any to a crash: peek, append with
 * ids from their position, then drain (atomic read + clear) and append whatever arrived in between.
 */
async function takeInbox(tx: Tx, name: string, kind: "steer" | "followup"): Promise<Entry[]> {
  const peek = await callRequired<{ items?: unknown[] }>(tx.trigger, "session-inbox::peek", { name, session_id: tx.sid });
  const seen = Array.isArray(peek?.items) ? peek.items : [];
  const toMessages = (items: unknown[], offset: number): Entry[] =>
    items.flatMap((item, i) => {
      const parsed = inboxItem.safeParse(item);
      if (!parsed.success) {
        console.warn(`turn-orchestrator: dropped an unreadable ${name} inbox item of ${tx.sid}`);
        return [];
      }
      return [{ entry_id: inboxEntryId(tx.rec.run_id, kind, tx.rec.turn_count, offset + i), message: normaliseMessage(parsed.data) }];
    });
  if (seen.length === 0) return [];
  const first = toMessages(seen, 0);
  await appendMany(tx.trigger, tx.sid, first);
  const drained = await callRequired<{ items?: unknown[] }>(tx.trigger, "session-inbox::drain", { name, session_id: tx.sid });
  const all = Array.isArray(drained?.items) ? drained.items : [];
  const late = all.length > seen.length ? toMessages(all.slice(seen.length), seen.length) : [];
  await appendMany(tx.trigger, tx.sid, late);
  return [...first, ...late];
}

/** `turn::steering_check`: steering > follow-up > pending function results > end. */
export async function steeringCheck(tx: Tx): Promise<void> {
  const rec = tx.rec;
  // The round that just ended gets its one turn_end.
  if (rec.last_assistant) turnEndOnce(tx, rec.last_assistant);
  let taken = await takeInbox(tx, INBOX_STEERING, "steer");
  if (taken.length === 0) taken = await takeInbox(tx, INBOX_FOLLOWUP, "followup");
  announce(
    tx,
    taken.map((e) => e.message),
  );
  const merged = taken.length === 0 && rec.function_results.length === 0 && (await mergedSinceWatermark(tx));
  if (taken.length > 0 || rec.function_results.length > 0 || merged) {
    if (maxTurnsReached(rec)) return endAtMaxTurns(tx);
    rec.function_results = [];
    rec.state = "assistant_streaming";
    return tx.save();
  }
  // A typed turn without a valid result yet is nudged instead of finished (bounded).
  if (await nudgeForOutput(tx)) return;
  return finishSession(tx);
}
