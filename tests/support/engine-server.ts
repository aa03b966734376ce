// Runs what `npm start` runs (scripts/start.mjs: D1 migrations, then the engine Worker) on a free port
// with its own state directory, for node e2e, interop, browser and benchmark suites. The Worker runs
// from a bundle built once for the whole run (scripts/worker-bundle.mjs: the same workerd and
// bindings, without wrangler dev's 6–10 CPU-seconds a start) when under vitest; `wrangler: true`,
// another wrangler config, or III_TEST_WRANGLER=1 runs `wrangler dev` itself, as `npm start` does.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { isMigrated, migrationsStamp } from "../../scripts/d1-migrations.mjs";
import { ensureBundle } from "../../scripts/worker-bundle.mjs";

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** wrangler.toml's QUEUES, as `npm start` reads it: the text of its `QUEUES = '…'` line (a TOML
 * literal string, so the JSON as written). */
export function configuredQueues(): string {
  const m = /^QUEUES\s*=\s*'(.*)'\s*$/m.exec(readFileSync(path.join(repoRoot, "wrangler.toml"), "utf8"));
  if (!m) throw new Error("wrangler.toml has no QUEUES = '…' line");
  return m[1]!;
}

export interface EngineServer {
  url: string;
  wsUrl: string;
  port: number;
  stateDir: string;
  stop(): Promise<void>;
  restart(): Promise<void>;
  /** What `npm start` printed (stdout and stderr) since it was last (re)started. */
  output(): string;
  /** This engine's console code (CONSOLE_CODE): the console page gets a token with it (`/#code=…`). */
  consoleCode: string;
}

/** How long a cold start may take on a busy 2-core CI box (migrations + workerd boot). */
const START_TIMEOUT_MS = 90_000;

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

async function waitHealthy(url: string, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`engine exited with ${child.exitCode}:\n${output()}`);
    // The port was taken after we probed it: whatever answers there is not this engine.
    if (ADDRESS_IN_USE.test(output())) throw new Error(`port taken:\n${output()}`);
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.ok && !ADDRESS_IN_USE.test(output())) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`engine did not answer /healthz within ${START_TIMEOUT_MS} ms:\n${output()}`);
}

/** `env` is the environment `npm start` runs in (e.g. `AUTH_SECRET`); `vars` are extra Worker vars. */
/** How many fresh ports a start tries when the one it picked was taken meanwhile (another suite
 * picked the same free port between our probe and wrangler's bind). */
const PORT_ATTEMPTS = 4;
const ADDRESS_IN_USE = /EADDRINUSE|[Aa]ddress already in use/;

/**
 * A fresh state dir with its D1 already migrated: a copy of a template migrated once per set of
 * migrations (kept in the temp dir, keyed by their stamp, scripts/d1-migrations.mjs), so each engine
 * a suite starts skips the wrangler launch that applying them costs.
 */
/** PATH with the repository's own tools (wrangler, workerd's node) first, as `npm start` has it. */
const toolsPath = () => `${path.join(repoRoot, "node_modules", ".bin")}${path.delimiter}${process.env.PATH ?? ""}`;

/** The environment a suite runs `npm start` (scripts/start.mjs) under: this process's, plus the port,
 * the state dir, an inspector port of its own (two engines would fight over wrangler's default), the
 * repository's tools on PATH and the suite's Worker bundle; `env` last, so a suite's own settings win. */
export async function launchEnv(o: {
  port: number;
  stateDir: string;
  bundle?: string | undefined;
  env?: Record<string, string>;
}): Promise<NodeJS.ProcessEnv> {
  return {
    ...process.env,
    PORT: String(o.port),
    III_STATE_DIR: o.stateDir,
    III_INSPECTOR_PORT: String(await freePort()),
    PATH: toolsPath(),
    ...(o.bundle ? { III_WORKER_BUNDLE: o.bundle } : {}),
    ...o.env,
  };
}

