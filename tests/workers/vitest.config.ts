// workerd tests for the Engine Durable Object (design/style.md §8): raw iii frames over real
// hibernatable WebSockets, eviction between steps, and property tests over the protocol schemas.
import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineProject } from "vitest/config";

const root = path.resolve(import.meta.dirname, "../..");

export default defineProject(async () => ({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: path.join(root, "wrangler.toml") },
      miniflare: {
        bindings: {
          TEST_MIGRATIONS: await readD1Migrations(path.join(root, "engine-do/migrations")),
          // No Worker-hosted functions here: the engine must not wait for an edge manifest.
          EDGE_HOSTS: "",
        },
      },
    }),
  ],
  test: {
    name: "workers",
    include: ["**/*.test.ts"],
    setupFiles: ["./apply-migrations.ts"],
    testTimeout: 20_000,
  },
}));
