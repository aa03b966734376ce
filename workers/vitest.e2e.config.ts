import { fileURLToPath } from "node:url";
import { defineProject } from "vitest/config";
import { sourceAliases } from "../scripts/workspace-exports.mjs";

// Each harness worker run alone against `npm start`'s engine (workers/<name>/test/*.e2e.test.ts).
export default defineProject({
  resolve: { alias: sourceAliases() },
  test: {
    name: "harness-workers",
    root: fileURLToPath(new URL(".", import.meta.url)),
    environment: "node",
    include: ["*/test/**/*.e2e.test.ts"],
    exclude: ["sandbox-host/**", "**/node_modules/**"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // One test process runs file after file with the modules it has loaded (tests/README.md, "Tiers").
    isolate: false,
  },
});
