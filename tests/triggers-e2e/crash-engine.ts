// `npm start` (scripts/start.mjs) in its own process group, on a fixed port and state directory, so
// a test can do to it what a user's `kill -9` does: SIGKILL to start.mjs, the Worker's runner and workerd at
// once — no shutdown handler runs, nothing is flushed — and then start it again on the same state.
import { spawn, type ChildProcess } from "node:child_process";
import { rmSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { bundleFor, freePort, freshStateDir, launchEnv, repoRoot } from "@iii-edge/test-support/engine-server";

/** A cold start on a busy 2-core box (migrations + workerd boot), as engine-server.ts allows. */
const START_TIMEOUT_MS = 90_000;
/** How long the port may stay busy after the kill (workerd's sockets close with the process). */
const PORT_FREE_TIMEOUT_MS = 10_000;

export interface CrashableEngine {
  url: string;
  wsUrl: string;
  stateDir: string;
  /** Start `npm start`; resolves when /healthz answers 200. */
  start(): Promise<void>;
  /** SIGKILL to the whole process group; resolves once the port is free again. */
  kill9(): Promise<void>;
  /** Graceful stop (SIGTERM) and the state directory removed, for afterAll. */
  stop(): Promise<void>;
  /** What this run printed (stdout and stderr). */
  output(): string;
}

async function portBusy(port: number): Promise<boolean> {
  return new Promise((r) => {
    const s = net.connect(port, "127.0.0.1");
    s.once("connect", () => (s.destroy(), r(true)));
    s.once("error", () => r(false));
  });
}

export async function crashableEngine(env: Record<string, string> = {}): Promise<CrashableEngine> {
  const port = await freePort();
  // Migrated already and run from the suite's Worker bundle, as startEngine's engines are.
  const stateDir = freshStateDir(env);
  const bundle = await bundleFor({ env });
  const url = `http://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  let log = "";

  const waitExit = async (c: ChildProcess) => {
    if (c.exitCode === null && c.signalCode === null) await new Promise<void>((r) => c.once("exit", () => r()));
    const end = Date.now() + PORT_FREE_TIMEOUT_MS;
    while ((await portBusy(port)) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  };
  const signal = async (sig: NodeJS.Signals) => {
    const c = child;
    child = undefined;
    if (!c || c.pid === undefined || c.exitCode !== null) return;
    try {
      process.kill(-c.pid, sig);
    } catch {
      return;
    }
    await waitExit(c);
  };

  return {
    url,
    wsUrl: `ws://127.0.0.1:${port}`,
    stateDir,
    output: () => log,
    async start() {
      log = "";
      const c = spawn(process.execPath, [path.join(repoRoot, "scripts/start.mjs")], {
        cwd: repoRoot,
        env: await launchEnv({ port, stateDir, bundle, env }),
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
      });
      child = c;
      c.stdout?.on("data", (d) => (log += d));
      c.stderr?.on("data", (d) => (log += d));
      const end = Date.now() + START_TIMEOUT_MS;
      for (;;) {
        if (c.exitCode !== null) throw new Error(`npm start exited with ${c.exitCode}:\n${log}`);
        try {
          if ((await fetch(`${url}/healthz`)).ok) return;
        } catch {
          // not up yet
        }
        if (Date.now() > end) throw new Error(`npm start did not become healthy within ${START_TIMEOUT_MS} ms:\n${log}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    kill9: () => signal("SIGKILL"),
    async stop() {
      await signal("SIGTERM");
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}
