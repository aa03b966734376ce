// Sandbox workers on an engine that wants tokens (AUTH_SECRET): the host holds the engine's secret
// and mints a token per sandbox, limited to its prefix, which the relay presents upstream; the
// guest never sees it. Real engine, host process and TCG microVM. Skipped only where QEMU is missing.
import type { ChildProcess } from "node:child_process";
import { registerWorker } from "iii-sdk";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { bearer, TEST_AUTH_SECRET, token } from "@iii-edge/test-support/auth";
import { freePort, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { qemuMissing, retryingCall, startEngineAndHost, stopHost, testStateDir, waitFor } from "./support.ts";

describe.skipIf(qemuMissing)(`sandbox workers with AUTH_SECRET${qemuMissing ? ` (skipped: ${qemuMissing})` : ""}`, () => {
  let engine: EngineServer;
  let host: ChildProcess;
  let hostLog = () => "";
  let caller: ReturnType<typeof registerWorker>;

  beforeAll(async () => {
    // The engine as startSecureEngine starts it (AUTH_SECRET), beside the host booting its worker VM.
    ({
      engine,
      host,
      log: hostLog,
    } = await startEngineAndHost({
      startOn: (port) => startEngine({ port, env: { AUTH_SECRET: TEST_AUTH_SECRET } }),
      freePort,
      hostArgs: ["--state-dir", testStateDir("token"), "--pool", "0", "--worker-pool", "1"],
      env: { ...process.env, AUTH_SECRET: TEST_AUTH_SECRET, ENGINE_TOKEN: await token("sandbox-host") },
    }));
    expect(await waitFor(() => hostLog().includes("serving sandbox::"), 120_000)).toBe(true);
    expect(hostLog()).toContain("a token per sandbox");
    caller = registerWorker(engine.wsUrl, {
      workerName: "token-caller",
      headers: bearer(await token("caller")),
      otel: { enabled: false },
      enableMetricsReporting: false,
    });
    // Spawn from the warm pool: a cold boot on a busy box can outlast the engine's 30 s call timeout.
    const ready = () =>
      call("sandbox::info", {}).then(
        (info) => info?.worker_pool?.pool_ready === 1,
        () => false,
      );
    expect(await waitFor(ready, 240_000, 250)).toBe(true);
  }, 360_000);
  beforeEach((ctx) => ctx.onTestFailed(() => console.log(`[worker-token] host log (tail):\n${hostLog().slice(-6000)}`)));
  afterAll(async () => {
    await caller?.shutdown().catch(() => {});
    await stopHost(host);
    await engine?.stop();
  });

  const call = (function_id: string, payload: unknown, timeoutMs?: number) =>
    retryingCall(caller, { timeoutMs: 90_000, attempts: 600, retryable: (id) => id.startsWith("sandbox::") })(
      function_id,
      payload,
      timeoutMs,
    );

  test("the sandbox's worker connects with its own token and serves its function; stopping it removes the function", async () => {
    const source = `import { registerWorker } from "iii-sdk";
const iii = registerWorker(process.env.III_URL, { workerName: "tokened", otel: { enabled: false }, enableMetricsReporting: false });
iii.registerFunction("tok::double", async ({ n }) => n * 2);
`;
    const r = await call("sandbox::spawn_worker", { source, register_prefix: "tok::" });
    expect(r).toMatchObject({ auth: "token", functions: [{ function_id: "tok::double" }] });
    expect(await call("tok::double", { n: 21 })).toBe(42);
    const { functions } = await call("engine::functions::list", { prefix: "tok::" });
    expect(functions).toEqual([expect.objectContaining({ function_id: "tok::double", worker_name: "tokened" })]);
    await call("sandbox::stop_worker", { sandbox_id: r.sandbox_id });
    expect((await call("engine::functions::list", { prefix: "tok::" })).functions).toEqual([]);
  });
});
