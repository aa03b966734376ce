// The one pipeline all three entry points share (docs/harness-contracts.md §6.1): count → prune → summarise
// the head (updating the previous summary) → persist the compaction entry → stamp. The caller holds
// the session's compaction lease; emitting `compaction_done` is the caller's too (index.ts).
import {
  compactionSummaryMessage,
  MAX_COMPACTION_DETAIL_FILES,
  MAX_COMPACTION_SUMMARY_CHARS,
  MAX_UPDATE_PARTS,
  PRUNED_OUTPUT_TEXT,
  type AgentMessage,
  type CompactionModel,
  type CompactNowResult,
  type SessionUpdatePartsResponse,
  type UserMessage,
} from "@iii-edge/protocol/harness";
import type { Channels } from "@iii-edge/sdk-edge/worker";
import { hardLimit, PRUNED_TARGET_FRACTION, pruneThresholds, summaryMaxTokens, tailBudget, usableTokens } from "./budget.ts";
import { call, type Trigger } from "./calls.ts";
import type { CompactionConfig } from "./config.ts";
import { selectPrune, selectTail, type Counted } from "./select.ts";
import { chunkHead, continuePrompt, extractFileOps, summarySystemPrompt, summaryUserPrompt } from "./summary.ts";
import { summarise } from "./summarizer.ts";
import type { RankLoader } from "./ranks.ts";
import { counterFor, type TokenCounter } from "./tokens.ts";
import { PRUNE_LEASE_SCOPE, tryLease } from "./lease.ts";
import { readView } from "./transcript.ts";

/** State scope of the last compaction per session (`{at, entry_id, mode}`): a turn_end whose round
 * started before it reports the size of a window that no longer exists. */
export const LAST_COMPACTION_SCOPE = "last_compaction_at";
/** Prune skips the two most recent user turns: the model is still working with them. */
export const PRUNE_SKIP_TURNS = 2;
/** Most summariser calls one compaction makes: a head bigger than this many chunks keeps its newest
 * ones (the previous summary covers what came before the previous compaction). */
export const MAX_SUMMARY_CHUNKS = 8;
/** Room left in the summariser's request for its own framing (system/user message overhead). */
export const SUMMARY_PROMPT_SLACK_TOKENS = 64;
/** A window too small to hold a summariser request of this much head cannot be compacted. */
export const MIN_CHUNK_TOKENS = 256;
/** The continue prompt quotes at most this much of the request it replays. */
export const CONTINUE_QUOTE_CHARS = 4_000;

export type CompactionMode = "sync" | "async" | "manual";

export interface PipelineDeps {
  trigger: Trigger;
  channels: Channels;
  cfg: CompactionConfig;
  /** Where the tokenizer's rank tables come from (unset: the default, ranks.ts). */
  ranks?: RankLoader;
  now: () => number;
  newId: () => string;
}

export interface RunOptions {
  mode: CompactionMode;
  model: CompactionModel;
  system?: string | null;
  tools?: readonly unknown[];
  /** Sync: the entry id of the user message the round answers (quoted in a continue prompt when it
   * ends up summarised). */
  replayTargetId?: string | null;
  /** Summarise even when the request fits (manual; async, whose trigger already decided). */
  force: boolean;
  /** Async: what the provider reported for the request that triggered (its system prompt and tools
   * included, which this worker cannot see). */
  reportedTokens?: number;
  entryId?: string;
}

const sum = (xs: readonly Counted[]) => xs.reduce((n, c) => n + c.tokens, 0);

const stubOf = (m: AgentMessage): AgentMessage =>
  m.role === "function_result" ? { ...m, content: [{ type: "text", text: PRUNED_OUTPUT_TEXT }] } : m;

/** Prune the chosen outputs (session-tree::update_parts, MAX_UPDATE_PARTS per call); `counted` is
 * updated in place for the ones that were. */
