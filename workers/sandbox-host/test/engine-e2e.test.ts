// End to end through a running engine: starts `src/main.ts` against the engine and drives it
// with iii-sdk as an agent harness would. The engine is `npm start`'s (tests/support/engine-server)
// on a free port, or the one at ENGINE_URL when that is set.
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import { registerWorker } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { readChannel } from "@iii-edge/sdk-edge/channels";
import { freePort, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { alive, hostMain, retryingCall, startEngineAndHost, stopHost, testStateDir, waitFor } from "./support.ts";

let ENGINE_URL = process.env.ENGINE_URL;
let engine: EngineServer | undefined;
const skip = false;

function childrenOf(ppid: number): number[] {
  return fs
    .readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        const stat = fs.readFileSync(`/proc/${d}/stat`, "utf8");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === ppid;
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe.skipIf(skip)(`sandbox host through the engine${skip ? ` (skipped: ${skip})` : ""}`, () => {
  let host: ChildProcess;
  let harness: ReturnType<typeof registerWorker>;
  let hostLog = () => "";

  beforeAll(async () => {
    // Two warm VMs: each case creates one, and the pool refills while the cases run and while the
    // engine restarts, so creates rarely wait for a boot.
    const hostArgs = ["--state-dir", testStateDir("e2e"), "--pool", "2"];
    if (ENGINE_URL) {
      let log = "";
      host = spawn(process.execPath, [hostMain, "--engine", ENGINE_URL, ...hostArgs], { stdio: ["ignore", "ignore", "pipe"] });
      host.stderr?.on("data", (d: Buffer) => {
        log += d.toString();
      });
      hostLog = () => log;
    } else {
      // The host's pool boots while the engine starts.
      ({ engine, host, log: hostLog } = await startEngineAndHost({ startOn: (port) => startEngine({ port }), freePort, hostArgs }));
      ENGINE_URL = engine.wsUrl;
    }
    expect(await waitFor(() => hostLog().includes("serving sandbox::"), 120_000)).toBe(true);
    harness = registerWorker(ENGINE_URL!, { workerName: "sandbox-e2e-harness", otel: { enabled: false } });
  });
  afterAll(async () => {
    await harness?.shutdown();
    await stopHost(host);
    await engine?.stop();
  });

  // The host registers asynchronously after connecting: retry briefly on function_not_found.
  const call = (function_id: string, payload: unknown, timeoutMs?: number) =>
    retryingCall(harness, { timeoutMs: 60_000, attempts: 150 })(function_id, payload, timeoutMs);

  test("create → exec → files → destroy through the engine", async () => {
    const info = await call("sandbox::info", {});
    expect(["microvm-kvm", "microvm-tcg", "process"]).toContain(info.backend);
    // The backend is also in the worker's engine::workers::register metadata.
    const { workers } = await call("engine::workers::list", {});
    expect(workers.find((w: { metadata?: { backend?: string } }) => w.metadata?.backend)?.metadata?.backend).toBe(info.backend);
    const { sandbox_id } = await call("sandbox::create", {});
    const r = await call("sandbox::exec", { sandbox_id, command: "echo hello; exit 2" });
    expect(r).toMatchObject({ exit_code: 2, stdout: "hello\n", timed_out: false });
    await call("sandbox::write_file", { sandbox_id, path: "f.txt", content: "x" });
    expect((await call("sandbox::read_file", { sandbox_id, path: "f.txt" })).content).toBe("x");
    expect(await call("sandbox::destroy", { sandbox_id })).toMatchObject({ destroyed: true });
    const err = await call("sandbox::exec", { sandbox_id, command: "true" }).catch((e: Error) => e);
    expect(String((err as Error).message ?? JSON.stringify(err))).toContain("sandbox_not_found");
  });

  test("a long command streams its output through a channel while it runs", async () => {
    const { sandbox_id } = await call("sandbox::create", {});
    const { writer, reader } = await call("engine::channels::create", {});
    const chunks: { stream: string; data: string; seq: number; at: number }[] = [];
    const reading = (async () => {
      for await (const item of readChannel(ENGINE_URL!, reader)) {
        chunks.push({ ...JSON.parse(String(item)), at: Date.now() });
        if (
          chunks
            .map((c) => c.data)
            .join("")
            .includes("3\n")
        )
          return;
      }
    })();
    const r = await call("sandbox::exec", { sandbox_id, command: "for i in 1 2 3; do echo $i; sleep 0.4; done", output_channel: writer });
    const finished = Date.now();
    await reading;
    expect(r).toMatchObject({ exit_code: 0, stdout: "1\n2\n3\n" });
    expect(chunks.map((c) => c.data).join("")).toBe("1\n2\n3\n");
    expect(chunks.every((c, i) => c.stream === "stdout" && c.seq === i)).toBe(true);
    // Streamed, not delivered at the end: the first line arrived while the command still ran.
    expect(finished - chunks[0]!.at).toBeGreaterThan(500);
    await call("sandbox::destroy", { sandbox_id });
  });

  test.skipIf(!!process.env.ENGINE_URL)("after an engine restart the host reconnects and re-registers by itself", async () => {
    await harness.shutdown();
    await engine!.restart();
    harness = registerWorker(ENGINE_URL!, { workerName: "sandbox-e2e-harness", otel: { enabled: false } });
    // `call` retries function_not_found while the host is still reconnecting (backoff ≤ a few s).
    const { sandbox_id } = await call("sandbox::create", {});
    const r = await call("sandbox::exec", { sandbox_id, command: "echo back" });
    expect(r).toMatchObject({ exit_code: 0, stdout: "back\n" });
    await call("sandbox::destroy", { sandbox_id });
  });

  test("SIGTERM on the host stops every VM", async () => {
    const { sandbox_id } = await call("sandbox::create", {});
    expect(sandbox_id).toMatch(/^sbx_/);
    // QEMU runs as a direct child of the host (setpriv execs it).
    const pids = childrenOf(host.pid!);
    expect(pids.length).toBeGreaterThanOrEqual(1); // the sandbox (and the warm pool VM, once refilled)
    const exited = new Promise((r) => host.once("exit", r));
    host.kill("SIGTERM");
    await exited;
    expect(await waitFor(() => !pids.some(alive), 10_000)).toBe(true);
  });
});
