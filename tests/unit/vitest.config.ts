import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// Plain-Node unit tests of pure engine/protocol code: the update ops of state::update and the
// frame parser (property tests with fast-check).
export default defineProject({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  test: { name: "unit", environment: "node", include: ["**/*.test.ts"] },
});
