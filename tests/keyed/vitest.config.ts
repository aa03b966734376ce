import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";
import { engineInWorkerd } from "@iii-edge/test-support/workerd-project";

// Keyed workers inside workerd (docs/keyed-workers.md, docs/engineering.md Toolchain §5): the real
// Engine object, the demo keyed counter's host (EDGE_KEYED) and its Durable Object per user.
export default defineProject(async () => ({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  // Only the keyed host: the engine waits for no other manifest.
  plugins: [await engineInWorkerd({ EDGE_HOSTS: "EDGE_KEYED" })],
  // One workerd per test process, reused file after file; the setup file resets its objects first.
  test: { name: "keyed", include: ["**/*.test.ts"], setupFiles: ["../workers/apply-migrations.ts"], isolate: false, testTimeout: 30_000 },
}));
