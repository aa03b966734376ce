// Where a microVM's CPU goes: node workers/sandbox-host/bench/boot-cpu.ts [--runs 3] [--idle-s 10]
// (npm run bench:cpu --workspace @iii-edge/sandbox-host). For a command VM (initrd.gz) and a worker
// VM (the 125 MB worker image, until its runtime's hello), each run boots one VM with the kernel
// options the host uses and one without them (the same-run baseline), and reads QEMU's CPU time
// (utime + stime in /proc/<pid>/stat): to the agent's ready line, per second while idle, and for one
// `echo`. Prints medians and the ratio to the baseline. Needs qemu-system-x86_64 (TCG).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { createMicrovmBackend } from "../src/backends/microvm.ts";
import type { SandboxMachine } from "../src/backends/types.ts";
import { ensureGuest, ensureWorkerGuest } from "../src/guest.ts";

const { values } = parseArgs({ options: { runs: { type: "string" }, "idle-s": { type: "string" } } });
const RUNS = Number(values.runs ?? process.env.BENCH_RUNS ?? 3);
const IDLE_S = Number(values["idle-s"] ?? 10);
const TICKS = 100; // USER_HZ: /proc/<pid>/stat counts in 1/100 s on Linux

const log = (m: string) => process.stderr.write(`${m}\n`);
const { kernel, initrd } = await ensureGuest(undefined, log);
const workerInitrd = (await ensureWorkerGuest(undefined, log)).initrd;
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "sbx-cpu-"));

function cpuSeconds(pid: number): number {
  const f = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const rest = f.slice(f.lastIndexOf(") ") + 2).split(" ");
  return (Number(rest[11]) + Number(rest[12])) / TICKS;
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

interface Sample {
  boot: number;
  bootMs: number;
  idlePerS: number;
  exec: number;
}

async function sample(kind: "command" | "worker", leanBoot: boolean): Promise<Sample> {
  const backend = createMicrovmBackend({
    accel: "tcg",
    kernel,
    initrd: kind === "worker" ? workerInitrd : initrd,
    stateDir,
    enginePort: kind === "worker",
    leanBoot,
  });
  const t0 = Date.now();
  const vm: SandboxMachine = await backend.boot({ memoryMb: kind === "worker" ? 512 : 256, vcpus: 1, diskMb: 64 });
  try {
    const pid = vm.pid as number;
    const bootMs = Date.now() - t0;
    const boot = cpuSeconds(pid);
    await new Promise((r) => setTimeout(r, IDLE_S * 1000));
    const idle = cpuSeconds(pid);
    await vm.exec({ script: "echo hi", timeoutMs: 20_000, outputLimit: 1024 });
    return { boot, bootMs, idlePerS: (idle - boot) / IDLE_S, exec: cpuSeconds(pid) - idle };
  } finally {
    await vm.destroy();
  }
}

process.stderr.write(`${os.availableParallelism()} cores, load ${os.loadavg()[0].toFixed(1)}; ${RUNS} runs, ${IDLE_S} s idle\n`);
const rows: string[] = [];
for (const kind of ["command", "worker"] as const) {
  const got: Record<"lean" | "baseline", Sample[]> = { lean: [], baseline: [] };
  const failed = { lean: 0, baseline: 0 };
  // A boot can miss its 60 s deadline on an overloaded box: count it and go on.
  const take = async (which: "lean" | "baseline") => {
    try {
      const s = await sample(kind, which === "lean");
      got[which].push(s);
      return s.boot.toFixed(2);
    } catch (e) {
      failed[which]++;
      return `failed (${e instanceof Error ? e.message : String(e)})`;
    }
  };
  for (let i = 0; i < RUNS; i++) {
    // Alternate, so that load from elsewhere falls on both alike.
    const base = await take("baseline");
    const lean = await take("lean");
    process.stderr.write(`  ${kind} run ${i + 1}: boot ${base} → ${lean} CPU-s (load ${os.loadavg()[0].toFixed(1)})\n`);
  }
  if (failed.lean + failed.baseline > 0)
    rows.push(`| ${kind} VM | boots failed | ${failed.baseline} of ${RUNS} | ${failed.lean} of ${RUNS} | |`);
  if (got.lean.length === 0 || got.baseline.length === 0) continue;
  const m = (which: "lean" | "baseline", k: keyof Sample) => median(got[which].map((s) => s[k]));
  for (const [label, k, unit, digits] of [
    ["boot to ready", "boot", "CPU-s", 2],
    ["boot wall", "bootMs", "ms", 0],
    ["idle", "idlePerS", "CPU-s/s", 3],
    ["one exec", "exec", "CPU-s", 2],
  ] as const) {
    const base = m("baseline", k);
    const lean = m("lean", k);
    const ratio = base > 0 ? `x${(lean / base).toFixed(2)}` : "-";
    rows.push(`| ${kind} VM | ${label} | ${base.toFixed(digits)} ${unit} | ${lean.toFixed(digits)} ${unit} | ${ratio} |`);
  }
}
fs.rmSync(stateDir, { recursive: true, force: true });
console.log(`\n| VM | what | baseline (no lean options) | host's options | ratio |\n| --- | --- | --- | --- | --- |\n${rows.join("\n")}`);
console.log(`\nmedians of ${RUNS}; load average at the end ${os.loadavg()[0].toFixed(1)} on ${os.availableParallelism()} cores`);
