import { defineProject } from "vitest/config";

// Plain-Node unit tests of pure engine/protocol code: the update ops of state::update and the
// frame parser (property tests with fast-check).
export default defineProject({
  test: { name: "unit", environment: "node", include: ["**/*.test.ts"] },
});
