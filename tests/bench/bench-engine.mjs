// The benchmarks' engine: wrangler dev on wrangler.bench.toml — the engine Worker as `npm start`
// runs it plus the bench's own baselines (bench-worker.ts: EchoBench at /_bench/*, the plain Worker
// route /_iii/bench/plain) — on a free port with its own state. Used by run.mjs and
// triggers-bench.mjs; every engine started is stopped when the process exits.
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { isMigrated, markMigrated, migrationsStamp } from "../../scripts/d1-migrations.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const config = path.join(here, "wrangler.bench.toml");
const wrangler = path.join(root, "node_modules/.bin/wrangler");
/** How long a cold start may take on a busy 2-core box (migrations + workerd boot). */
const START_TIMEOUT_MS = 90_000;

const OFFLINE_ENV = {
  ...process.env,
  PATH: `${path.join(root, "node_modules/.bin")}${path.delimiter}${process.env.PATH ?? ""}`,
  WRANGLER_SEND_METRICS: "false",
  WRANGLER_HIDE_BANNER: "true",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  // As npm start runs it (scripts/start.mjs): wrangler dev's local trace collector off, which
  // otherwise records every WebSocket message as an event and costs more than the engine does.
  X_LOCAL_OBSERVABILITY: process.env.X_LOCAL_OBSERVABILITY ?? "false",
  CI: "1",
};

const running = new Set();
const kill = (child) => {
  try {
    process.kill(-child.pid, "SIGTERM"); // its own process group: wrangler, its node child and workerd
  } catch {
    // gone
  }
};
process.on("exit", () => {
  for (const child of running) kill(child);
});

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Start one. `secretVars` (AUTH_SECRET, AUTH_FUNCTION) reach the Worker as scripts/start.mjs passes
 * them: through a private env file (mode 0600, in the state directory), never on the command line.
 */
export async function startBenchEngine({ port: wantPort, secretVars, persist: reuse } = {}) {
  const port = wantPort || (await freePort());
  // `persist`: start on the state an earlier engine left (its D1 already migrated).
  const persist = reuse ?? mkdtempSync(path.join(tmpdir(), "iii-bench-"));
  const stamp = migrationsStamp(config);
  if (!isMigrated(persist, stamp)) {
    execFileSync(wrangler, ["d1", "migrations", "apply", "DB", "--local", "--persist-to", persist, "-c", config], {
      cwd: root,
      env: OFFLINE_ENV,
      stdio: ["ignore", "ignore", "inherit"],
    });
    markMigrated(persist, stamp);
  }
  const inspectorPort = await freePort();
  const args = [
    "dev",
    "-c",
    config,
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    "--inspector-port",
    String(inspectorPort),
    "--persist-to",
    persist,
    "--show-interactive-dev-session=false",
    "--log-level",
    "warn",
  ];
  if (secretVars) {
    const file = path.join(persist, "vars.env");
    writeFileSync(
      file,
      Object.entries(secretVars)
        .map(([k, v]) => `${k}=${JSON.stringify(v)}\n`)
        .join(""),
      { mode: 0o600 },
    );
    chmodSync(file, 0o600);
    args.push("--env-file", file);
  }
  const child = spawn(wrangler, args, { cwd: root, env: OFFLINE_ENV, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  running.add(child);
  child.once("exit", () => running.delete(child));
  let log = "";
  child.stdout.on("data", (d) => (log += d));
  child.stderr.on("data", (d) => (log += d));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited:\n${log}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`engine not up within ${START_TIMEOUT_MS / 1000} s:\n${log}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const stop = async () => {
    if (child.exitCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    kill(child);
    const hard = setTimeout(() => {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // gone
      }
    }, 10_000);
    await exited;
    clearTimeout(hard);
  };
  // inspectorPort: wrangler's inspector proxy (CDP), for a CPU profile of the Worker (flood-bench.ts).
  return { port, url, wsUrl: `ws://127.0.0.1:${port}`, inspectorPort, persist, child, log: () => log, stop };
}
