#!/usr/bin/env node
// `npm start`: apply D1 migrations to the local state, then run the engine Worker with wrangler
// dev on 127.0.0.1:$PORT (default 8787). Local Durable Object, D1 and Queue state lives in
// $III_STATE_DIR (default .wrangler/state); nothing reaches the network.
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const port = process.env.PORT || "8787";
const stateDir = path.resolve(root, process.env.III_STATE_DIR || ".wrangler/state");
const wrangler = path.join(root, "node_modules", ".bin", "wrangler");
// Offline: no update check, no telemetry, no Request.cf download (docs/engineering.md Toolchain
// §8). node_modules/.bin first, so wrangler runs on the Node 22 of the `node` devDependency.
// X_LOCAL_OBSERVABILITY off: wrangler dev's local trace collector records every WebSocket message
// as an event of its own, which under a burst of frames costs the machine more than the engine does
// (4 × 15,000 frames: 188 s of CPU and 1.5 GB with it, 1 s and 166 MB without; tests/bench/ws-sink/).
const env = { ...process.env, PATH: `${path.join(root, "node_modules", ".bin")}${path.delimiter}${process.env.PATH ?? ""}`, WRANGLER_SEND_METRICS: "false", WRANGLER_HIDE_BANNER: "true", CLOUDFLARE_CF_FETCH_ENABLED: "false", X_LOCAL_OBSERVABILITY: process.env.X_LOCAL_OBSERVABILITY ?? "false" };

const migrate = spawnSync(wrangler, ["d1", "migrations", "apply", "DB", "--local", "--persist-to", stateDir], {
  cwd: root,
  env: { ...env, CI: "1" },
  stdio: ["ignore", "ignore", "inherit"],
});
if (migrate.status !== 0) {
  console.error("D1 migrations failed");
  process.exit(migrate.status ?? 1);
}

const args = ["dev", "--ip", "127.0.0.1", "--port", port, "--persist-to", stateDir, "--show-interactive-dev-session=false", "--log-level", process.env.III_LOG_LEVEL || "warn"];
if (process.env.III_INSPECTOR_PORT) args.push("--inspector-port", process.env.III_INSPECTOR_PORT);
// Extra Worker vars as a JSON object, e.g. III_DEV_VARS='{"QUEUES":"{…}"}' (values may hold commas).
if (process.env.III_DEV_VARS) for (const [k, v] of Object.entries(JSON.parse(process.env.III_DEV_VARS))) args.push("--var", `${k}:${v}`);
// Auth settings come from the environment (or .dev.vars, which wrangler reads itself). They reach
// the Worker through a private env file, never the command line (which `ps` shows to everyone).
const AUTH_VARS = ["AUTH_SECRET", "AUTH_FUNCTION"];
const devVarsPath = path.join(root, ".dev.vars");
const devVars = existsSync(devVarsPath) ? readFileSync(devVarsPath, "utf8") : "";
const fromEnv = AUTH_VARS.filter((k) => process.env[k]);
let secretsDir;
if (fromEnv.length > 0) {
  secretsDir = mkdtempSync(path.join(tmpdir(), "iii-edge-vars-"));
  const file = path.join(secretsDir, "vars.env");
  // .dev.vars first, the environment after it: later values win.
  writeFileSync(file, `${devVars}\n${fromEnv.map((k) => `${k}=${JSON.stringify(process.env[k])}`).join("\n")}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  args.push("--env-file", file);
}
const hasAuth = fromEnv.length > 0 || AUTH_VARS.some((k) => new RegExp(`^\\s*${k}\\s*=\\s*\\S`, "m").test(devVars));
const cleanup = () => secretsDir && rmSync(secretsDir, { recursive: true, force: true });

const child = spawn(wrangler, args, { cwd: root, env, stdio: "inherit" });
console.log(`iii-edge engine starting on http://127.0.0.1:${port} (state: ${path.relative(root, stateDir) || "."})`);
console.log(hasAuth ? "auth: tokens required (mint one with `npm run -s token -- --sub NAME`)" : "warning: no AUTH_SECRET set — the engine is open to loopback clients (set AUTH_SECRET to require tokens)");
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => child.kill(sig));
child.on("exit", (code, signal) => {
  cleanup();
  process.exit(code ?? (signal ? 1 : 0));
});
