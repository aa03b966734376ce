// The three merge rules of publish-and-collect (docs/harness-contracts.md §6.3): how the replies of one event
// become the one answer its publisher acts on. Pure functions of the request payload and the
// replies in arrival order; a reply of the wrong shape is skipped, never an error.
import { MERGE_RULES, type MergeRule } from "@iii-edge/protocol/harness";
import { isRecord } from "@iii-edge/protocol";

/** A rule by its name; undefined when it is none of MERGE_RULES. */
export function parseMergeRule(name: unknown): MergeRule | undefined {
  return typeof name === "string" ? MERGE_RULES.find((r) => r === name) : undefined;
}

/** The first reply with `block: true`, kept whole (it can carry a reason, a denial, an approval
 * marker); else `{block: false}`. Before-call gates use it. */
export function firstBlockWins(replies: readonly unknown[]): Record<string, unknown> {
  for (const r of replies) if (isRecord(r) && r.block === true) return r;
  return { block: false };
}

/** Start from the request payload; per reply, in order: `content` replaces, `details` is
 * shallow-merged, `terminate` (a boolean) overwrites — the last writer wins. After-call hooks use
 * it (redaction, truncation, side effects). A payload that is not an object starts as `{}`. */
export function fieldMerge(payload: unknown, replies: readonly unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = isRecord(payload) ? { ...payload } : {};
  for (const r of replies) {
    if (!isRecord(r)) continue;
    if ("content" in r) out.content = r.content;
    if (isRecord(r.details)) out.details = { ...(isRecord(out.details) ? out.details : {}), ...r.details };
    if (typeof r.terminate === "boolean") out.terminate = r.terminate;
  }
  return out;
}

/** A message list as a reply or a payload may carry it: an array, or `{messages: [...]}`. */
function messageList(v: unknown): unknown[] | undefined {
  if (Array.isArray(v)) return v;
  if (isRecord(v) && Array.isArray(v.messages)) return v.messages;
  return undefined;
}

/** Each reply is a full replacement message list; the last decodable one wins; the fallback is the
 * original list (the payload's, or the payload itself when it holds none). Context transforms use it. */
export function pipelineLastWins(payload: unknown, replies: readonly unknown[]): unknown {
  for (let i = replies.length - 1; i >= 0; i--) {
    const list = messageList(replies[i]);
    if (list) return list;
  }
  return messageList(payload) ?? payload;
}

export function merge(rule: MergeRule, payload: unknown, replies: readonly unknown[]): unknown {
  switch (rule) {
    case "first_block_wins":
      return firstBlockWins(replies);
    case "field_merge":
      return fieldMerge(payload, replies);
    case "pipeline_last_wins":
      return pipelineLastWins(payload, replies);
  }
}