async function applyPrune(
  deps: PipelineDeps,
  sid: string,
  counted: Counted[],
  ids: readonly string[],
  counter: TokenCounter,
): Promise<{ parts: number; tokens: number }> {
  const done = new Set<string>();
  for (let i = 0; i < ids.length; i += MAX_UPDATE_PARTS) {
    const r = await call<SessionUpdatePartsResponse>(deps.trigger, "session-tree::update_parts", {
      session_id: sid,
      parts: ids.slice(i, i + MAX_UPDATE_PARTS).map((entry_id) => ({ entry_id })),
    });
    for (const u of r.updated) done.add(u.entry_id);
    for (const u of r.unchanged) done.add(u);
  }
  let tokens = 0;
  for (const c of counted) {
    if (!done.has(c.entry_id)) continue;
    c.message = stubOf(c.message);
    const t = counter.message(c.message);
    tokens += c.tokens - t;
    c.tokens = t;
  }
  return { parts: done.size, tokens };
}

export interface PruneOutcome {
  parts: number;
  tokens: number;
  scanned: number;
  busy: boolean;
}

/** The cheap first pass, under its own `prune_lease` (skipped when another prune holds it). */
export async function pruneOutputs(
  deps: PipelineDeps,
  sid: string,
  counted: Counted[],
  usable: number,
  counter: TokenCounter,
): Promise<PruneOutcome> {
  const choice = selectPrune(counted, {
    ...pruneThresholds(usable, deps.cfg),
    skipTurns: PRUNE_SKIP_TURNS,
    protectedTools: deps.cfg.pruneProtectedTools,
    stubTokens: (c) => counter.message(stubOf(c.message)),
  });
  if (choice.entry_ids.length === 0) return { parts: 0, tokens: 0, scanned: choice.scanned, busy: false };
  const lease = await tryLease(deps.trigger, PRUNE_LEASE_SCOPE, sid, { now: deps.now });
  if (!lease) return { parts: 0, tokens: 0, scanned: choice.scanned, busy: true };
  try {
    const r = await applyPrune(deps, sid, counted, choice.entry_ids, counter);
    return { ...r, scanned: choice.scanned, busy: false };
  } finally {
    await lease.release();
  }
}

/** The view's messages with their counts. */
export function countView(counter: TokenCounter, messages: readonly { entry_id: string; message: AgentMessage }[]): Counted[] {
  return messages.map((e) => ({ entry_id: e.entry_id, message: e.message, tokens: counter.message(e.message) }));
}

async function stamp(deps: PipelineDeps, sid: string, entryId: string | null, mode: CompactionMode): Promise<void> {
  await call(deps.trigger, "state::set", { scope: LAST_COMPACTION_SCOPE, key: sid, value: { at: deps.now(), entry_id: entryId, mode } });
}

