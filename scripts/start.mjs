#!/usr/bin/env node
// `npm start`: apply D1 migrations to the local state, then run the engine Worker with wrangler
// dev on 127.0.0.1:$PORT (default 8787). Local Durable Object, D1 and Queue state lives in
// $III_STATE_DIR (default .wrangler/state); nothing reaches the network.
//
// Settings the Worker gets from this environment (or .dev.vars), through a private env file:
// AUTH_SECRET, AUTH_FUNCTION, RBAC (iii's RBAC listener, JSON); for the harness workers OPENAI_API_KEY, OPENAI_BASE_URL,
// ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, HARNESS_DISABLE, CREDENTIALS_KEY (default: a key made once
// per state dir, <state>/credentials.key, which `npm run worker` reads too) and III_PERMISSIONS (the
// text of iii-permissions.yaml at the root, or of $III_PERMISSIONS_PATH). III_WRANGLER_CONFIG runs
// another wrangler config than the root's.
//
// Queues: locally every queue runs on the durable backend (SQLite in the engine object, on disk in
// the state dir), whatever QUEUES says; deployed, `default` stays on Cloudflare Queues. The local
// Cloudflare Queues simulator keeps its messages in memory only — a stopped or killed `npm start`
// would lose every acknowledged message it held — so it runs only when asked for with
// III_LOCAL_QUEUES=cloudflare, and then says so loudly.
//
// Once /healthz answers, the URLs are printed (engine, demo app, health). That first /healthz also
// wakes the default namespace's engine object, whose durable queue then redelivers at once what a
// killed run left in flight.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { isMigrated, markMigrated, migrationsStamp } from "./d1-migrations.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const port = process.env.PORT || "8787";
const stateDir = path.resolve(root, process.env.III_STATE_DIR || ".wrangler/state");
const wrangler = path.join(root, "node_modules", ".bin", "wrangler");
// Offline: no update check, no telemetry, no Request.cf download (docs/engineering.md Toolchain
// §8). node_modules/.bin first, so wrangler runs on the Node 22 of the `node` devDependency.
// X_LOCAL_OBSERVABILITY off: wrangler dev's local trace collector records every WebSocket message
// as an event of its own, which under a burst of frames costs the machine more than the engine does
// (4 × 15,000 frames: 188 s of CPU and 1.5 GB with it, 1 s and 166 MB without; tests/bench/ws-sink/).
const env = {
  ...process.env,
  PATH: `${path.join(root, "node_modules", ".bin")}${path.delimiter}${process.env.PATH ?? ""}`,
  WRANGLER_SEND_METRICS: "false",
  WRANGLER_HIDE_BANNER: "true",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  X_LOCAL_OBSERVABILITY: process.env.X_LOCAL_OBSERVABILITY ?? "false",
};

// Another wrangler config than the root's (tests compose extra Worker-hosted functions this way).
const configArgs = process.env.III_WRANGLER_CONFIG ? ["--config", path.resolve(root, process.env.III_WRANGLER_CONFIG)] : [];

// ------------------------------------------------------------------ queues

/** III_LOCAL_QUEUES: "durable" (default) runs every queue on the durable backend; "cloudflare" keeps
 * QUEUES as configured and runs cloudflare-backed queues on the local simulator. */
const LOCAL_QUEUES = process.env.III_LOCAL_QUEUES || "durable";
if (LOCAL_QUEUES !== "durable" && LOCAL_QUEUES !== "cloudflare") {
  console.error(`III_LOCAL_QUEUES must be "durable" or "cloudflare", not "${LOCAL_QUEUES}"`);
  process.exit(2);
}
const devVars = process.env.III_DEV_VARS ? JSON.parse(process.env.III_DEV_VARS) : {};

/** The QUEUES var the Worker would get: III_DEV_VARS's, else the wrangler config's `QUEUES = '…'`
 * line (a TOML literal string: its text is the JSON as written, no escapes). */
function configuredQueues() {
  if (typeof devVars.QUEUES === "string") return devVars.QUEUES;
  const file = process.env.III_WRANGLER_CONFIG ? path.resolve(root, process.env.III_WRANGLER_CONFIG) : path.join(root, "wrangler.toml");
  const m = /^QUEUES\s*=\s*'(.*)'\s*$/m.exec(readFileSync(file, "utf8"));
  return m ? m[1] : undefined;
}

