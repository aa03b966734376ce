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
    // Files run beside the other projects' files: each starts its own engine, replay servers and
    // temp dirs on free ports. (With fileParallelism off, vitest would run this project alone, one
    // file at a time, after every other project: 17 files in series at the end of `npm test`.)
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // One test process runs file after file with the modules it has loaded (tests/README.md, "Tiers").
    isolate: false,
  },
});
