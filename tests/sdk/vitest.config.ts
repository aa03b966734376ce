import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// Node-side SDK tests: the client core against a real WebSocket server, HTTP-invoked functions
// against a real node:http server, the edge host registry, type tests, and e2e against the engine.
export default defineProject({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  test: {
    name: "sdk",
    environment: "node",
    include: ["**/*.test.ts"],
    typecheck: { enabled: true, include: ["**/*.test-d.ts"], tsconfig: "./tsconfig.json" },
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});
