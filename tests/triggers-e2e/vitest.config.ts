import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// Trigger types end to end against `npm start` (tests/support/engine-server.ts): the official
// iii-sdk as the worker, plain fetch for http triggers, a WebSocket as the browser stream client.
export default defineProject({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  test: {
    name: "triggers-e2e",
    environment: "node",
    include: ["**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // One test process runs file after file with the modules it has loaded (tests/README.md, "Tiers").
    isolate: false,
  },
});
