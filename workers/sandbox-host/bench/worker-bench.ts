// Sandbox worker benchmark: node workers/sandbox-host/bench/worker-bench.ts [--runs 5]
// (npm run bench:workers --workspace @iii-edge/sandbox-host). Through a real engine (npm start's, on
// a free port) and the host as its own process, as an agent would use it:
//   - sandbox::spawn_worker → first successful call of the function it registered, cold (a size
//     the warm pool does not hold, so the VM boots) and warm (a pooled VM: booted, iii-sdk loaded);
//   - beside the baseline measured in the same run: sandbox::create → first sandbox::exec, cold and
//     warm, the existing sandbox figures;
//   - memory per idle VM (PSS of its QEMU process) for a worker VM and a command VM.
// Figures are medians (p50) and p99 over the runs, plus the worker/command ratio.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { registerWorker } from "@iii-edge/sdk-edge/node";
import { startEngine } from "@iii-edge/test-support/engine-server";
import { pct } from "../../../tests/bench/stats.ts";

const { values } = parseArgs({ options: { runs: { type: "string" } } });
const RUNS = Number(values.runs ?? process.env.BENCH_RUNS ?? 5);
/** A guest size the pools do not hold: a create or spawn with it boots a fresh VM. */
const COLD_SANDBOX_MB = 320;
const COLD_WORKER_MB = 520;
/** Runs lost to engine reloads before the benchmark gives up (a busy shared checkout reloads often). */
const MAX_LOST_RUNS = 20;

const here = path.dirname(fileURLToPath(import.meta.url));
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "sbw-bench-"));
const engine = await startEngine();
let hostLog = "";
const host = spawn(
  process.execPath,
  [path.join(here, "../src/main.ts"), "--engine", engine.wsUrl, "--state-dir", stateDir, "--pool", "1", "--worker-pool", "1"],
  { stdio: ["ignore", "ignore", "pipe"] },
);
host.stderr?.on("data", (d: Buffer) => {
  hostLog += d.toString();
});
// sdk-edge's client, because it sends its deadline to the engine (timeout_ms): a cold spawn on a
// busy box can take longer than the engine's default 30 s. iii-sdk keeps its timeout local.
const iii = registerWorker(engine.wsUrl, { workerName: "worker-bench" });
// Stopped early (Ctrl-C, a timeout): stop the host and the engine too.
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => {
    host.kill("SIGTERM");
    void engine.stop().finally(() => process.exit(130));
  });
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Reads are retried when they are lost: `wrangler dev` reloads when anyone edits a source file,
 * and a call in flight then times out or is stopped with the connection. */
const READS = new Set(["sandbox::info", "sandbox::list"]);
const lostCall = (code: string | undefined) => /^timeout$/i.test(code ?? "") || code === "invocation_stopped";
// biome-ignore lint/suspicious/noExplicitAny: results read loosely by the bench
async function call(function_id: string, payload: unknown): Promise<any> {
  for (let i = 0; ; i++) {
    try {
      return await iii.trigger({ function_id, payload, timeoutMs: READS.has(function_id) ? 10_000 : 180_000 });
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (i > 600 || !(code === "function_not_found" || (lostCall(code) && READS.has(function_id)))) throw e;
      await sleep(200);
    }
  }
}
async function poolsReady(): Promise<void> {
  for (;;) {
    const info = await call("sandbox::info", {});
    if (info.pool.pool_ready >= 1 && info.worker_pool?.pool_ready >= 1) return;
    await sleep(100);
  }
}

let n = 0;
const source = (prefix: string) => `import { registerWorker } from "iii-sdk";
const iii = registerWorker(process.env.III_URL, { workerName: "bench", otel: { enabled: false }, enableMetricsReporting: false });
iii.registerFunction("${prefix}echo", async (x) => x);
`;

async function workerToFirstCall(memory_mb?: number): Promise<{ ms: number; id: string; fromPool: boolean }> {
  const prefix = `bench${n++}::`;
  const t = performance.now();
  const r = await call("sandbox::spawn_worker", { source: source(prefix), register_prefix: prefix, ...(memory_mb ? { memory_mb } : {}) });
  const echoed = await call(`${prefix}echo`, { ok: 1 });
  if (echoed?.ok !== 1) throw new Error(`unexpected answer ${JSON.stringify(echoed)}`);
  return { ms: performance.now() - t, id: r.sandbox_id, fromPool: r.from_pool };
}
async function sandboxToFirstExec(memory_mb?: number): Promise<{ ms: number; id: string; fromPool: boolean }> {
  const t = performance.now();
  const r = await call("sandbox::create", memory_mb ? { memory_mb } : {});
  const x = await call("sandbox::exec", { sandbox_id: r.sandbox_id, command: "echo ok" });
  if (x.stdout !== "ok\n") throw new Error(`unexpected exec ${JSON.stringify(x)}`);
  return { ms: performance.now() - t, id: r.sandbox_id, fromPool: r.from_pool };
}

