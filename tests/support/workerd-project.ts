// The workerd test projects' common setup (docs/engineering.md Toolchain §5): the engine's own
// wrangler.toml and its D1 migrations (read here in Node, applied in each project's setup file),
// plus the bindings a project overrides.
import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { repoRoot } from "./engine-server.ts";

export async function engineInWorkerd(bindings: Record<string, string>) {
  return cloudflareTest({
    wrangler: { configPath: path.join(repoRoot, "wrangler.toml") },
    miniflare: {
      bindings: {
        TEST_MIGRATIONS: await readD1Migrations(path.join(repoRoot, "engine-do/migrations")),
        ...bindings,
      },
    },
  });
}
