// The orchestrator's side of context compaction (docs/harness-contracts.md §6.1; the worker is
// context-compaction):
//
// * **Read side.** session-tree::messages serves the raw path — storage semantics, what was said.
//   What the model is sent is assembled here, where the request is built: the path and the latest
//   compaction on it (`session-tree::compactions`), read together, give `[summary, ...tail]`
//   (protocol `compactionView`). The summary message's entry id is the compaction entry's.
// * **Sync pre-flight.** Before the provider call, a cheap estimate of the request (no tokenizer in
//   this worker) decides whether to ask `context-compaction::compact_now`, which counts it exactly
//   with the model's encoding and compacts only when it really does not fit. `ok` / `pruned` →
//   the window is read again; `busy` → CompactionBusyError (transient: the queue retries the step
//   once the lease is free); `overflow` → ContextOverflowError (the run fails); anything else, or
//   no compaction worker, → the request goes as it is (the provider has the last word).
//   A sync `compaction_done` is emitted here, with this worker's own event ids.
import {
  compactionModelOf,
  compactionView,
  type AgentMessage,
  type CompactionRecord,
  type CompactNowResult,
} from "@iii-edge/protocol/harness";
import { compactionUsableTokens } from "@iii-edge/sdk-edge/worker";
import { callRequired, errorCode, errorText, TransientError, type Trigger } from "./calls.ts";
import { forProvider } from "./messages.ts";
import type { StoredRunRequest } from "./run-request.ts";
import type { Tx } from "./store.ts";
import { readTranscript, type Entry } from "./transcript.ts";

/** compact_now's budget (spec: 60 s): a lease wait (≤ 30 s) and a summary. */
export const COMPACT_NOW_TIMEOUT_MS = 60_000;
/** UTF-8 bytes per token the cheap estimate assumes: o200k averages ~4 on English prose and ~3 on
 * JSON/code, so /3 over-counts most text (the exact count is compact_now's). */
export const ESTIMATE_BYTES_PER_TOKEN = 3;
/** Ask compact_now once the estimate reaches this share of the usable window (the estimate is
 * rough until compact_now's exact count has calibrated it)… */
export const PREFLIGHT_ASK_FRACTION = 0.8;
/** …and this share once it has (the ratio drifts as the content changes). */
export const PREFLIGHT_ASK_FRACTION_CALIBRATED = 0.95;
/** Sessions whose estimate→exact ratio is remembered (a cache: lost on restart, costs one call). */
export const CALIBRATION_CACHE_MAX = 1_000;

/** Another compaction of this session held the lease past compact_now's wait: retry the step. */
export class CompactionBusyError extends TransientError {
  constructor(sid: string) {
    super(`compaction of ${sid} is busy (another compaction holds its lease)`);
    this.name = "CompactionBusyError";
  }
}

/** Even compacted, the request does not fit the model's window: the run cannot go on. */
export class ContextOverflowError extends Error {
  constructor(tokens: number, limit: number) {
    super(`context overflow: the request needs ${tokens} tokens even after compaction, the model takes ${limit}`);
    this.name = "ContextOverflowError";
  }
}

let warnedMissing = false;
const calibration = new Map<string, number>();

async function latestCompaction(trigger: Trigger, sid: string): Promise<CompactionRecord | null> {
  try {
    const r = await callRequired<{ compactions?: CompactionRecord[] }>(trigger, "session-tree::compactions", { session_id: sid, limit: 1 });
    return r?.compactions?.at(-1) ?? null;
  } catch (e) {
    // A session storage without compaction support serves the raw path, as before.
    if (errorCode(e) === "function_not_found" || errorCode((e as { cause?: unknown }).cause) === "function_not_found") return null;
    throw e;
  }
}

/** The transcript as the model reads it: the summary of the latest compaction, then the path from
 * its tail on (the whole path when there is none). Both reads go out together. */
export async function readContextWindow(trigger: Trigger, sid: string): Promise<Entry[]> {
  const [entries, latest] = await Promise.all([readTranscript(trigger, sid), latestCompaction(trigger, sid)]);
  const view = compactionView(entries, latest);
  return view.summary ? [view.summary, ...view.messages] : view.messages;
}

