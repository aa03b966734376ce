import { fileURLToPath } from "node:url";
import { defineProject } from "vitest/config";
import { sourceAliases } from "../scripts/workspace-exports.mjs";

// The harness workers' own tests (workers/<name>/test/), each at its worker's layer: pure logic in
// Node, and a worker run alone against `npm start`'s engine where it needs one.
export default defineProject({
  resolve: { alias: sourceAliases() },
  test: {
    name: "harness-workers",
    root: fileURLToPath(new URL(".", import.meta.url)),
    environment: "node",
    include: ["*/test/**/*.test.ts"],
    exclude: ["sandbox-host/**", "**/node_modules/**"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});
