// What stays verbatim (the tail) and what gets pruned (docs/harness-contracts.md §6.1 "Tail selection",
// "Prune"), over the messages the model reads after the summary, each with its token count.
import { PRUNED_OUTPUT_TEXT, type AgentMessage } from "@iii-edge/protocol/harness";

export interface Counted {
  entry_id: string;
  message: AgentMessage;
  tokens: number;
}

/** A user message that starts a turn (one made only of function_result blocks answers calls). */
export function startsTurn(m: AgentMessage): boolean {
  if (m.role !== "user") return false;
  return !Array.isArray(m.content) || m.content.length === 0 || m.content.some((b) => b.type !== "function_result");
}

/** The tail may only begin where no call/result pair is cut: at a turn's user message or at an
 * assistant message (never at a result, whose call would be summarised away). */
const canStartTail = (m: AgentMessage): boolean => m.role === "assistant" || startsTurn(m);

export interface TailChoice {
  /** Index of the first message kept; -1 when nothing is kept (everything is the head). */
  keep: number;
  tail_tokens: number;
}

/**
 * Walk the last `turns` user turns newest → oldest, keeping whole turns while they fit `budget`;
 * the first that does not fit contributes its longest suffix (starting after its user message, at
 * an assistant message) that does, then the walk stops. Keeping from index 0 keeps nothing either:
 * the caller then summarises everything.
 */
export function selectTail(msgs: readonly Counted[], budget: number, turns: number): TailChoice {
  const starts: number[] = [];
  msgs.forEach((c, i) => {
    if (startsTurn(c.message)) starts.push(i);
  });
  // Messages before the first user message (a tail that began mid-turn) form a turn of their own.
  if (starts[0] !== 0) starts.unshift(0);
  const recent = starts.slice(-turns);
  let keep = -1;
  let total = 0;
  let kept = 0;
  for (let t = recent.length - 1; t >= 0; t--) {
    const start = recent[t];
    const end = t + 1 < recent.length ? recent[t + 1] : msgs.length;
    let size = 0;
    for (let i = start; i < end; i++) size += msgs[i].tokens;
    if (total + size <= budget) {
      keep = start;
      total += size;
      kept = total;
      continue;
    }
    // The longest suffix after the turn's user message that fits, starting at an assistant message.
    let suffix = 0;
    for (let i = end - 1; i > start; i--) {
      suffix += msgs[i].tokens;
      if (total + suffix > budget) break;
      if (canStartTail(msgs[i].message)) {
        keep = i;
        kept = total + suffix;
      }
    }
    total = kept;
    break;
  }
  if (keep <= 0) return { keep: -1, tail_tokens: 0 };
  return { keep, tail_tokens: total };
}

export interface PruneChoice {
  entry_ids: string[];
  /** Tokens the window loses: each output's count less its stub's. */
  freed: number;
  scanned: number;
}

const isPruned = (m: AgentMessage): boolean =>
  m.role === "function_result" &&
  Array.isArray(m.content) &&
  m.content.length === 1 &&
  m.content[0].type === "text" &&
  m.content[0].text === PRUNED_OUTPUT_TEXT;

/**
 * Function outputs newest → oldest, skipping the last `skipTurns` user turns: the first `protect`
 * tokens of outputs stay, every output past them is queued; a queue that frees less than `minFree`
 * is dropped (not worth a write). Outputs of `protectedTools` and already-pruned ones never count.
 */
export function selectPrune(
  msgs: readonly Counted[],
  opts: { protect: number; minFree: number; skipTurns: number; protectedTools: readonly string[]; stubTokens: (c: Counted) => number },
): PruneChoice {
  const userStarts: number[] = [];
  msgs.forEach((c, i) => {
    if (startsTurn(c.message)) userStarts.push(i);
  });
  if (userStarts.length < opts.skipTurns) return { entry_ids: [], freed: 0, scanned: 0 };
  const boundary = opts.skipTurns === 0 ? msgs.length : userStarts[userStarts.length - opts.skipTurns];
  const protectedTools = new Set(opts.protectedTools);
  let seen = 0;
  let freed = 0;
  let scanned = 0;
  const queued: string[] = [];
  for (let i = boundary - 1; i >= 0; i--) {
    const m = msgs[i].message;
    if (m.role !== "function_result" || isPruned(m)) continue;
    scanned += 1;
    if (protectedTools.has(m.function_id)) continue;
    seen += msgs[i].tokens;
    if (seen > opts.protect) {
      const gain = msgs[i].tokens - opts.stubTokens(msgs[i]);
      if (gain > 0) {
        queued.push(msgs[i].entry_id);
        freed += gain;
      }
    }
  }
  if (freed < opts.minFree || queued.length === 0) return { entry_ids: [], freed: 0, scanned };
  return { entry_ids: queued, freed, scanned };
}
