// Sandbox host benchmark: node workers/sandbox-host/bench/sandbox-bench.ts [--runs 10] [--vms 8] [--backend microvm-tcg|microvm-kvm|process]
// Measures, through the registry (no engine): cold create → first exec result, create from the
// warm pool → first exec, exec round trip on a warm sandbox, and memory per VM (PSS) to estimate
// how many sandboxes this host holds.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import type { BackendKind } from "../src/backends/types.ts";
import { chooseBackend } from "../src/probe.ts";
import { Sandboxes } from "../src/sandboxes.ts";

const { values } = parseArgs({ options: { runs: { type: "string" }, vms: { type: "string" }, backend: { type: "string" } } });
const RUNS = Number(values.runs ?? 10);
const VMS = Number(values.vms ?? 8);
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "sbx-bench-"));
const { backend, reason } = await chooseBackend({ stateDir, force: values.backend as BackendKind | undefined });

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}
const rows: [string, string, string, string][] = [];
function row(what: string, xs: number[]): void {
  rows.push([what, `${pct(xs, 50).toFixed(0)} ms`, `${pct(xs, 99).toFixed(0)} ms`, `${xs.length}`]);
  process.stderr.write(`  ${what}: p50 ${pct(xs, 50).toFixed(0)} ms, p99 ${pct(xs, 99).toFixed(0)} ms\n`);
}
function memAvailableMb(): number {
  return Number(fs.readFileSync("/proc/meminfo", "utf8").match(/^MemAvailable:\s+(\d+)/m)?.[1] ?? 0) / 1024;
}
function pssMb(pid: number): number {
  const m = fs.readFileSync(`/proc/${pid}/smaps_rollup`, "utf8").match(/^Pss:\s+(\d+)/m);
  return Number(m?.[1] ?? 0) / 1024;
}

process.stderr.write(`backend ${backend.kind} (${reason}); ${os.availableParallelism()} cores; ${RUNS} runs\n`);

// 1. Cold: no pool, every create boots.
{
  const reg = new Sandboxes({ backend, poolSize: 0 });
  await reg.start();
  const xs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t = performance.now();
    const { sandbox_id } = await reg.create({});
    await reg.exec({ sandbox_id, command: "echo ok" });
    xs.push(performance.now() - t);
    await reg.destroy(sandbox_id);
  }
  row("cold create → first exec", xs);
  await reg.shutdown();
}

// 2. Warm pool (size 1): create takes a booted VM; wait for the refill between runs.
{
  const reg = new Sandboxes({ backend, poolSize: 1 });
  await reg.start();
  const xs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    await reg.poolReady();
    const t = performance.now();
    const { sandbox_id } = await reg.create({});
    await reg.exec({ sandbox_id, command: "echo ok" });
    xs.push(performance.now() - t);
    await reg.destroy(sandbox_id);
  }
  row("pooled create → first exec", xs);

  // 3. Exec round trips on one warm sandbox.
  await reg.poolReady();
  const { sandbox_id } = await reg.create({});
  await reg.exec({ sandbox_id, command: "true" });
  const ex: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t = performance.now();
    await reg.exec({ sandbox_id, command: "echo ok" });
    ex.push(performance.now() - t);
  }
  row("exec round trip (warm)", ex);
  const fx: number[] = [];
  const data = Buffer.alloc(64 * 1024, 7).toString("base64");
  for (let i = 0; i < RUNS; i++) {
    const t = performance.now();
    await reg.writeFile({ sandbox_id, path: "/tmp/f", content: data, encoding: "base64" });
    await reg.readFile({ sandbox_id, path: "/tmp/f", encoding: "base64" });
    fx.push(performance.now() - t);
  }
  row("write_file + read_file 64 KiB", fx);
  await reg.shutdown();
}

// 4. Capacity: boot VMS sandboxes at once, then measure what each costs.
let capacity = "";
if (backend.kind !== "process" && VMS > 0) {
  const reg = new Sandboxes({ backend, poolSize: 0, maxSandboxes: VMS });
  await reg.start();
  const before = memAvailableMb();
  const t = performance.now();
  const ids = (await Promise.all(Array.from({ length: VMS }, () => reg.create({})))).map((r) => r.sandbox_id);
  const bootAll = performance.now() - t;
  await Promise.all(ids.map((sandbox_id) => reg.exec({ sandbox_id, command: "true" })));
  await new Promise((r) => setTimeout(r, 1000));
  const pss = reg.pids().map(pssMb);
  const perVm = pss.reduce((a, b) => a + b, 0) / pss.length;
  const drop = (before - memAvailableMb()) / VMS;
  const tp = performance.now();
  await Promise.all(ids.map((sandbox_id) => reg.exec({ sandbox_id, command: "echo ok" })));
  const parallelExec = performance.now() - tp;
  const fits = Math.floor(before / Math.max(perVm, drop));
  capacity = [
    `${VMS} VMs booted together in ${(bootAll / 1000).toFixed(1)} s (boot is CPU-bound; ${os.availableParallelism()} cores)`,
    `${VMS} parallel execs: ${parallelExec.toFixed(0)} ms`,
    `memory per idle VM: PSS ${perVm.toFixed(0)} MB, MemAvailable drop ${drop.toFixed(0)} MB`,
    `MemAvailable before: ${before.toFixed(0)} MB → about ${fits} idle sandboxes fit by memory`,
  ].join("\n");
  await reg.shutdown();
}

console.log(`\nbackend: ${backend.kind} (${reason}), ${os.availableParallelism()} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB\n`);
console.log("| measurement | p50 | p99 | runs |\n| --- | --- | --- | --- |");
for (const r of rows) console.log(`| ${r.join(" | ")} |`);
if (capacity) console.log(`\n${capacity}`);
fs.rmSync(stateDir, { recursive: true, force: true });