/**
 * QUEUES for this run, and which queues would sit in the simulator. A queue without a backend is
 * cloudflare-backed (engine-do/src/core/queues/config.ts), and `default` exists even when unnamed.
 * Text that is not a JSON object is passed on unchanged: the engine refuses it and logs why.
 */
function localQueues(text) {
  let queues;
  try {
    queues = JSON.parse(text ?? "{}");
  } catch {
    return { text, simulated: [] };
  }
  if (!queues || typeof queues !== "object" || Array.isArray(queues)) return { text, simulated: [] };
  if (!queues.default) queues.default = {};
  const cloud = Object.keys(queues).filter(
    (n) => queues[n] && typeof queues[n] === "object" && (queues[n].backend ?? "cloudflare") === "cloudflare",
  );
  if (LOCAL_QUEUES === "cloudflare") return { text, simulated: cloud.sort() };
  for (const n of cloud) queues[n] = { ...queues[n], backend: "durable" };
  return { text: JSON.stringify(queues), simulated: [] };
}
const queues = localQueues(configuredQueues());
if (queues.text !== undefined) devVars.QUEUES = queues.text;
const SIMULATOR_WARNING = queues.simulated.length
  ? `WARNING: queue${queues.simulated.length > 1 ? "s" : ""} ${queues.simulated.join(", ")} run${queues.simulated.length > 1 ? "" : "s"} on the local Cloudflare Queues simulator (III_LOCAL_QUEUES=cloudflare). ` +
    "The local Cloudflare Queues simulator keeps messages in memory only: stopping or killing npm start loses every message it holds, acknowledged or not. " +
    "Unset III_LOCAL_QUEUES to run them on the durable backend (on disk)."
  : undefined;

// D1 migrations, when the state dir is not migrated to the current ones already (d1-migrations.mjs).
const stamp = migrationsStamp(
  process.env.III_WRANGLER_CONFIG ? path.resolve(root, process.env.III_WRANGLER_CONFIG) : path.join(root, "wrangler.toml"),
);
if (!isMigrated(stateDir, stamp)) {
  const migrate = spawnSync(wrangler, ["d1", "migrations", "apply", "DB", "--local", "--persist-to", stateDir, ...configArgs], {
    cwd: root,
    env: { ...env, CI: "1" },
    stdio: ["ignore", "ignore", "inherit"],
  });
  if (migrate.status !== 0) {
    console.error("D1 migrations failed");
    process.exit(migrate.status ?? 1);
  }
  markMigrated(stateDir, stamp);
}
// III_MIGRATE_ONLY=1: prepare the state dir and stop (the test helper keeps a migrated template).
if (process.env.III_MIGRATE_ONLY === "1") process.exit(0);

const args = [
  "dev",
  ...configArgs,
  "--ip",
  "127.0.0.1",
  "--port",
  port,
  "--persist-to",
  stateDir,
  "--show-interactive-dev-session=false",
  "--log-level",
  process.env.III_LOG_LEVEL || "warn",
];
if (process.env.III_INSPECTOR_PORT) args.push("--inspector-port", process.env.III_INSPECTOR_PORT);
// Extra Worker vars as a JSON object, e.g. III_DEV_VARS='{"QUEUES":"{…}"}' (values may hold commas);
// QUEUES among them as localQueues() made it.
for (const [k, v] of Object.entries(devVars)) args.push("--var", `${k}:${v}`);
// Settings for the Worker come from the environment (and .dev.vars). They reach it through a
// private env file, never the command line (which `ps` shows to everyone).
const AUTH_VARS = ["AUTH_SECRET", "AUTH_FUNCTION", "ALLOWED_ORIGINS"];
/** iii's RBAC worker listener at /rbac (engine-do/src/rbac.ts): not the engine's own auth, which stays as AUTH_VARS say. */
const RBAC_VARS = ["RBAC"];
/** What the harness workers read (deploy/harness.ts): provider endpoints and keys, the key stored
 * credentials are encrypted with, the disable list. */
const HARNESS_VARS = [
  "OPENAI_API_KEY",
  "OPENAI_BASE_URL",
  "ANTHROPIC_API_KEY",
  "ANTHROPIC_BASE_URL",
  "CREDENTIALS_KEY",
  "HARNESS_DISABLE",
  "MODELS_OVERRIDES",
];
/** Observability (engine-do/src/core/telemetry/config.ts): tracing switch, sampling, retention,
 * and the OTLP collector spans, logs and metrics are exported to. */
