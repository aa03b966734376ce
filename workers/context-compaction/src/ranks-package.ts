// The default rank loader outside a Worker (package.json "imports" `#default-ranks`): gpt-tokenizer's
// own table modules, imported on first use.
import type { RankLoader } from "./ranks.ts";

export const defaultRanks: RankLoader = {
  source: "gpt-tokenizer",
  load: async (name) =>
    (name === "o200k_base" ? await import("gpt-tokenizer/bpeRanks/o200k_base") : await import("gpt-tokenizer/bpeRanks/cl100k_base"))
      .default,
};
