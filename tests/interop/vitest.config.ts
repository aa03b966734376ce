import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// Interop with the real client: `npm start`'s engine (tests/support/engine-server.ts) driven by the
// unmodified iii-sdk@0.22.1 from npm. One engine per file (its own port and state dir), so files run
// beside the other projects' files rather than alone after them (as fileParallelism off would).
export default defineProject({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  test: {
    name: "interop",
    environment: "node",
    include: ["**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // One test process runs file after file with the modules it has loaded (tests/README.md, "Tiers").
    isolate: false,
  },
});
