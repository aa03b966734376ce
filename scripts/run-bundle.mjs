#!/usr/bin/env node
// Runs a prebuilt engine Worker (scripts/worker-bundle.mjs) on Miniflare: the same workerd, the same
// bindings wrangler derives from wrangler.toml, the state persisted where `wrangler dev --persist-to`
// puts it. scripts/start.mjs spawns it in place of `wrangler dev` when $III_WORKER_BUNDLE is set.
//
// Environment: III_WORKER_BUNDLE (the bundle dir), PORT, III_STATE_DIR (absolute), III_VARS_FILE (a
// private JSON file of the Worker's vars, read and deleted at once), III_LOG_LEVEL.
import { readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { OPTIONS_FILE, SCRIPT_FILE } from "./worker-bundle.mjs";

// Miniflare is one CommonJS file of about 140,000 lines in a package without a "type": imported from
// ESM, Node first parses it to guess its format and then again to find its exports (0.7 CPU-s per
// start, measured here); `require` loads it as CommonJS straight away.
const { convertV4MiniflareOptions, Log, LogLevel, Miniflare } = createRequire(import.meta.url)("miniflare");

const bundle = process.env.III_WORKER_BUNDLE;
const stateDir = process.env.III_STATE_DIR;
const varsFile = process.env.III_VARS_FILE;
if (!bundle || !stateDir || !varsFile) {
  console.error("run-bundle: III_WORKER_BUNDLE, III_STATE_DIR and III_VARS_FILE are required");
  process.exit(2);
}
const options = JSON.parse(readFileSync(path.join(bundle, OPTIONS_FILE), "utf8"));
const vars = JSON.parse(readFileSync(varsFile, "utf8"));
rmSync(varsFile, { force: true });

const LEVELS = {
  debug: LogLevel.DEBUG,
  info: LogLevel.INFO,
  log: LogLevel.INFO,
  warn: LogLevel.WARN,
  error: LogLevel.ERROR,
  none: LogLevel.NONE,
};
const mf = new Miniflare(
  convertV4MiniflareOptions({
    host: "127.0.0.1",
    port: Number(process.env.PORT || "8787"),
    log: new Log(LEVELS[process.env.III_LOG_LEVEL || "warn"] ?? LogLevel.WARN),
    resourcePersistencePath: path.join(stateDir, "v3"),
    workers: [
      {
        ...options,
        name: "iii-edge",
        // The module given whole: with `scriptPath` Miniflare parses the 9 MB bundle to find its
        // imports (about a CPU-second), and a bundle has none.
        modules: [
          { type: "ESModule", path: path.join(bundle, SCRIPT_FILE), contents: readFileSync(path.join(bundle, SCRIPT_FILE), "utf8") },
        ],
        bindings: { ...options.bindings, ...vars },
      },
    ],
  }),
);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await mf.dispose().catch(() => {});
  process.exit(0);
};
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, stop);
await mf.ready;
