import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// Attacks on the engine, each performed against `npm start` with AUTH_SECRET set
// (tests/support/auth.ts): refused, bounded or answered, with nothing registered or stored changing.
// One engine per file; files run in parallel with each other (each has its own port and state).
export default defineProject({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  test: {
    name: "security",
    environment: "node",
    include: ["**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // One test process runs file after file with the modules it has loaded (tests/README.md, "Tiers").
    isolate: false,
  },
});
