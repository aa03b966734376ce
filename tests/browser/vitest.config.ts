import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// Real Chromium (Debian's /usr/bin/chromium through playwright-core) against the engine that
// `npm start` runs: tabs as workers, Worker-hosted functions, offline outbox.
export default defineProject({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  test: {
    name: "browser",
    environment: "node",
    include: ["**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 180_000,
    // One engine and one browser for the file; the tests build on each other's state.
    sequence: { concurrent: false },
  },
});