function qemuChildren(): { pid: number; worker: boolean }[] {
  return fs
    .readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .flatMap((d) => {
      try {
        const stat = fs.readFileSync(`/proc/${d}/stat`, "utf8");
        if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) !== host.pid) return [];
        const cmd = fs.readFileSync(`/proc/${d}/cmdline`, "utf8");
        return cmd.includes("qemu-system") ? [{ pid: Number(d), worker: cmd.includes("initrd-worker") }] : [];
      } catch {
        return [];
      }
    });
}
const pssMb = (pid: number) => Number(fs.readFileSync(`/proc/${pid}/smaps_rollup`, "utf8").match(/^Pss:\s+(\d+)/m)?.[1] ?? 0) / 1024;

const results: Record<string, number[]> = {
  "cold sandbox::create → first exec": [],
  "warm sandbox::create → first exec": [],
  "cold spawn_worker → first call": [],
  "warm spawn_worker → first call": [],
};
const memory: { worker: number[]; command: number[] } = { worker: [], command: [] };

/** One run: cold and warm, command sandbox and worker, then the idle VMs' memory. */
async function oneRun(i: number): Promise<void> {
  await poolsReady();
  const cs = await sandboxToFirstExec(COLD_SANDBOX_MB);
  await call("sandbox::stop", { sandbox_id: cs.id });
  await poolsReady();
  const ws = await sandboxToFirstExec();
  if (!ws.fromPool) throw new Error("the warm create did not come from the pool");
  await poolsReady();
  const cw = await workerToFirstCall(COLD_WORKER_MB);
  await poolsReady();
  const ww = await workerToFirstCall();
  if (!ww.fromPool) throw new Error("the warm spawn did not come from the pool");
  // Idle memory: both VMs have settled once the pools have refilled.
  await poolsReady();
  await sleep(1000);
  const live = new Set((await call("sandbox::list", {})).sandboxes.map((s: { sandbox_id: string }) => s.sandbox_id));
  if (live.has(ww.id) && live.has(ws.id)) {
    for (const q of qemuChildren()) (q.worker ? memory.worker : memory.command).push(pssMb(q.pid));
  }
  for (const id of [ws.id, cw.id, ww.id]) await call("sandbox::stop", { sandbox_id: id });
  results["cold sandbox::create → first exec"]!.push(cs.ms);
  results["warm sandbox::create → first exec"]!.push(ws.ms);
  results["cold spawn_worker → first call"]!.push(cw.ms);
  results["warm spawn_worker → first call"]!.push(ww.ms);
  process.stderr.write(
    `  run ${i + 1}: sandbox cold ${cs.ms.toFixed(0)} warm ${ws.ms.toFixed(0)}; worker cold ${cw.ms.toFixed(0)} warm ${ww.ms.toFixed(0)} ms\n`,
  );
}
try {
  await poolsReady();
  process.stderr.write(`${os.availableParallelism()} cores, load ${os.loadavg()[0]!.toFixed(1)}; ${RUNS} runs\n`);
  let lost = 0;
  for (let i = 0; i < RUNS; i++) {
    try {
      await oneRun(i);
    } catch (e) {
      // A call in flight when `wrangler dev` reloads (someone saved a source file) never answers:
      // that run is lost, not slow. Clean up what it left and run it again.
      if (!lostCall((e as { code?: string }).code) || ++lost > MAX_LOST_RUNS) throw e;
      process.stderr.write(`  run ${i + 1} lost to an engine reload; again\n`);
      for (const sb of (await call("sandbox::list", {})).sandboxes)
        await call("sandbox::stop", { sandbox_id: sb.sandbox_id }).catch(() => {});
      i--;
    }
  }
  const p = (xs: number[], q: number) => pct(xs, q).toFixed(0);
  console.log(`\n${lost} run(s) lost to engine reloads and run again`);
  console.log(
    `backend: ${hostLog.match(/backend (\S+)/)?.[1] ?? "?"}, ${os.availableParallelism()} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, load ${os.loadavg()[0]!.toFixed(1)}, ${RUNS} runs\n`,
  );
  console.log("| measurement | p50 | p99 |\n| --- | --- | --- |");
  for (const [what, xs] of Object.entries(results)) console.log(`| ${what} | ${p(xs, 50)} ms | ${p(xs, 99)} ms |`);
  const ratio = (a: string, b: string) => (pct(results[a]!, 50) / pct(results[b]!, 50)).toFixed(2);
  console.log(
    `\nworker / command, p50: cold ${ratio("cold spawn_worker → first call", "cold sandbox::create → first exec")}×, warm ${ratio("warm spawn_worker → first call", "warm sandbox::create → first exec")}×`,
  );
  // Every sample holds the idle VMs alive then: the two taken, plus the two refilled pool VMs.
  console.log(
    `memory per idle VM (PSS, median of ${memory.worker.length} / ${memory.command.length} samples): worker ${pct(memory.worker, 50).toFixed(0)} MB, command ${pct(memory.command, 50).toFixed(0)} MB (${(pct(memory.worker, 50) / pct(memory.command, 50)).toFixed(2)}×)`,
  );
} finally {
  await iii.shutdown().catch(() => {});
  const exited = new Promise((r) => host.once("exit", r));
  host.kill("SIGTERM");
  await exited;
  await engine.stop();
  fs.rmSync(stateDir, { recursive: true, force: true });
}
