import { defineConfig } from "vitest/config";

// One project per layer (docs/engineering.md Style §8): workerd tests for the DO, node e2e against
// `npm start`, interop with the real iii-sdk, real Chromium, and the sandbox host's microVMs.
export default defineConfig({
  test: {
    projects: [
      "tests/*/vitest.config.ts",
      "workers/*/vitest.config.ts",
      "workers/vitest.config.ts",
      "workers/vitest.e2e.config.ts",
      "demo-app/vitest.config.ts",
    ],
  },
});
