// The window arithmetic of context compaction for the worker kit (docs/harness-contracts.md §6.1): how
// much of a model's window a request may fill. The orchestrator's pre-flight and the compaction
// worker must agree on it to the token, so it is written once, here; the constants it reads are
// protocol's (`@iii-edge/protocol/harness`).
import {
  COMPACTION_RESERVE_WINDOW_FRACTION,
  COMPACTION_RESERVED_TOKENS,
  COMPACTION_UNKNOWN_OUTPUT_TOKENS,
  type CompactionModel,
} from "@iii-edge/protocol/harness";

/** The most a request may be: the input limit, else the window less the output limit (0 = unknown). */
export function compactionHardLimit(limit: CompactionModel["limit"]): number {
  if (!(limit.context > 0)) return 0;
  if (limit.input !== undefined && limit.input > 0) return Math.min(limit.input, limit.context);
  return Math.max(0, limit.context - (limit.output !== undefined && limit.output > 0 ? limit.output : COMPACTION_UNKNOWN_OUTPUT_TOKENS));
}
/** usable = (input_limit ?? context − max_output) − min(reserved, 10 % of context) − thinking
 * budget; 0 when the window is unknown (never compact). A request at or past it is compacted. */
export function compactionUsableTokens(limit: CompactionModel["limit"], reservedTokens: number = COMPACTION_RESERVED_TOKENS): number {
  const hard = compactionHardLimit(limit);
  if (hard === 0) return 0;
  return Math.max(
    0,
    hard - Math.min(reservedTokens, Math.floor(COMPACTION_RESERVE_WINDOW_FRACTION * limit.context)) - (limit.thinking ?? 0),
  );
}
