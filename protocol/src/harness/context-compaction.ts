// The context compaction worker's contracts (docs/harness-contracts.md §1.8, §5.2, §6.1).
import { z } from "zod";
import type { AgentMessage, AssistantMessage } from "./messages.ts";
import { type Model, providerName } from "./providers.ts";
import { type CompactionRecord, treeEntryId as compactionEntryId, treeSessionId as compactionSessionId } from "./session-storage.ts";

// A session's transcript is never rewritten by summarisation: a `compaction` entry on the active
// path records the summary of everything before `tail_start_id`, and what the model is sent is
// `[summary, ...path from tail_start_id]` (compactionView). session-tree::messages keeps serving the
// raw path (storage semantics); the view is assembled by whoever sends the model a request (the
// orchestrator each round, the compaction worker for its own counting). Pruning is the one in-place
// edit: a large function output's content becomes PRUNED_OUTPUT_TEXT (session-tree::update_parts).

/** The tag the summary is wrapped in when the model reads it. */
export const COMPACTION_SUMMARY_TAG = "conversation-summary";

/** The synthetic message the model reads the summary as (§6.1 read side): an assistant
 * message with no model/provider, so no provider mistakes it for one of its own turns. */
export function compactionSummaryMessage(summary: string, timestamp = 0): AssistantMessage {
  return {
    role: "assistant",
    content: [{ type: "text", text: `<${COMPACTION_SUMMARY_TAG}>\n${summary}\n</${COMPACTION_SUMMARY_TAG}>` }],
    stop_reason: "end",
    model: "",
    provider: "",
    timestamp,
  };
}

export interface CompactionView<E> {
  /** The summary as a message (its entry id is the compaction entry's), or null without a compaction. */
  summary: { entry_id: string; message: AgentMessage } | null;
  /** The path's messages the model still reads verbatim, oldest first. */
  messages: E[];
}

/**
 * What the model reads of a path (`entries`: its messages, oldest first, as session-tree::messages
 * returns them) given the latest compaction on it: the summary, then the messages from
 * `tail_start_id` on. A null or missing `tail_start_id` starts right after the compaction entry
 * (not at the path's first message, which would send the whole summarised history again).
 */
export function compactionView<E extends { entry_id: string }>(
  entries: readonly E[],
  latest: CompactionRecord | null | undefined,
): CompactionView<E> {
  if (!latest) return { summary: null, messages: [...entries] };
  let start = latest.tail_start_id ? entries.findIndex((e) => e.entry_id === latest.tail_start_id) : -1;
  if (start < 0) start = latest.after_message_id === null ? 0 : entries.findIndex((e) => e.entry_id === latest.after_message_id) + 1;
  return {
    summary: { entry_id: latest.entry_id, message: compactionSummaryMessage(latest.summary, latest.timestamp) },
    messages: entries.slice(Math.max(0, start)),
  };
}

/** The item id of a `compaction_done` the compaction worker writes to `agent::events` itself (async
 * and manual compactions; a sync one is emitted by the orchestrator with its own ids): the id of the
 * `turn_end` item that woke it with one more digit. The orchestrator's ids are fixed-width digits,
 * so this sorts right after that turn_end and before every later event, never collides with one,
 * and is still an event id `run::events` accepts as `after`. */
export const COMPACTION_EVENT_SUFFIX = { async: "1", manual: "2" } as const;
export const compactionEventItemId = (turnEndItemId: string, mode: keyof typeof COMPACTION_EVENT_SUFFIX): string =>
  `${turnEndItemId}${COMPACTION_EVENT_SUFFIX[mode]}`;

const compactionLimit = z.object({
  context: z.number().int().nonnegative(),
  input: z.number().int().nonnegative().optional(),
  output: z.number().int().nonnegative().optional(),
  /** Tokens a requested thinking level may use (the model's `thinking_budgets[level]`), reserved
   * too. */
  thinking: z.number().int().nonnegative().optional(),
});
export const compactionModelSchema = z.object({ id: z.string().min(1).max(200), providerID: providerName, limit: compactionLimit });
export type CompactionModel = z.infer<typeof compactionModelSchema>;
/** The reserve is min(COMPACT_RESERVED_TOKENS, 10 % of the window): a fixed 20k would leave a small
 * model almost nothing, a fraction alone too much headroom on a big one. */
