#!/usr/bin/env node
// CPU of one engine start: what every `startEngine` of the test suites pays (scripts/run-bundle.mjs
// runs the prebuilt Worker bundle on Miniflare, which serialises the whole script into workerd's
// config, and workerd then parses it). Measured as the user + system CPU-seconds of run-bundle's
// process and every process under it (workerd) from spawn until /healthz answers 200, read from
// /proc: the CPU the start costs the machine, whatever else is running. Linux only.
//
//   node tests/bench/engine-start-bench.mjs [bundle-dir …]
//
// With no dir it measures the current sources' bundle (scripts/worker-bundle.mjs). With several,
// the starts alternate between them run by run and the table gives each one's median and its ratio
// to the first (the baseline): e.g. a copy of an earlier bundle, then the current one.
// BENCH_RUNS (default 5) starts per bundle.
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ensureBundle, SCRIPT_FILE } from "../../scripts/worker-bundle.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const READY_TIMEOUT_MS = 120_000;
const TICKS = 100; // USER_HZ: /proc/<pid>/stat counts CPU in 1/100 s on Linux

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

/** utime + stime (+ the waited-for children's) of a process, in ticks; 0 once it is gone. */
function cpuTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // Fields after the name start at state (3rd): utime 14th, stime 15th, cutime 16th, cstime 17th.
    return Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  } catch {
    return 0;
  }
}

/** A process and all its live descendants. */
function tree(pid) {
  const parent = new Map();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) for (const [p, pp] of parent) if (pp === out[i]) out.push(p);
  return out;
}

async function healthy(url) {
  try {
    const r = await fetch(url);
    await r.body?.cancel();
    return r.status === 200;
  } catch {
    return false;
  }
}

/** One start of a bundle: CPU-seconds of the process tree until /healthz is 200, and of the
 * processes under run-bundle's own (workerd). */
async function start(bundle) {
  const stateDir = mkdtempSync(path.join(tmpdir(), "iii-start-bench-"));
  const varsFile = path.join(stateDir, "vars.json");
  writeFileSync(varsFile, "{}", { mode: 0o600 });
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(root, "scripts", "run-bundle.mjs")], {
    cwd: root,
    env: { ...process.env, PORT: String(port), III_STATE_DIR: stateDir, III_VARS_FILE: varsFile, III_WORKER_BUNDLE: bundle },
    stdio: ["ignore", "ignore", "inherit"],
    detached: true,
  });
  const exited = new Promise((r) => child.once("exit", r));
  try {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`run-bundle exited with ${child.exitCode}`);
      if (await healthy(`http://127.0.0.1:${port}/healthz`)) break;
      if (Date.now() > deadline) throw new Error("engine not ready in time");
      // Polling is what the suites' startEngine does too; the probe's own cost is in this process.
      await new Promise((r) => setTimeout(r, 50));
    }
    const pids = tree(child.pid);
    const workerd = pids.slice(1).reduce((n, p) => n + cpuTicks(p), 0) / TICKS;
    return { total: pids.reduce((n, p) => n + cpuTicks(p), 0) / TICKS, workerd };
  } finally {
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {
      // already gone
    }
    await exited;
    rmSync(stateDir, { recursive: true, force: true });
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const bundles = process.argv.length > 2 ? process.argv.slice(2).map((d) => path.resolve(d)) : [await ensureBundle()];
const samples = bundles.map(() => []);
for (let run = 0; run < RUNS; run++)
  for (let k = 0; k < bundles.length; k++) {
    // Alternate which goes first, so a burst of other load does not always land on one of them.
    const i = run % 2 === 0 ? k : bundles.length - 1 - k;
    samples[i].push(await start(bundles[i]));
  }

const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
console.log(`engine start, CPU-seconds until /healthz (run-bundle + workerd), ${RUNS} runs each; load average ${load}`);
console.log("| bundle | worker.js | median CPU-s | of it workerd | runs | ratio to first |");
console.log("|---|---|---|---|---|---|");
const base = median(samples[0].map((x) => x.total));
bundles.forEach((b, i) => {
  const mb = (statSync(path.join(b, SCRIPT_FILE)).size / 1e6).toFixed(1);
  const m = median(samples[i].map((x) => x.total));
  const w = median(samples[i].map((x) => x.workerd));
  const runs = samples[i].map((x) => x.total.toFixed(2)).join(" ");
  console.log(`| ${path.relative(root, b) || b} | ${mb} MB | ${m.toFixed(2)} | ${w.toFixed(2)} | ${runs} | ${(m / base).toFixed(2)} |`);
});
