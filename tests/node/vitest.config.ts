import { defineProject } from "vitest/config";

// Node-side checks of the deployable itself (no server): `wrangler deploy --dry-run`.
export default defineProject({
  test: { name: "node", environment: "node", include: ["**/*.test.ts"], testTimeout: 120_000 },
});
