// workerd tests for the Engine Durable Object (docs/engineering.md Style §8): raw iii frames over
// real hibernatable WebSockets, eviction between steps, property tests over the protocol schemas.
import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";
import { engineInWorkerd } from "@iii-edge/test-support/workerd-project";

export default defineProject(async () => ({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  // No Worker-hosted functions here: the engine must not wait for an edge manifest.
  // FUZZ_SEED replays a run of fuzz.test.ts.
  plugins: [await engineInWorkerd({ EDGE_HOSTS: "", FUZZ_SEED: process.env.FUZZ_SEED ?? "" })],
  test: {
    name: "workers",
    include: ["**/*.test.ts"],
    // One workerd per test process, reused file after file (a runtime start costs about 4 CPU-s);
    // the setup file deletes every object before each file, so each still starts from nothing.
    setupFiles: ["./apply-migrations.ts"],
    isolate: false,
    testTimeout: 20_000,
  },
}));
