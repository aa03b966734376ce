import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// Node-side checks of the deployable itself (no server): `wrangler deploy --dry-run`.
export default defineProject({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  // One test process runs file after file with the modules it has loaded (tests/README.md, "Tiers").
  test: { name: "node", environment: "node", include: ["**/*.test.ts"], testTimeout: 120_000, hookTimeout: 120_000, isolate: false },
});
