import { defineProject } from "vitest/config";

// Trigger types end to end against `npm start` (tests/support/engine-server.ts): the official
// iii-sdk as the worker, plain fetch for http triggers, a WebSocket as the browser stream client.
export default defineProject({
  test: {
    name: "triggers-e2e",
    environment: "node",
    include: ["**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
