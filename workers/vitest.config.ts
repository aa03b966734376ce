import { fileURLToPath } from "node:url";
import { defineProject } from "vitest/config";
import { sourceAliases } from "../scripts/workspace-exports.mjs";

// The harness workers' logic (workers/<name>/test/*.test.ts): plain Node, no engine process, no
// network beyond 127.0.0.1 — part of `npm run test:unit`. A worker run against an engine dials the
// core served in-process (tests/support/node-engine.ts). A test that needs `npm start`'s engine
// (workerd, D1, the front door) is named *.e2e.test.ts and runs in vitest.e2e.config.ts.
export default defineProject({
  resolve: { alias: sourceAliases() },
  test: {
    name: "worker-logic",
    root: fileURLToPath(new URL(".", import.meta.url)),
    environment: "node",
    include: ["*/test/**/*.test.ts"],
    exclude: ["**/*.e2e.test.ts", "sandbox-host/**", "**/node_modules/**"],
    testTimeout: 30_000,
    // One process runs file after file with the modules already loaded (see tests/unit/vitest.config.ts).
    isolate: false,
  },
});