/** Run the pipeline for `sid` (the caller holds the compaction lease). */
export async function runCompaction(deps: PipelineDeps, sid: string, opts: RunOptions): Promise<CompactNowResult> {
  const { cfg } = deps;
  const limit = opts.model.limit;
  const hard = hardLimit(limit);
  const usable = usableTokens(limit, cfg);
  if (usable === 0) return { status: "fits", tokens: 0, usable: 0 };
  const counter = await counterFor({ id: opts.model.id, provider: opts.model.providerID }, deps.ranks);
  const view = await readView(deps.trigger, sid);
  const fixed = counter.fixed(opts.system ?? null, opts.tools ?? []);
  const summaryTokens = view.summary ? counter.message(view.summary.message) : 0;
  const counted = countView(counter, view.messages);
  const measured = fixed + summaryTokens + sum(counted);
  const before = Math.max(measured, opts.reportedTokens ?? 0);
  if (!opts.force && before < usable) return { status: "fits", tokens: before, usable };
  // The system prompt and tools alone do not fit: nothing in the transcript can make room.
  if (fixed >= hard) return { status: "overflow", tokens: before, limit: hard };

  // 1. Prune: large old outputs become "[output pruned]" (cheap, no model call).
  const pruned = await pruneOutputs(deps, sid, counted, usable, counter);
  const afterPrune = before - pruned.tokens;
  if (opts.mode !== "manual" && pruned.parts > 0 && afterPrune <= PRUNED_TARGET_FRACTION * usable) {
    await stamp(deps, sid, null, opts.mode);
    return { status: "pruned", tokens_before: before, tokens_after: afterPrune, pruned_parts: pruned.parts, pruned_tokens: pruned.tokens };
  }

  // 2. Choose the tail; the head before it is summarised.
  const tail = selectTail(counted, tailBudget(usable, cfg), cfg.tailTurns);
  const headEnd = tail.keep === -1 ? counted.length : tail.keep;
  const head = counted.slice(0, headEnd);
  if (head.length === 0) {
    if (afterPrune > hard) return { status: "overflow", tokens: afterPrune, limit: hard };
    return pruned.parts > 0
      ? { status: "pruned", tokens_before: before, tokens_after: afterPrune, pruned_parts: pruned.parts, pruned_tokens: pruned.tokens }
      : { status: "empty" };
  }

  // 3. Summarise: previous summary + the new head, chunk by chunk (each call updates the last).
  const summaryBudget = summaryMaxTokens(usable);
  const previous = view.latest?.summary ?? null;
  // The summariser's request must fit the window too: its instructions (with the previous summary,
  // which a later chunk sees grown to at most one summary), the chunk, and the summary it writes.
  const firstChunk = hard - summaryBudget - counter.text(summarySystemPrompt(previous)) - SUMMARY_PROMPT_SLACK_TOKENS;
  const laterChunk = hard - summaryBudget - counter.text(summarySystemPrompt("")) - summaryBudget - SUMMARY_PROMPT_SLACK_TOKENS;
  if (Math.min(firstChunk, laterChunk) < MIN_CHUNK_TOKENS) return { status: "overflow", tokens: afterPrune, limit: hard };
  let chunks = chunkHead(
    head.map((c) => c.message),
    { toolOutputMaxChars: cfg.toolOutputMaxChars, firstMaxTokens: firstChunk, maxTokens: laterChunk, count: (s) => counter.text(s) },
  );
  if (chunks.length > MAX_SUMMARY_CHUNKS) chunks = chunks.slice(-MAX_SUMMARY_CHUNKS);
  let summary: string | null = previous;
  for (const chunk of chunks) {
    const text = await summarise(deps.trigger, deps.channels, {
      provider: opts.model.providerID,
      model: opts.model.id,
      system_prompt: summarySystemPrompt(summary),
      user_prompt: summaryUserPrompt(chunk),
      max_tokens: summaryBudget,
    });
    if (text === "") return { status: "empty" };
    summary = text.length > MAX_COMPACTION_SUMMARY_CHARS ? text.slice(0, MAX_COMPACTION_SUMMARY_CHARS) : text;
  }
  if (summary === null) return { status: "empty" };

  // 4. Persist: the compaction entry (it becomes the leaf), a continue prompt when the request being
  //    answered was summarised away, the stamp.
  const entryId = opts.entryId ?? `cmp_${deps.newId()}`;
  const tailStartId = tail.keep === -1 ? null : counted[tail.keep].entry_id;
  const details = extractFileOps(
    head.map((c) => c.message),
    view.latest?.details ?? null,
    MAX_COMPACTION_DETAIL_FILES,
  );
  await call(deps.trigger, "session-tree::compact", {
    session_id: sid,
    entry_id: entryId,
    summary,
    tokens_before: before,
    details,
    tail_start_id: tailStartId,
  });
  const replayAt = opts.replayTargetId ? counted.findIndex((c) => c.entry_id === opts.replayTargetId) : -1;
  const autoContinued = opts.mode === "sync" && replayAt >= 0 && replayAt < headEnd;
  let continueTokens = 0;
  if (autoContinued) {
    const message: UserMessage & { origin: { synthetic: true } } = {
      role: "user",
      content: [{ type: "text", text: continuePrompt(counted[replayAt].message, CONTINUE_QUOTE_CHARS) }],
      timestamp: deps.now(),
      origin: { synthetic: true },
    };
    await call(deps.trigger, "session-tree::append", { session_id: sid, entry_id: `${entryId}-continue`, parent_id: entryId, message });
    continueTokens = counter.message(message);
  }
  const after = fixed + counter.message(compactionSummaryMessage(summary)) + sum(counted.slice(headEnd)) + continueTokens;
  await stamp(deps, sid, entryId, opts.mode);
  if (after > hard) return { status: "overflow", tokens: after, limit: hard };
  return {
    status: "ok",
    tail_start_id: tailStartId,
    tokens_before: before,
    tokens_after: after,
    auto_continued: autoContinued,
    compaction_entry_id: entryId,
    summary_text: summary,
    pruned_parts: pruned.parts,
    pruned_tokens: pruned.tokens,
  };
}
