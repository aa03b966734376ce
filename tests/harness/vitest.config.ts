import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// The agent harness end to end: `npm start`'s engine with the built-in harness workers, real
// provider clients against local replay servers of each provider's SSE (tests/support/provider-replay.ts).
export default defineProject({
  resolve: { alias: sourceAliases() },
  test: {
    name: "harness",
    environment: "node",
    include: ["**/*.test.ts"],
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
