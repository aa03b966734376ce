import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// Node-side SDK tests in plain Node (part of `npm run test:unit`): the client core against a real
// WebSocket server, HTTP-invoked functions against a real node:http server, the edge host registry,
// type tests. What needs `npm start`'s engine is named *.e2e.test.ts and runs in vitest.e2e.config.ts.
export default defineProject({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  test: {
    name: "sdk",
    environment: "node",
    include: ["**/*.test.ts"],
    exclude: ["**/*.e2e.test.ts", "**/node_modules/**"],
    typecheck: { enabled: true, include: ["**/*.test-d.ts"], tsconfig: "./tsconfig.json" },
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // One process runs file after file with the modules already loaded (see tests/unit/vitest.config.ts).
    isolate: false,
  },
});