export function freshStateDir(env: Record<string, string> | undefined): string {
  const dir = mkdtempSync(path.join(tmpdir(), "iii-edge-state-"));
  const config = env?.III_WRANGLER_CONFIG ? path.resolve(repoRoot, env.III_WRANGLER_CONFIG) : path.join(repoRoot, "wrangler.toml");
  const stamp = migrationsStamp(config);
  if (!stamp) return dir;
  const template = path.join(tmpdir(), `iii-edge-d1-template-${stamp.slice(0, 16)}`);
  if (!isMigrated(template, stamp)) {
    const building = mkdtempSync(path.join(tmpdir(), "iii-edge-d1-building-"));
    const r = spawnSync(process.execPath, [path.join(repoRoot, "scripts/start.mjs")], {
      cwd: repoRoot,
      env: {
        ...process.env,
        ...env,
        III_STATE_DIR: building,
        III_MIGRATE_ONLY: "1",
        PATH: toolsPath(),
      },
      stdio: ["ignore", "ignore", "inherit"],
    });
    if (r.status !== 0 || !isMigrated(building, stamp)) {
      rmSync(building, { recursive: true, force: true });
      return dir; // start.mjs migrates it then, and says why it could not
    }
    try {
      renameSync(building, template); // atomic: a suite running alongside finds all or nothing
    } catch {
      rmSync(building, { recursive: true, force: true }); // another one got there first
    }
  }
  if (existsSync(template)) cpSync(template, dir, { recursive: true });
  return dir;
}

/** The prebuilt Worker bundle to run, or undefined when this start runs `wrangler dev`. */
export async function bundleFor(opts: { wrangler?: boolean; env?: Record<string, string> }): Promise<string | undefined> {
  // Outside vitest (the benches, scripts) every start is `npm start`'s own path, as a user runs it.
  if (!process.env.VITEST || opts.wrangler || opts.env?.III_WRANGLER_CONFIG || process.env.III_TEST_WRANGLER === "1") return undefined;
  return ensureBundle();
}

export async function startEngine(
  opts: {
    port?: number;
    stateDir?: string;
    vars?: Record<string, string>;
    env?: Record<string, string>;
    /** Run `wrangler dev` as `npm start` does, not the prebuilt bundle (for what tests wrangler's path). */
    wrangler?: boolean;
  } = {},
): Promise<EngineServer> {
  const bundle = await bundleFor(opts);
  let port = opts.port ?? (await freePort());
  const stateDir = opts.stateDir ?? freshStateDir(opts.env);
  let url = `http://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  // The console code `npm start` would make: chosen here, so a suite can open the console with it.
  const consoleCode = opts.env?.CONSOLE_CODE ?? randomBytes(16).toString("base64url");
  let log = "";

  const launch = async () => {
    log = "";
    const env = await launchEnv({ port, stateDir, bundle, env: { CONSOLE_CODE: consoleCode, ...opts.env } });
    if (opts.vars) env.III_DEV_VARS = JSON.stringify(opts.vars);
    // Its own process group, so stop() takes down wrangler, its node child and workerd together.
    child = spawn(process.execPath, [path.join(repoRoot, "scripts/start.mjs")], {
      cwd: repoRoot,
      env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout?.on("data", (d) => (log += d));
    child.stderr?.on("data", (d) => (log += d));
    await waitHealthy(url, child, () => log);
  };

  const stop = async () => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null || c.pid === undefined) return;
    const exited = new Promise<void>((r) => c.once("exit", () => r()));
    try {
      process.kill(-c.pid, "SIGTERM");
    } catch {
      return;
    }
    const killer = setTimeout(() => {
      try {
        process.kill(-c.pid!, "SIGKILL");
      } catch {
        // gone
      }
    }, 10_000);
    await exited;
    clearTimeout(killer);
    // wrangler's workerd may outlive the parent by a moment; wait until the port is free.
    for (let i = 0; i < 100; i++) {
      const busy = await new Promise<boolean>((r) => {
        const s = net.connect(port, "127.0.0.1");
        s.once("connect", () => (s.destroy(), r(true)));
        s.once("error", () => r(false));
      });
      if (!busy) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  for (let attempt = 1; ; attempt++) {
    try {
      await launch();
      break;
    } catch (err) {
      const taken = ADDRESS_IN_USE.test(log);
      await stop();
      if (!taken || opts.port !== undefined || attempt >= PORT_ATTEMPTS) throw err;
      port = await freePort();
      url = `http://127.0.0.1:${port}`;
    }
  }
  return {
    url,
    wsUrl: `ws://127.0.0.1:${port}`,
    port,
    stateDir,
    stop,
    restart: async () => {
      await stop();
      await launch();
    },
    output: () => log,
    consoleCode,
  };
}
