// Keyed workers from iii-sdk where `npm start` is part of what is tested (docs/keyed-workers.md):
// the Worker-hosted counter of `npm start` called by the unmodified iii-sdk, and the demo keyed
// counter as a process of its own (`npm run worker -- counter`). The conformance suite against the
// counter run as a Node worker is in tests/unit/keyed-worker.test.ts (the engine core in-process).
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { type IIIClient, registerWorker } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { until } from "@iii-edge/test-support/wait";
import { sdkOutcome } from "../keyed/keyed.case.ts";

let engine: EngineServer;
let caller: IIIClient;
const uid = (what: string) => `${what}-${crypto.randomUUID().slice(0, 8)}`;

const call = (function_id: string, payload: unknown) => sdkOutcome(caller, function_id, payload);

beforeAll(async () => {
  engine = await startEngine();
  caller = registerWorker(`${engine.wsUrl}/`, { workerName: "keyed-caller", otel: { enabled: false }, enableMetricsReporting: false });
});
afterAll(async () => {
  await caller?.shutdown();
  await engine?.stop();
});

describe("keyed workers seen from iii-sdk", () => {
  it("the Worker-hosted counter of `npm start` is called like any function, and answers invalid_arguments without its key", async () => {
    const user_id = uid("edge");
    expect(await caller.trigger({ function_id: "counter::add", payload: { user_id, by: 2 } })).toEqual({ user_id, count: 2 });
    expect(await caller.trigger({ function_id: "counter::get", payload: { user_id } })).toEqual({ user_id, count: 2 });
    await expect(caller.trigger({ function_id: "counter::add", payload: { by: 2 } })).rejects.toMatchObject({ code: "invalid_arguments" });
  });
});

describe("npm run worker -- counter", () => {
  const cliPrefix = `clicounter${crypto.randomUUID().slice(0, 8)}`;
  const cliDir = mkdtempSync(path.join(tmpdir(), "iii-keyed-cli-"));
  let child: ChildProcess | undefined;
  const start = () => {
    // Its own process group, signalled as a terminal would (npm runs the script under `sh -c`).
    child = spawn("npm", ["run", "-s", "worker", "--", "counter"], {
      cwd: repoRoot,
      env: { ...process.env, III_URL: `${engine.wsUrl}/`, COUNTER_PREFIX: cliPrefix, III_KEYED_DIR: cliDir },
      stdio: "ignore",
      detached: true,
    });
  };
  const stop = async () => {
    const c = child;
    if (c?.pid === undefined || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((resolve) => c.once("exit", resolve));
    process.kill(-c.pid, "SIGTERM");
    await exited;
  };
  afterAll(async () => {
    await stop();
    rmSync(cliDir, { recursive: true, force: true });
  });

  it("runs the keyed counter as a process of its own, whose counts survive its restart", async () => {
    const user_id = uid("cli");
    start();
    await until(async () => (await call(`${cliPrefix}::add`, { user_id, by: 4 })).error === undefined, "the CLI worker's add", 60_000);
    await stop();
    start();
    const got = await until(async () => (await call(`${cliPrefix}::get`, { user_id })).result, "the restarted CLI worker", 60_000);
    expect(got).toEqual({ user_id, count: 4 });
  });
});