const TELEMETRY_VARS = [
  "TRACING",
  "TRACE_STORE",
  "TRACE_SAMPLE_RATIO",
  "TRACE_RATE_LIMIT",
  "TRACES_MAX_AGE_MS",
  "TRACES_MAX_SPANS",
  "TRACES_MAX_BYTES",
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OTEL_EXPORTER_OTLP_HEADERS",
];
/** Which functions the MCP server at /mcp offers as tools (workers/mcp/README.md). */
const MCP_VARS = ["MCP_EXPOSE"];
/** The console's sign-in (demo-app/edge/console-token.ts): the credential a person types, and the
 * extra functions a console token may call. */
const CONSOLE_VARS = ["CONSOLE_CREDENTIAL", "CONSOLE_CALL"];
/** The console code's random bytes: 128 bits, as many as a channel key's, typed by nobody (it comes
 * in the printed URL). */
const CONSOLE_CODE_BYTES = 16;
/** 32 random bytes: an AES-256 key's worth, base64. */
const CREDENTIALS_KEY_BYTES = 32;

/** `.dev.vars` as wrangler reads it when no env file is given: dotenv 16's `parse` (no expansion).
 * Once we pass --env-file, wrangler skips .dev.vars, so its values are carried over into our file. */
function parseDotenv(text) {
  const LINE =
    /(?:^|^)\s*(?:export\s+)?([\w.-]+)(?:\s*=\s*?|:\s+?)(\s*'(?:\\'|[^'])*'|\s*"(?:\\"|[^"])*"|\s*`(?:\\`|[^`])*`|[^#\r\n]+)?\s*(?:#.*)?(?:$|$)/gm;
  const out = {};
  for (const m of text.replace(/\r\n?/gm, "\n").matchAll(LINE)) {
    let value = (m[2] || "").trim();
    const quote = value[0];
    value = value.replace(/^(['"`])([\s\S]*)\1$/gm, "$2");
    if (quote === '"') value = value.replace(/\\n/g, "\n").replace(/\\r/g, "\r");
    out[m[1]] = value;
  }
  return out;
}

/**
 * `KEY=value` lines that wrangler's --env-file reader turns back into exactly `value`, whatever it
 * holds. That reader is dotenv 16's `parse`, then dotenv-expand 12 (checked in wrangler 4.156's
 * source), and between them no quoting holds every text:
 * - '…' keeps newlines and everything else verbatim, but cannot hold ', and a backslash before the
 *   closing quote escapes it;
 * - CR anywhere in the file becomes LF before parsing ("…" can write it back as \r);
 * - then every `$NAME` / `${NAME}` is expanded, in any quotes, unless written `\$` (and `\$`
 *   becomes `$`) — a `$` right after a literal backslash is never expanded.
 * So the value goes in '…' with each `$` written `\$`, and what '…' cannot hold — ', CR, or
 * backslashes at the very end — comes in through expansion: `${III_ENVFILE_SQ_<n>}` names a helper
 * line holding <n> backslashes and a ', written before it in "…" (which holds both). The
 * backslashes just before such a character go into the helper too, since a literal one right
 * before `${` would stop the expansion. Helpers appear only when needed and are Worker vars too.
 */
const ENVFILE_HELPER = "III_ENVFILE_";
function envLines(key, value, helpers) {
  if (value.includes(ENVFILE_HELPER)) throw new Error(`${key}: a value holding "${ENVFILE_HELPER}" cannot pass through the env file`);
  let out = "";
  for (let i = 0; i < value.length; ) {
    let j = i;
    while (value[j] === "\\") j++;
    const run = j - i;
    const next = value[j];
    const kind = next === "'" ? "SQ" : next === "\r" ? "CR" : next === undefined && run > 0 ? "BS" : undefined;
    if (kind) {
      const name = `${ENVFILE_HELPER}${kind}_${run}`;
      const slashes = "\\".repeat(run);
      if (!helpers.has(name))
        helpers.set(name, kind === "SQ" ? `${name}="${slashes}'"` : kind === "CR" ? `${name}="${slashes}\\r"` : `${name}=${slashes}`);
      out += `\${${name}}`;
      i = kind === "BS" ? j : j + 1;
    } else if (run > 0) {
      out += value.slice(i, j);
      i = j;
    } else {
      out += next === "$" ? "\\$" : next;
      i = j + 1;
    }
  }
  return `${key}='${out}'`;
}

/** This state's own credentials key (made once, owner-only) for when neither the environment nor
 * .dev.vars sets CREDENTIALS_KEY, so `npm run worker` processes run against the same state
 * (scripts/worker.mjs reads the same file) encrypt and decrypt alike. */
function stateCredentialsKey() {
  const file = path.join(stateDir, "credentials.key");
  mkdirSync(stateDir, { recursive: true });
  try {
    // "wx": a second `npm start` on the same state racing this one keeps the key made first.
    writeFileSync(file, `${randomBytes(CREDENTIALS_KEY_BYTES).toString("base64")}\n`, { mode: 0o600, flag: "wx" });
  } catch (e) {
    if (e.code !== "EEXIST") throw e;
  }
  return readFileSync(file, "utf8").trim();
}

/** The permissions file's text (iii-permissions.yaml at the root, or $III_PERMISSIONS_PATH). The
 * default file may be absent (the policy worker then uses its defaults); a named one may not. */
function permissionsText() {
  const named = process.env.III_PERMISSIONS_PATH;
  // A relative path is the caller's: npm runs scripts from the root and keeps the caller's folder in INIT_CWD.
  const file = named ? path.resolve(process.env.INIT_CWD ?? process.cwd(), named) : path.join(root, "iii-permissions.yaml");
  if (existsSync(file)) return readFileSync(file, "utf8");
  if (named) {
    console.error(`III_PERMISSIONS_PATH: no file at ${file}`);
    process.exit(2);
  }
  return undefined;
}

const devVarsPath = path.join(root, ".dev.vars");
const devVarsText = existsSync(devVarsPath) ? readFileSync(devVarsPath, "utf8") : "";
// .dev.vars first, the environment after it: later values win.
const settings = { ...parseDotenv(devVarsText) };
for (const k of [...AUTH_VARS, ...RBAC_VARS, ...HARNESS_VARS, ...TELEMETRY_VARS, ...MCP_VARS, ...CONSOLE_VARS])
  if (process.env[k]) settings[k] = process.env[k];
// This run's console code: with AUTH_SECRET, a local page gets a console token only with it (a
// page a tenant's route serves from this same origin has none). Made fresh on every start and
// printed in the console's URL, never on a command line; CONSOLE_CODE in the environment wins
// (the test helper passes its own).
const consoleCode = process.env.CONSOLE_CODE || randomBytes(CONSOLE_CODE_BYTES).toString("base64url");
settings.CONSOLE_CODE = consoleCode;
settings.CREDENTIALS_KEY ||= stateCredentialsKey();
const permissions = permissionsText();
if (permissions !== undefined) settings.III_PERMISSIONS = permissions;

// $III_WORKER_BUNDLE: run that prebuilt bundle on Miniflare instead of `wrangler dev` (the test
// suites' fast start, scripts/worker-bundle.mjs); the vars go in a private JSON file.
const bundleDir = process.env.III_WORKER_BUNDLE;
if (bundleDir && process.env.III_WRANGLER_CONFIG) {
  console.error("III_WORKER_BUNDLE is built from the root's wrangler.toml: it cannot run with III_WRANGLER_CONFIG");
  process.exit(2);
}
const helpers = new Map();
let lines;
try {
  lines = Object.entries(settings).map(([k, v]) => envLines(k, v, helpers));
} catch (e) {
  console.error(e.message);
  process.exit(2);
}
// Helpers first: expansion only sees the lines above the one it expands.
lines = [...helpers.values(), ...lines];
const secretsDir = mkdtempSync(path.join(tmpdir(), "iii-edge-vars-"));
const envFile = path.join(secretsDir, "vars.env");
writeFileSync(envFile, `${lines.join("\n")}\n`, { mode: 0o600 });
chmodSync(envFile, 0o600);
args.push("--env-file", envFile);
const hasAuth = AUTH_VARS.some((k) => settings[k]);
// HTTP-invoked functions (protocol/README.md §9) may call loopback and private addresses — a
// webhook server on 127.0.0.1 during development — when this engine is loopback-only: no
// AUTH_SECRET / AUTH_FUNCTION, so only this machine's clients get in (engine-do/src/auth.ts).
// With auth on (reachable from elsewhere) and deployed (wrangler.toml: "false") every refusal stays.
// An explicit ALLOW_PRIVATE_HTTP_FUNCTIONS (environment, .dev.vars, III_DEV_VARS) wins.
const PRIVATE_HTTP_VAR = "ALLOW_PRIVATE_HTTP_FUNCTIONS";
if (devVars[PRIVATE_HTTP_VAR] === undefined && settings[PRIVATE_HTTP_VAR] === undefined) {
  devVars[PRIVATE_HTTP_VAR] = process.env[PRIVATE_HTTP_VAR] ?? String(!hasAuth);
  args.push("--var", `${PRIVATE_HTTP_VAR}:${devVars[PRIVATE_HTTP_VAR]}`);
}
const cleanup = () => rmSync(secretsDir, { recursive: true, force: true });

let child;
if (bundleDir) {
  const varsFile = path.join(secretsDir, "vars.json");
  writeFileSync(varsFile, JSON.stringify({ ...settings, ...devVars }), { mode: 0o600 });
  child = spawn(process.execPath, [path.join(root, "scripts", "run-bundle.mjs")], {
    cwd: root,
    env: { ...env, PORT: port, III_STATE_DIR: stateDir, III_VARS_FILE: varsFile, III_WORKER_BUNDLE: path.resolve(root, bundleDir) },
    stdio: "inherit",
  });
} else {
  child = spawn(wrangler, args, { cwd: root, env, stdio: "inherit" });
}
// Who runs on this port, for a second `npm start` to name (scripts/start-guard.mjs).
const pidFile = path.join(root, ".wrangler", `engine-${port}.json`);
try {
  mkdirSync(path.dirname(pidFile), { recursive: true });
  writeFileSync(pidFile, JSON.stringify({ pid: process.pid, port: Number(port), started_at: new Date().toISOString() }));
} catch {
  // Only the second start's message loses the pid.
}
const base = `http://127.0.0.1:${port}`;
console.log(`iii-edge engine starting on ${base} (state: ${path.relative(root, stateDir) || "."})`);
console.log(
  hasAuth
    ? "auth: tokens required (mint one with `npm run -s token -- --sub NAME`)"
    : "warning: no AUTH_SECRET set — the engine is open to loopback clients (set AUTH_SECRET to require tokens)",
);
if (SIMULATOR_WARNING) console.warn(SIMULATOR_WARNING);
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => child.kill(sig));
child.on("exit", (code, signal) => {
  cleanup();
  rmSync(pidFile, { force: true });
  process.exit(code ?? (signal ? 1 : 0));
});

// ------------------------------------------------------------------ ready

/** How often /healthz is asked while the engine starts (a cold start takes 3–15 s). */
const READY_POLL_MS = 250;
/** After this long without a healthy answer, say so (once) and keep waiting: a busy machine may
 * need longer, and wrangler prints its own errors. */
const READY_SLOW_MS = 60_000;

async function announceWhenHealthy() {
  const started = Date.now();
  let saidSlow = false;
  while (child.exitCode === null) {
    try {
      const res = await fetch(`${base}/healthz`);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (!saidSlow && Date.now() - started > READY_SLOW_MS) {
      saidSlow = true;
      console.warn(
        `iii-edge: ${base}/healthz has not answered after ${READY_SLOW_MS / 1000} s; still waiting (see wrangler's output above)`,
      );
    }
    await new Promise((r) => setTimeout(r, READY_POLL_MS));
  }
  if (child.exitCode !== null) return;
  const ws = base.replace(/^http/, "ws");
  const lines = [
    `iii-edge engine ready in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    `  workers dial  ${ws}/   (namespace default; another namespace: ${ws}/ns/<name>)`,
    `  console       ${base}/${settings.AUTH_SECRET ? `#code=${consoleCode}   (this run's console code: open this URL)` : ""}`,
    `  health        ${base}/healthz`,
    `  call over HTTP  curl -s ${base}/_iii/invoke -H 'content-type: application/json' -d '{"function_id":"engine::functions::list","payload":{}}'${hasAuth ? ' -H "Authorization: Bearer $TOKEN"' : ""}`,
  ];
  console.log(lines.join("\n"));
  if (SIMULATOR_WARNING) console.warn(SIMULATOR_WARNING);
}
void announceWhenHealthy();