export const COMPACTION_RESERVED_TOKENS = 20_000;
export const COMPACTION_RESERVE_WINDOW_FRACTION = 0.1;
/** A model whose output limit is unknown: the output part of the fallback limits a model without a
 * catalog entry gets (32k context, 32k input, 4k output). */
export const COMPACTION_UNKNOWN_OUTPUT_TOKENS = 4_096;
/** A catalog entry as a compaction model. */
export function compactionModelOf(
  model: Pick<Model, "id" | "provider" | "context_window" | "max_output_tokens" | "input_limit">,
): CompactionModel {
  const limit: CompactionModel["limit"] = { context: model.context_window };
  if (model.input_limit !== undefined) limit.input = model.input_limit;
  if (model.max_output_tokens !== undefined) limit.output = model.max_output_tokens;
  return { id: model.id, providerID: model.provider, limit };
}
/** Largest system prompt / tool list compact_now takes to count a request exactly. */
export const MAX_COMPACTION_SYSTEM_PROMPT_CHARS = 400_000;
export const MAX_COMPACTION_TOOLS = 256;

/** `context-compaction::compact_now` (the orchestrator's pre-flight, before a provider call): count
 * the request exactly; when it does not fit the model's usable window, prune, then summarise,
 * waiting for the session's compaction lease. `system_prompt` and `tools` make the count exact (the
 * worker cannot know them). */
export const compactNowRequest = z.object({
  session_id: compactionSessionId,
  projected_tokens: z.number().int().nonnegative().optional(),
  last_user_message_id: compactionEntryId.nullable().optional(),
  model: compactionModelSchema,
  system_prompt: z.string().max(MAX_COMPACTION_SYSTEM_PROMPT_CHARS).nullable().optional(),
  tools: z.array(z.unknown()).max(MAX_COMPACTION_TOOLS).optional(),
  /** Compact even when the request fits. */
  force: z.boolean().optional(),
});
export type CompactNowRequest = z.input<typeof compactNowRequest>;
/** `context-compaction::compact_session` (a UI's `/compact`): always summarise; no continue prompt. */
export const compactSessionRequest = z.object({
  session_id: compactionSessionId,
  model: compactionModelSchema.partial({ limit: true }).optional(),
});
/** `context-compaction::prune_tool_outputs`. */
export const pruneToolOutputsRequest = z.object({
  session_id: compactionSessionId,
  model: compactionModelSchema.partial({ limit: true }).optional(),
});

/** `ok`: a summary was appended (`compaction_entry_id`), the window is summary + tail; `pruned`:
 * pruning alone brought it under the target; `fits`: nothing to do; `busy`: another compaction of
 * the session held the lease too long; `overflow`: even compacted it cannot fit; `empty`: nothing to
 * summarise (or the summariser said nothing). */
export const compactNowResult = z.discriminatedUnion("status", [
  z.object({
    status: z.literal("ok"),
    tail_start_id: z.string().nullable(),
    tokens_before: z.number(),
    tokens_after: z.number(),
    auto_continued: z.boolean(),
    compaction_entry_id: z.string(),
    summary_text: z.string(),
    pruned_parts: z.number(),
    pruned_tokens: z.number(),
  }),
  z.object({
    status: z.literal("pruned"),
    tokens_before: z.number(),
    tokens_after: z.number(),
    pruned_parts: z.number(),
    pruned_tokens: z.number(),
  }),
  z.object({ status: z.literal("fits"), tokens: z.number(), usable: z.number() }),
  z.object({ status: z.literal("busy") }),
  z.object({ status: z.literal("overflow"), tokens: z.number(), limit: z.number() }),
  z.object({ status: z.literal("empty") }),
]);
export type CompactNowResult = z.infer<typeof compactNowResult>;
export const pruneToolOutputsResult = z.object({
  pruned_tokens: z.number(),
  pruned_parts: z.number(),
  scanned_parts: z.number(),
  busy: z.literal(true).optional(),
});
export type PruneToolOutputsResult = z.infer<typeof pruneToolOutputsResult>;
