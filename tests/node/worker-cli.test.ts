// `npm run worker -- <name>` (scripts/worker.mjs): a built-in harness worker as a Node process of
// its own against `npm start`'s engine — here with auth on (III_TOKEN as a Bearer token) and the
// same worker left out of the engine's HARNESS host (HARNESS_DISABLE), as one would run it.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_AUTH_SECRET, token } from "@iii-edge/test-support/auth";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { expectStoppedBySigterm } from "@iii-edge/test-support/npm-exit";
import { until } from "@iii-edge/test-support/wait";

/** The harness workers in the workspace (workers/<name>, package @iii-edge/worker-<name>). */
const WORKERS = [
  "approval-gate",
  "auth-credentials",
  "budget-tracker",
  "cassettes",
  "context-compaction",
  "counter",
  "harness",
  "hook-fanout",
  "mcp",
  "policy",
  "providers",
  "provisioning",
  "session-storage",
  "sub-agents",
  "turn-orchestrator",
];
/** The one run here, and a function id its contract says it registers. */
const NAME = "approval-gate";
const ITS_FUNCTION = "approval::resolve";
const npm = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  spawnSync("npm", ["run", "-s", "worker", "--", ...args], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    encoding: "utf8",
    timeout: 30_000,
  });

describe("npm run worker", () => {
  it("with an unknown name (or none) lists the workers and exits 2", () => {
    for (const args of [["nope"], []]) {
      const r = npm(args);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toContain(`workers: ${WORKERS.join(", ")}`);
      expect(r.stdout).toBe("");
    }
    expect(npm(["nope"]).stderr).toContain('no worker named "nope"');
  });

  describe("against a running engine", () => {
    let engine: EngineServer;
    let child: ChildProcess | undefined;
    let out = "";
    const list = async <T>(function_id: string, bearer: string): Promise<T> => {
      const r = await fetch(`${engine.url}/_iii/invoke`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${bearer}` },
        body: JSON.stringify({ function_id, payload: {} }),
      });
      return ((await r.json()) as { result: T }).result;
    };

    beforeAll(async () => {
      engine = await startEngine({ env: { AUTH_SECRET: TEST_AUTH_SECRET, HARNESS_DISABLE: NAME } });
    });
    afterAll(async () => {
      if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) process.kill(-child.pid, "SIGKILL");
      await engine?.stop();
    });

    it("connects with III_TOKEN, prints one line, registers its functions under its name, and leaves on SIGTERM", async () => {
      child = spawn("npm", ["run", "-s", "worker", "--", NAME], {
        cwd: repoRoot,
        env: { ...process.env, III_URL: `${engine.wsUrl}/`, III_TOKEN: await token(`cli-${NAME}`), III_STATE_DIR: engine.stateDir },
        stdio: ["ignore", "pipe", "pipe"],
        // Its own process group, signalled as a terminal signals its foreground job: npm runs the
        // script under `sh -c` and does not pass a signal sent to npm alone on to it.
        detached: true,
      });
      child.stdout?.on("data", (d) => (out += d));
      child.stderr?.on("data", (d) => (out += d));
      await until(() => out.includes("connected"), "the connection line", 30_000);
      expect(out.trim()).toBe(`worker ${NAME} connected to ${engine.wsUrl}/`);

      const admin = await token("cli-test");
      const worker = await until(
        async () =>
          (
            await list<{ workers: { name: string; function_count: number; pid: number | null }[] }>("engine::workers::list", admin)
          ).workers.find((w) => w.name === NAME),
        "the worker in engine::workers::list",
      );
      const { functions } = await list<{ functions: { function_id: string; worker_name: string }[] }>("engine::functions::list", admin);
      const its = functions.filter((f) => f.worker_name === NAME).map((f) => f.function_id);
      expect(its).toContain(ITS_FUNCTION);
      expect(its).toHaveLength(worker.function_count);
      // The engine's HARNESS host left this worker out, so the ids are this process's alone.
      expect(functions.filter((f) => f.function_id === ITS_FUNCTION)).toEqual([
        {
          function_id: ITS_FUNCTION,
          worker_name: NAME,
          description: expect.any(String),
          metadata: { caller_principal: true, model: "never" },
        },
      ]);

      await expectStoppedBySigterm(child!);
      expect(out).not.toMatch(/shutdown failed/);
      await until(
        async () => !(await list<{ workers: { name: string }[] }>("engine::workers::list", admin)).workers.some((w) => w.name === NAME),
        "the worker gone from the list",
      );
    });
  });
});
