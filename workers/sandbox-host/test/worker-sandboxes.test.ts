// Sandbox workers end to end: a real engine (`npm start`'s, on a free port), the host (`src/main.ts`)
// as its own process, real TCG microVMs booting the worker image, and an iii-sdk worker process as
// the caller. Skipped only where QEMU is missing.
import type { ChildProcess } from "node:child_process";
import os from "node:os";
import { registerWorker } from "iii-sdk";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { freePort, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { qemuMissing, retryingCall, startEngineAndHost, stopHost, testStateDir, waitFor } from "./support.ts";
/** The requirement: a sandbox worker's functions are in the catalog within a second of its VM being
 * ready. The guest runs on a software CPU that shares this box's cores with everything else, so on
 * an overloaded box (run queue above the core count, as when several suites run at once) the budget
 * stretches by that overload; the figure itself is printed either way. */
const CATALOG_WITHIN_MS = 1_000;
/** Warm worker VMs: the idle and crash case spawn two at once. It runs last: the pool refills
 * after every spawn, and each worker VM costs about 10 CPU-s to boot on the software CPU, so the
 * refills it starts are cut short by the teardown instead of booting VMs no case takes. */
const WORKER_POOL = 2;
const overload = () => Math.max(1, os.loadavg()[0]! / os.availableParallelism());

/** Conditions that ask the host, polled every 50 ms. */
/** The longest a spawn may take here (the host allows 60 s to connect, then 30 s to register). */
const SPAWN_CALL_MS = 120_000;
const until = (cond: () => Promise<boolean>, timeoutMs: number) => waitFor(cond, timeoutMs, 50);

const worker = (body: string) => `import { registerWorker } from "iii-sdk";
const iii = registerWorker(process.env.III_URL, { workerName: "sandboxed", otel: { enabled: false }, enableMetricsReporting: false });
${body}
`;

describe.skipIf(qemuMissing)(`sandbox workers${qemuMissing ? ` (skipped: ${qemuMissing})` : ""}`, () => {
  let engine: EngineServer;
  let host: ChildProcess;
  let hostLog = () => "";
  let caller: ReturnType<typeof registerWorker>;
  const pushes: { at: number; ids: string[] }[] = [];
  let healthy = "";

  beforeAll(async () => {
    // iii-sdk names no deadline on the wire, so the engine's default is the call's: long enough for
    // a spawn whose guest takes a minute to start on a software CPU beside other test files.
    // The host's worker VMs boot while the engine starts.
    ({
      engine,
      host,
      log: hostLog,
    } = await startEngineAndHost({
      startOn: (port) => startEngine({ port, vars: { INVOKE_TIMEOUT_MS: String(SPAWN_CALL_MS) } }),
      freePort,
      hostArgs: ["--state-dir", testStateDir("workers"), "--pool", "0", "--worker-pool", String(WORKER_POOL)],
    }));
    expect(await waitFor(() => hostLog().includes("serving sandbox::"), 120_000)).toBe(true);
    expect(hostLog()).toContain("sandbox workers on");
    caller = registerWorker(engine.wsUrl, {
      workerName: "worker-sandboxes-caller",
      otel: { enabled: false },
      enableMetricsReporting: false,
    });
    caller.registerFunction("wstest::on-functions", async (data: { functions: { function_id: string }[] }) => {
      pushes.push({ at: Date.now(), ids: data.functions.map((f) => f.function_id) });
      return null;
    });
    caller.registerFunction("wstest::secret", async () => "secret");
    caller.registerTrigger({ type: "engine::functions-available", function_id: "wstest::on-functions", config: {} });
    // Spawns take warm worker VMs: wait until they have booted and loaded iii-sdk.
    expect(await until(async () => (await call("sandbox::info", {})).worker_pool?.pool_ready === WORKER_POOL, 150_000)).toBe(true);
  });
  // A failure shows what the host said (boots, relays, refusals, stops).
  beforeEach((ctx) => ctx.onTestFailed(() => console.log(`[worker-sandboxes] host log (tail):\n${hostLog().slice(-6000)}`)));
  afterAll(async () => {
    await caller?.shutdown().catch(() => {});
    await stopHost(host);
    await engine?.stop();
  });

  const call = (function_id: string, payload: unknown, timeoutMs?: number) =>
    retryingCall(caller, { timeoutMs: 90_000, attempts: 150, retryable: (id) => id.startsWith("sandbox::") })(
      function_id,
      payload,
      timeoutMs,
    );
  /** Wait until `n` warm worker VMs are ready. A spawn that has to wait for a boot can outlast the
   * engine's 30 s call timeout on an overloaded box; cold spawns are the benchmark's business. */
  const warm = (n: number) => until(async () => (await call("sandbox::info", {})).worker_pool?.pool_ready >= n, 150_000);
  const catalog = async (prefix: string): Promise<string[]> =>
    ((await call("engine::functions::list", { prefix })).functions as { function_id: string }[]).map((f) => f.function_id);
  const codeOf = (p: Promise<unknown>) =>
    p.then(
      () => "resolved",
      (e: { code?: string; message?: string }) => e.code ?? e.message ?? "error",
    );

  test("spawn → its function is in the catalog at once → an iii-sdk worker calls it → stop → gone", async () => {
    expect(await warm(1)).toBe(true);
    const source = worker(
      `iii.registerFunction("wc::count", async ({ text }) => ({ words: text.trim().split(/\\s+/).length }), { description: "count words" });`,
    );
    const t0 = Date.now();
    const r = await call("sandbox::spawn_worker", { source, register_prefix: "wc::" });
    const returnedAt = Date.now();
    expect(r).toMatchObject({
      sandbox_id: expect.stringMatching(/^sbw_/),
      register_prefix: "wc::",
      functions: [{ function_id: "wc::count", description: "count words" }],
      auth: "open",
    });
    console.log(
      `[worker-sandboxes] spawn_worker ${returnedAt - t0} ms (from_pool ${r.from_pool}, boot ${r.boot_ms} ms, ready ${r.ready_ms} ms, ${JSON.stringify(r.timings)})`,
    );
    // engine::functions-available fired with it within a second of the code reaching the ready VM.
    expect(await waitFor(() => pushes.some((p) => p.ids.includes("wc::count")), 2_000)).toBe(true);
    const inCatalogMs = pushes.find((p) => p.ids.includes("wc::count"))!.at - r.timings.handed_over_at;
    console.log(
      `[worker-sandboxes] functions-available ${inCatalogMs} ms after the code reached the ready VM (load ${os.loadavg()[0]!.toFixed(1)} on ${os.availableParallelism()} cores)`,
    );
    expect(inCatalogMs).toBeLessThan(CATALOG_WITHIN_MS * overload());

    expect(await call("wc::count", { text: "one two  three" })).toEqual({ words: 3 });
    const { sandboxes } = await call("sandbox::list", {});
    expect(sandboxes.find((s: { sandbox_id: string }) => s.sandbox_id === r.sandbox_id)).toMatchObject({
      kind: "worker",
      register_prefix: "wc::",
      functions: [{ function_id: "wc::count" }],
    });

    const n = pushes.length;
    await call("sandbox::stop_worker", { sandbox_id: r.sandbox_id });
    expect(await catalog("wc::")).toEqual([]);
    expect(await waitFor(() => pushes.slice(n).some((p) => !p.ids.includes("wc::count")), 2_000)).toBe(true);
    expect(await codeOf(call("wc::count", { text: "x" }))).toBe("function_not_found");
    expect(await codeOf(call("sandbox::stop_worker", { sandbox_id: r.sandbox_id }))).toBe("sandbox_not_found");
  });

  test("a sandbox worker cannot register outside its prefix nor call what it was not allowed", async () => {
    const source = worker(`
iii.registerFunction("wstest::secret", async () => "stolen");
iii.registerFunction("other::thing", async () => "stolen");
iii.registerFunction("mine::callout", async () => {
  try { return { got: await iii.trigger({ function_id: "wstest::secret", payload: {} }) }; }
  catch (e) { return { code: e.code ?? String(e) }; }
});`);
    expect(await warm(1)).toBe(true);
    const r = await call("sandbox::spawn_worker", { source, register_prefix: "mine::", wait_for: ["mine::callout"] });
    expect(r.functions.map((f: { function_id: string }) => f.function_id)).toEqual(["mine::callout"]);
    expect(await catalog("other::")).toEqual([]);
    // The caller still holds its own function; the sandbox did not take it.
    expect(await call("wstest::secret", {})).toBe("secret");
    expect(await call("mine::callout", {})).toEqual({ code: "forbidden" });
    const { sandboxes } = await call("sandbox::list", {});
    const mine = sandboxes.find((s: { sandbox_id: string }) => s.sandbox_id === r.sandbox_id);
    expect(mine.refused.join("\n")).toContain("other::thing");
    expect(mine.refused.join("\n")).toContain("wstest::secret");
    // Prefixes of live sandboxes are theirs; reserved ones are nobody's.
    expect(await codeOf(call("sandbox::spawn_worker", { source, register_prefix: "mine::sub::" }))).toBe("invalid_argument");
    expect(await codeOf(call("sandbox::spawn_worker", { source, register_prefix: "sandbox::x::" }))).toBe("invalid_argument");
    healthy = r.sandbox_id; // kept running: the flood test checks it is unaffected
  });

  test("a worker flooding the engine with frames is stopped; another sandbox worker is unaffected", async () => {
    // Far more frames than the burst, written straight onto the socket: building each through
    // iii-sdk costs the software-CPU guest so much on a loaded box that it could fall under the
    // relay's rate, and the test would measure the box instead of the relay. The spawn waits for
    // the last one, so a guest cannot look settled after its first thousand. The socket is spoken
    // by hand over node:net (client frames masked with a zero key), which the warm VM's runtime has
    // loaded already: Node's own WebSocket is compiled on first use, and on a software CPU beside
    // other suites that once took past the host's 60 s connect window.
    const FLOOD = 20_000;
    const source = `import net from "node:net";
const url = new URL(process.env.III_URL);
const sock = net.connect(Number(url.port), url.hostname, () => {
  sock.write("GET " + url.pathname + url.search + " HTTP/1.1\\r\\nHost: " + url.host + "\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\nSec-WebSocket-Version: 13\\r\\n\\r\\n");
});
let head = "";
sock.on("data", (d) => {
  if (head.includes("\\r\\n\\r\\n")) return;
  head += d.toString("latin1");
  if (!head.includes("\\r\\n\\r\\n")) return;
  for (let i = 0; i < ${FLOOD}; i++) {
    const p = Buffer.from('{"type":"registerfunction","id":"flood::f' + i + '"}');
    sock.write(Buffer.concat([Buffer.from([0x81, 0x80 | p.length, 0, 0, 0, 0]), p]));
  }
});
sock.on("error", () => {});
`;
    expect(await warm(1)).toBe(true);
    // 120 s rather than the engine's default 30 s: what is judged is the relay's verdict, and a guest
    // on a software CPU beside other test files can take a minute just to start its script (the
    // host allows 60 s to connect, then 30 s to register).
    const err = await call(
      "sandbox::spawn_worker",
      { source, register_prefix: "flood::", wait_for: [`flood::f${FLOOD - 1}`] },
      SPAWN_CALL_MS,
    ).catch((e: Error) => e);
    expect((err as { code?: string }).code).toBe("limit_exceeded");
    expect((err as Error).message).toContain("frame flood");
    expect(await until(async () => (await catalog("flood::")).length === 0, 10_000)).toBe(true);
    expect(healthy).toMatch(/^sbw_/);
    expect(await call("mine::callout", {})).toEqual({ code: "forbidden" });
    await call("sandbox::stop_worker", { sandbox_id: healthy });
  }, 240_000);

  test("an idle worker is stopped and its functions unregister; a crashed one is not restarted", async () => {
    expect(await warm(2)).toBe(true);
    const idle = await call("sandbox::spawn_worker", {
      source: worker(`iii.registerFunction("idle::ping", async () => "pong");`),
      register_prefix: "idle::",
      idle_timeout_s: 2,
    });
    const crash = call("sandbox::spawn_worker", {
      source: worker(
        `iii.registerFunction("crash::f", async () => 1); setTimeout(() => { console.error("boom"); process.exit(3); }, 1500);`,
      ),
      register_prefix: "crash::",
    });
    crash.catch(() => {}); // awaited below; not unhandled if the idle part fails first
    const calledAt = Date.now();
    expect(await call("idle::ping", {})).toBe("pong");
    expect(await until(async () => (await catalog("idle::")).length === 0, 10_000)).toBe(true);
    // Stopped for idleness: not before idle_timeout_s passed since the last invocation.
    expect(Date.now() - calledAt).toBeGreaterThanOrEqual(1_900);
    expect(await codeOf(call("sandbox::stop_worker", { sandbox_id: idle.sandbox_id }))).toBe("sandbox_not_found");

    const c = await crash;
    expect(await until(async () => (await catalog("crash::")).length === 0, 15_000)).toBe(true);
    // Its functions leave with its connection; the exit report that stops the sandbox follows.
    const listed = async () =>
      (await call("sandbox::list", {})).sandboxes.some((s: { sandbox_id: string }) => s.sandbox_id === c.sandbox_id);
    expect(await until(async () => !(await listed()), 15_000)).toBe(true);
    const err = await call("sandbox::stop_worker", { sandbox_id: c.sandbox_id }).catch((e: Error) => e);
    expect((err as { code?: string }).code).toBe("worker_crashed");
    expect((err as Error).message).toContain("boom");
  });
});
