// The budget math (docs/harness-contracts.md §6.1): how much of a model's window a request may fill (the
// worker kit's `compactionUsableTokens`, shared with the orchestrator's pre-flight), how large the verbatim tail
// may be, when pruning is worth it, how long a summary may get.
import type { CompactionModel } from "@iii-edge/protocol/harness";
import { compactionHardLimit, compactionUsableTokens } from "@iii-edge/sdk-edge/worker";
import type { CompactionConfig } from "./config.ts";

export type Limit = CompactionModel["limit"];

/** The tail's adaptive budget: a quarter of the usable window, clamped to [2 000, 8 000]
 * (enough recent turns to carry on, small beside the summary's budget), the floor never more than
 * half the usable window (a tiny model keeps room for the summary). */
export const TAIL_FRACTION = 0.25;
export const TAIL_MIN_TOKENS = 2_000;
export const TAIL_MAX_TOKENS = 8_000;
/** Prune thresholds: 40 000 protected / 20 000 to free fit a 100k+ window; a smaller one
 * protects 40 % and needs 20 % freed (the defaults are what these give for a ~100k usable window). */
export const PRUNE_PROTECT_TOKENS = 40_000;
export const PRUNE_PROTECT_FRACTION = 0.4;
export const PRUNE_MIN_FREE_TOKENS = 20_000;
export const PRUNE_MIN_FREE_FRACTION = 0.2;
/** After pruning alone, the window must be under this share of usable to skip the summary: just
 * under the threshold would trip it again on the next turn. */
export const PRUNED_TARGET_FRACTION = 0.75;
/** A summary's own output budget: a fifth of the usable window, between 256 and 4 096 tokens (a page
 * of terse bullets; the template has eight sections). */
export const SUMMARY_MAX_TOKENS = 4_096;
export const SUMMARY_MIN_TOKENS = 256;
export const SUMMARY_FRACTION = 0.2;

/** The most a request may be: the input limit, else the window less the output limit (0 = unknown). */
export const hardLimit = (limit: Limit): number => compactionHardLimit(limit);

/** (input_limit ?? context − max_output) − min(COMPACT_RESERVED_TOKENS, 10 % of the window)
 * − thinking budget; 0 when the window is unknown (never compact). */
export const usableTokens = (limit: Limit, cfg: Pick<CompactionConfig, "reservedTokens">): number =>
  compactionUsableTokens(limit, cfg.reservedTokens);

const clamp = (v: number, lo: number, hi: number) => Math.max(lo, Math.min(hi, v));

export function tailBudget(usable: number, cfg: Pick<CompactionConfig, "preserveRecentTokens">): number {
  if (cfg.preserveRecentTokens !== undefined) return cfg.preserveRecentTokens;
  return clamp(Math.floor(TAIL_FRACTION * usable), Math.min(TAIL_MIN_TOKENS, Math.floor(usable / 2)), TAIL_MAX_TOKENS);
}

export function pruneThresholds(
  usable: number,
  cfg: Pick<CompactionConfig, "pruneProtect" | "pruneMinFree">,
): { protect: number; minFree: number } {
  return {
    protect: cfg.pruneProtect ?? Math.min(PRUNE_PROTECT_TOKENS, Math.floor(PRUNE_PROTECT_FRACTION * usable)),
    minFree: cfg.pruneMinFree ?? Math.min(PRUNE_MIN_FREE_TOKENS, Math.floor(PRUNE_MIN_FREE_FRACTION * usable)),
  };
}

export function summaryMaxTokens(usable: number): number {
  return clamp(Math.floor(SUMMARY_FRACTION * usable), SUMMARY_MIN_TOKENS, SUMMARY_MAX_TOKENS);
}
