// The scale benches that need the Engine object inside workerd (wake after eviction, a big
// catalog, discovery fan-out): real hibernatable sockets and `evictDurableObject`, which only the
// vitest plugin offers locally. Not one of the test projects (the root config's glob is
// tests/*/vitest.config.ts); run by `npm run bench` through ../scale-bench.mjs, or alone:
//   npx vitest run --config tests/bench/workerd/vitest.config.ts
import { fileURLToPath } from "node:url";
import { defineProject } from "vitest/config";
import { sourceAliases } from "../../../scripts/workspace-exports.mjs";
import { engineInWorkerd } from "@iii-edge/test-support/workerd-project";

export default defineProject(async () => ({
  resolve: { alias: sourceAliases() },
  // 1,000+ subscriber sockets from one (open, loopback) principal: over MAX_CONNECTIONS_PER_*'s default.
  plugins: [await engineInWorkerd({ EDGE_HOSTS: "", MAX_CONNECTIONS_PER_TOKEN: "20000", MAX_CONNECTIONS_PER_IP: "20000" })],
  test: {
    name: "bench-workerd",
    include: ["**/*.bench.test.ts"],
    setupFiles: [fileURLToPath(new URL("../../workers/apply-migrations.ts", import.meta.url))],
    testTimeout: 600_000,
  },
}));
