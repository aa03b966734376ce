import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// The sandbox host's tests boot real microVMs under QEMU's software CPU (TCG) on 2-core CI boxes:
// boots take 2–3 s each when both cores are busy, hence the generous timeouts.
export default defineConfig({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  test: {
    name: "sandbox",
    root: fileURLToPath(new URL(".", import.meta.url)),
    environment: "node",
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 90_000,
    hookTimeout: 180_000,
    teardownTimeout: 30_000,
  },
});
