// The budget math (docs/harness-contracts.md §6.1) on the catalog's real limits.
import { compactionModelOf } from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";
import { hardLimit, pruneThresholds, summaryMaxTokens, tailBudget, usableTokens } from "../src/budget.ts";
import { configFromEnv, DEFAULT_CONFIG } from "../src/config.ts";

const limitOf = (m: { context_window: number; max_output_tokens?: number; input_limit?: number }) =>
  compactionModelOf({ id: "m", provider: "p", ...m }).limit;

describe("usable = (input_limit ?? context − max_output) − min(20k, 10 % of context) − thinking", () => {
  it.each([
    ["gpt-4o 128k / 16k out", { context_window: 128_000, max_output_tokens: 16_384 }, 128_000 - 16_384 - 12_800],
    ["claude-sonnet-4-5 200k / 64k out", { context_window: 200_000, max_output_tokens: 64_000 }, 200_000 - 64_000 - 20_000],
    ["gpt-5 400k, input 272k", { context_window: 400_000, input_limit: 272_000, max_output_tokens: 128_000 }, 272_000 - 20_000],
    ["a small 8k / 1k model: the reserve is 10 %", { context_window: 8_000, max_output_tokens: 1_000 }, 7_000 - 800],
    ["no output limit: 4k assumed", { context_window: 32_000 }, 32_000 - 4_096 - 3_200],
  ])("%s", (_name, model, usable) => {
    expect(usableTokens(limitOf(model), DEFAULT_CONFIG)).toBe(usable);
  });

  it("an unknown window (0) is never compacted; a thinking budget is reserved too; the reserve is configurable", () => {
    expect(usableTokens({ context: 0 }, DEFAULT_CONFIG)).toBe(0);
    expect(hardLimit({ context: 0, output: 100 })).toBe(0);
    expect(usableTokens({ context: 200_000, output: 64_000, thinking: 10_000 }, DEFAULT_CONFIG)).toBe(106_000);
    expect(usableTokens({ context: 200_000, output: 64_000 }, { reservedTokens: 5_000 })).toBe(131_000);
    expect(usableTokens({ context: 1_000, output: 2_000 }, DEFAULT_CONFIG)).toBe(0);
  });
});

describe("tail, prune and summary budgets", () => {
  it("the tail gets a quarter of usable, clamped to [2 000, 8 000], at most half of a tiny window", () => {
    expect(tailBudget(98_816, DEFAULT_CONFIG)).toBe(8_000);
    expect(tailBudget(20_000, DEFAULT_CONFIG)).toBe(5_000);
    expect(tailBudget(6_200, DEFAULT_CONFIG)).toBe(2_000);
    expect(tailBudget(3_000, DEFAULT_CONFIG)).toBe(1_500);
    expect(tailBudget(98_816, { preserveRecentTokens: 500 })).toBe(500);
  });

  it("prune thresholds are 40k/20k on big windows and 40 %/20 % of small ones; env wins", () => {
    expect(pruneThresholds(116_000, DEFAULT_CONFIG)).toEqual({ protect: 40_000, minFree: 20_000 });
    expect(pruneThresholds(6_200, DEFAULT_CONFIG)).toEqual({ protect: 2_480, minFree: 1_240 });
    expect(pruneThresholds(6_200, { pruneProtect: 100, pruneMinFree: 10 })).toEqual({ protect: 100, minFree: 10 });
  });

  it("a summary may take a fifth of usable, 256 to 4 096 tokens", () => {
    expect(summaryMaxTokens(116_000)).toBe(4_096);
    expect(summaryMaxTokens(6_200)).toBe(1_240);
    expect(summaryMaxTokens(500)).toBe(256);
  });
});

describe("config from the environment", () => {
  it("defaults, overrides, and a clear error naming a bad variable", () => {
    expect(configFromEnv({})).toEqual(DEFAULT_CONFIG);
    const cfg = configFromEnv({
      COMPACT_RESERVED_TOKENS: "5000",
      COMPACT_TAIL_TURNS: "3",
      COMPACT_PRUNE_PROTECT: "100",
      COMPACT_PRUNE_PROTECTED_TOOLS: "skills::get, memory::read",
    });
    expect(cfg).toMatchObject({
      reservedTokens: 5_000,
      tailTurns: 3,
      pruneProtect: 100,
      pruneProtectedTools: ["skills::get", "memory::read"],
    });
    expect(() => configFromEnv({ COMPACT_TAIL_TURNS: "0" })).toThrow(/COMPACT_TAIL_TURNS must be between 1 and 50/);
    expect(() => configFromEnv({ COMPACT_RESERVED_TOKENS: "lots" })).toThrow(/COMPACT_RESERVED_TOKENS must be a whole number/);
  });
});
