import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// Plain-Node tests of engine/protocol code: pure parts (the update ops, the frame parser with
// fast-check) and suites on the engine core served in this process (support/node-engine.ts), among
// them the wire cases shared with tests/workers (node-wire.ts). No engine process.
export default defineProject({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  test: { name: "unit", environment: "node", include: ["**/*.test.ts"] },
});
