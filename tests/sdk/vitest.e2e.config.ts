import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// The SDK against `npm start`'s engine (*.e2e.test.ts): Worker modules hosted in a Worker of their own.
export default defineProject({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  test: {
    name: "sdk-e2e",
    environment: "node",
    include: ["**/*.e2e.test.ts"],
    exclude: ["**/node_modules/**"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // One test process runs file after file with the modules it has loaded (tests/README.md, "Tiers").
    isolate: false,
  },
});