const utf8 = new TextEncoder();
function estimateTokens(messages: readonly AgentMessage[], req: StoredRunRequest): number {
  const bytes =
    utf8.encode(JSON.stringify(messages)).byteLength +
    utf8.encode(req.system_prompt ?? "").byteLength +
    utf8.encode(JSON.stringify(req.function_schemas ?? [])).byteLength;
  return Math.ceil(bytes / ESTIMATE_BYTES_PER_TOKEN);
}

function remember(sid: string, ratio: number): void {
  if (!Number.isFinite(ratio) || ratio <= 0) return;
  calibration.delete(sid);
  if (calibration.size >= CALIBRATION_CACHE_MAX) calibration.delete(calibration.keys().next().value as string);
  calibration.set(sid, ratio);
}

/** The round's previous request as the provider measured it (input, cached or not, and output). */
function lastReported(rec: Tx["rec"]): number {
  const u = rec.last_assistant?.usage;
  if (!u) return 0;
  return [u.input, u.output, u.cache_read, u.cache_write].reduce<number>((n, v) => n + (typeof v === "number" && v > 0 ? v : 0), 0);
}

/** `compactionPreflight`'s body: the window to send (see the file comment). */
export async function preflight(tx: Tx, req: StoredRunRequest, transcript: readonly Entry[]): Promise<AgentMessage[]> {
  const messages = forProvider(transcript.map((e) => e.message));
  const meta = tx.rec.model_meta;
  if (!meta || !(meta.context_window > 0)) return messages; // unknown window: never compact
  const model = compactionModelOf(meta);
  const usable = compactionUsableTokens(model.limit);
  if (usable === 0) return messages;
  const estimate = estimateTokens(messages, req);
  const ratio = calibration.get(tx.sid);
  const projected = Math.max(ratio === undefined ? estimate : Math.ceil(estimate * ratio), lastReported(tx.rec));
  if (projected < (ratio === undefined ? PREFLIGHT_ASK_FRACTION : PREFLIGHT_ASK_FRACTION_CALIBRATED) * usable) return messages;

  const lastUser = [...transcript].reverse().find((e) => e.message.role === "user");
  let r: CompactNowResult;
  try {
    r = await tx.trigger<unknown, CompactNowResult>({
      function_id: "context-compaction::compact_now",
      payload: {
        session_id: tx.sid,
        projected_tokens: projected,
        last_user_message_id: lastUser?.entry_id ?? null,
        model: { id: req.model, providerID: req.provider, limit: model.limit },
        system_prompt: req.system_prompt || null,
        tools: req.function_schemas ?? [],
      },
      timeoutMs: COMPACT_NOW_TIMEOUT_MS,
    });
  } catch (e) {
    if (errorCode(e) === "function_not_found") {
      if (!warnedMissing)
        console.warn("turn-orchestrator: context-compaction::compact_now is not registered: requests are sent uncompacted");
      warnedMissing = true;
    } else
      console.warn(
        `turn-orchestrator: compact_now for ${tx.sid} failed, sending the request as it is: ${errorCode(e) ?? "error"}: ${errorText(e)}`,
      );
    return messages;
  }
  switch (r?.status) {
    case "fits":
      if (r.tokens > 0) remember(tx.sid, r.tokens / estimate);
      return messages;
    case "busy":
      throw new CompactionBusyError(tx.sid);
    case "overflow":
      throw new ContextOverflowError(r.tokens, r.limit);
    case "ok":
    case "pruned": {
      if (r.status === "ok") {
        tx.events.emit({
          type: "compaction_done",
          mode: "sync",
          summary_text: r.summary_text,
          tokens_before: r.tokens_before,
          compaction_entry_id: r.compaction_entry_id,
          tail_start_id: r.tail_start_id,
        });
      }
      const window = forProvider((await readContextWindow(tx.trigger, tx.sid)).map((e) => e.message));
      if (r.tokens_after > 0) remember(tx.sid, r.tokens_after / estimateTokens(window, req));
      return window;
    }
    default:
      return messages;
  }
}
