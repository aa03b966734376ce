import { defineConfig } from "vitest/config";
import { LongestFirst } from "@iii-edge/test-support/longest-first";

// One project per layer (docs/engineering.md Style §8): workerd tests for the DO, node e2e against
// `npm start`, interop with the real iii-sdk, real Chromium, and the sandbox host's microVMs.
/** Test files run at once. Most files spend their time waiting on an engine, a browser or a VM in
 * another process (a full run keeps 2 cores about 60 % busy with one file per core), so one more
 * file than cores keeps them busy. `VITEST_MAX_WORKERS` overrides. */
const maxWorkers = Number(process.env.VITEST_MAX_WORKERS ?? 3);

export default defineConfig({
  test: {
    maxWorkers,
    // The heaviest files first (tests/support/file-weights.json), whatever their project: a long file that
    // starts last keeps the run going on one core after everything else is done.
    sequence: { sequencer: LongestFirst },
    projects: [
      "tests/*/vitest.config.ts",
      "tests/unit/vitest.jitless.config.ts",
      "workers/*/vitest.config.ts",
      "workers/vitest.config.ts",
      "workers/vitest.e2e.config.ts",
      "tests/sdk/vitest.e2e.config.ts",
      "demo-app/vitest.config.ts",
    ],
  },
});
