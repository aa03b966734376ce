import { defineProject } from "vitest/config";

// Real Chromium (Debian's /usr/bin/chromium through playwright-core) against the engine that
// `npm start` runs: tabs as workers, Worker-hosted functions, offline outbox.
export default defineProject({
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
