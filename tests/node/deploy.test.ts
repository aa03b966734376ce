// The project is deployable from day one: `wrangler deploy --dry-run` bundles the Worker with every
// binding wrangler.toml declares, offline (no account, no network).
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import { repoRoot } from "@iii-edge/test-support/engine-server";

it("wrangler deploy --dry-run builds the engine Worker with its bindings", async () => {
  const out = mkdtempSync(path.join(tmpdir(), "iii-edge-dry-"));
  try {
    const { stdout } = await promisify(execFile)(
      path.join(repoRoot, "node_modules/.bin/wrangler"),
      ["deploy", "--dry-run", "--outdir", out],
      {
        cwd: repoRoot,
        env: {
          ...process.env,
          PATH: `${path.join(repoRoot, "node_modules/.bin")}:${process.env.PATH}`,
          WRANGLER_SEND_METRICS: "false",
          WRANGLER_HIDE_BANNER: "true",
          CLOUDFLARE_CF_FETCH_ENABLED: "false",
          CI: "1",
        },
      },
    );
    for (const binding of ["env.ENGINE (Engine)", "env.DB", "env.DELIVERIES", "env.EDGE_DEMO", "env.ASSETS"])
      expect(stdout).toContain(binding);
    const bundle = readFileSync(path.join(out, "worker.js"), "utf8");
    expect(bundle).toMatch(/\bEngine = class extends DurableObject\b|class Engine extends DurableObject\b/);
    expect(bundle).toMatch(/\bDemoEdgeFunctions = class\b|class DemoEdgeFunctions\b/);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
