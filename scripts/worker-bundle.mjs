#!/usr/bin/env node
// The engine Worker built once and run many times: what `wrangler dev` does on every start (bundle
// deploy/worker.ts with esbuild, turn wrangler.toml into Miniflare's options, then run workerd)
// costs 9–16 CPU-seconds, most of it wrangler's own process and esbuild. The test suites start the
// engine about a hundred times, so they build the bundle once (`wrangler deploy --dry-run`, the same
// bundling a deploy does) with the Miniflare options wrangler derives from the same config, and
// scripts/start.mjs runs that bundle on Miniflare directly when $III_WORKER_BUNDLE names it
// (scripts/run-bundle.mjs). Everything else `npm start` does (migrations, settings, banner) is the same.
//
// A bundle dir is named by a stamp of every source it could include (the workspace's sources, the
// config and the lockfile), so an edit makes a new one. One process builds it (a lock dir) while the
// others starting at the same moment wait, in a scratch dir renamed into place, so nobody ever runs
// half a bundle; older bundles are removed once a newer one is built.
//
//   node scripts/worker-bundle.mjs          prints the bundle dir, building it when missing
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
/** What esbuild can reach from deploy/worker.ts: the workspace's packages and the deploy folder. */
const SOURCE_DIRS = ["deploy", "engine-do", "protocol", "sdk-edge", "sdk-browser", "workers", "demo-app/edge", "demo-app/src"];
const SOURCE_FILES = ["wrangler.toml", "package-lock.json"];
const SKIP = new Set(["node_modules", "dist", "test", "out", ".wrangler"]);
export const OPTIONS_FILE = "miniflare-options.json";
export const SCRIPT_FILE = "worker.js";

function walk(dir, out) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(p, out);
    else if (/\.(ts|tsx|js|mjs|json|sql|toml)$/.test(entry.name)) out.push(p);
  }
  return out;
}

/** A stamp of every file the bundle may include: path, size and content. Hashing them costs
 * 25–70 ms, and a suite file may start several engines, so a process stamps once: sources do not
 * change under a running test process. */
let stamped;
export function bundleStamp() {
  stamped ??= stampSources();
  return stamped;
}

function stampSources() {
  const files = [...SOURCE_DIRS.flatMap((d) => walk(path.join(root, d), [])), ...SOURCE_FILES.map((f) => path.join(root, f))].sort();
  const h = createHash("sha256");
  for (const f of files) {
    if (!existsSync(f)) continue;
    h.update(`${path.relative(root, f)}\0${statSync(f).size}\0`).update(readFileSync(f));
  }
  return h.digest("hex").slice(0, 16);
}

/** How long a builder may hold the lock before another takes over (a build takes 3–10 s here). */
const LOCK_STALE_MS = 120_000;

/** The bundle dir for the current sources, built when missing: one process builds while the others
 * starting at the same moment wait for it. Throws with wrangler's output when the build fails. */
export async function ensureBundle() {
  const base = path.join(root, ".wrangler", "bundles");
  const dir = path.join(base, bundleStamp());
  const lock = `${dir}.lock`;
  mkdirSync(base, { recursive: true });
  for (;;) {
    if (existsSync(path.join(dir, OPTIONS_FILE))) return dir;
    try {
      mkdirSync(lock);
      break;
    } catch {
      try {
        if (Date.now() - statSync(lock).mtimeMs > LOCK_STALE_MS) rmSync(lock, { recursive: true, force: true });
      } catch {
        // released meanwhile
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    if (!existsSync(path.join(dir, OPTIONS_FILE))) await build(base, dir);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
  return dir;
}

/** Bundles of earlier sources, an hour old or more (a run that began before an edit may still use one). */
function pruneOlder(base, keep) {
  for (const name of readdirSync(base)) {
    const p = path.join(base, name);
    if (p === keep || !/^[0-9a-f]{16}$/.test(name)) continue;
    try {
      if (Date.now() - statSync(p).mtimeMs > 3_600_000) rmSync(p, { recursive: true, force: true });
    } catch {
      // removed meanwhile
    }
  }
}

async function build(base, dir) {
  const building = mkdtempSync(path.join(base, "building-"));
  try {
    const wrangler = path.join(root, "node_modules", ".bin", "wrangler");
    const r = spawnSync(wrangler, ["deploy", "--dry-run", "--outdir", building], {
      cwd: root,
      env: {
        ...process.env,
        PATH: `${path.join(root, "node_modules", ".bin")}${path.delimiter}${process.env.PATH ?? ""}`,
        WRANGLER_SEND_METRICS: "false",
        WRANGLER_HIDE_BANNER: "true",
        CLOUDFLARE_CF_FETCH_ENABLED: "false",
        CI: "1",
      },
      encoding: "utf8",
    });
    if (r.status !== 0) throw new Error(`wrangler deploy --dry-run failed:\n${r.stdout}\n${r.stderr}`);
    const { unstable_getMiniflareWorkerOptions } = await import("wrangler");
    const { workerOptions } = unstable_getMiniflareWorkerOptions(path.join(root, "wrangler.toml"));
    // The bundle is one ES module; wrangler's module rules are for unbundled sources.
    const { modulesRules: _rules, ...options } = workerOptions;
    writeFileSync(path.join(building, OPTIONS_FILE), JSON.stringify(options));
    renameSync(building, dir);
    pruneOlder(base, dir);
  } finally {
    rmSync(building, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(await ensureBundle());
