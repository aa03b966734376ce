#!/usr/bin/env node
// `npm run bench`: routed invoke (caller → engine → worker → engine → caller, the worker in a
// separate process) against a raw Durable Object WebSocket echo, on the same runtime in the same
// run, plus a relay baseline (the same two hops through a Durable Object with no engine logic).
// See README.md in this folder for what is measured and the figures.
//
// Options (env): BENCH_DURATION_MS (3000), BENCH_WARMUP_MS (1000), BENCH_RUNS (3),
// BENCH_CONCURRENCY ("1,10,100"), BENCH_WORKER ("sdk" | "raw"), BENCH_PORT (free port).
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const config = path.join(here, "wrangler.bench.toml");
const wrangler = path.join(root, "node_modules/.bin/wrangler");

const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 3000);
const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? 1000);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "1,10,100").split(",").map(Number);
const WORKER_MODE = process.env.BENCH_WORKER ?? "sdk";
/** Targets from the issue: routed ≥ 50 % of raw-echo round trips/s (1 and 100 callers), p99 ≤ 3× raw at 100. */
const TARGET_RPS_RATIO = 0.5;
const TARGET_P99_RATIO = 3;

const OFFLINE_ENV = {
  ...process.env,
  PATH: `${path.join(root, "node_modules/.bin")}${path.delimiter}${process.env.PATH ?? ""}`,
  WRANGLER_SEND_METRICS: "false",
  WRANGLER_HIDE_BANNER: "true",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  CI: "1",
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// ------------------------------------------------------------------ processes

const children = [];
function cleanup() {
  for (const c of children.splice(0)) {
    try {
      if (c.detached) process.kill(-c.child.pid, "SIGTERM");
      else c.child.kill("SIGTERM");
    } catch {
      // gone
    }
  }
}
process.on("exit", cleanup);
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => (cleanup(), process.exit(130)));

async function startEngine() {
  const port = Number(process.env.BENCH_PORT) || (await freePort());
  const persist = mkdtempSync(path.join(tmpdir(), "iii-bench-"));
  execFileSync(wrangler, ["d1", "migrations", "apply", "DB", "--local", "--persist-to", persist, "-c", config], { cwd: root, env: OFFLINE_ENV, stdio: ["ignore", "ignore", "inherit"] });
  const args = ["dev", "-c", config, "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(await freePort()), "--persist-to", persist, "--show-interactive-dev-session=false", "--log-level", "warn"];
  const child = spawn(wrangler, args, { cwd: root, env: OFFLINE_ENV, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  child.stdout.on("data", (d) => (log += d));
  child.stderr.on("data", (d) => (log += d));
  children.push({ child, detached: true });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited:\n${log}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`engine not up within 90 s:\n${log}`);
    await sleep(200);
  }
  return { port, url, wsUrl: `ws://127.0.0.1:${port}`, persist, log: () => log };
}

function startAnswerWorker(wsUrl, mode = WORKER_MODE) {
  const child = spawn(process.execPath, [path.join(here, "answer-worker.mjs"), wsUrl, mode], { cwd: root, stdio: ["ignore", process.env.BENCH_DEBUG ? "inherit" : "ignore", "inherit"] });
  children.push({ child, detached: false });
  return child;
}

// ------------------------------------------------------------------ clients

function open(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
  });
}

/** One raw iii call on a fresh control socket (used for readiness checks). */
async function callOnce(wsUrl, function_id, data) {
  const ws = await open(wsUrl);
  try {
    return await new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${function_id}: no answer`)), 5000);
      ws.on("message", (raw) => {
        const f = JSON.parse(raw.toString());
        if (f.type === "invocationresult" && f.invocation_id === "probe") {
          clearTimeout(t);
          resolve(f);
        }
      });
      ws.send(JSON.stringify({ type: "invokefunction", invocation_id: "probe", function_id, data }));
    });
  } finally {
    ws.close();
  }
}

/**
 * N callers, each its own WebSocket with one call outstanding (closed loop): send, wait for the
 * answer, send the next. `routed` sends iii invokefunction frames to the engine and waits for the
 * invocationresult; `echo` sends the very same text to EchoBench and waits for it to come back.
 */
async function measure(kind, wsUrl, n) {
  const url = kind === "routed" ? `${wsUrl}/` : `${wsUrl}/_bench/${kind}`;
  const sockets = await Promise.all(Array.from({ length: n }, () => open(url)));
  if (kind === "routed") await sleep(50); // let the workerregistered frames arrive first
  let recording = false;
  let running = true;
  const latencies = [];
  let done = 0;
  let failures = 0;
  const loops = sockets.map((ws, i) => {
    let seq = 0;
    let sentAt = 0;
    const send = () => {
      seq++;
      const frame = `{"type":"invokefunction","invocation_id":"c${i}-${seq}","function_id":"bench::echo","data":{"caller":${i},"seq":${seq}}}`;
      sentAt = performance.now();
      ws.send(frame);
    };
    return new Promise((resolve) => {
      ws.on("message", (raw, isBinary) => {
        if (kind === "routed") {
          const text = isBinary ? "" : raw.toString();
          if (!text.includes('"invocationresult"')) return; // workerregistered
          if (text.includes('"error"')) {
            failures++;
            if (failures === 1) console.warn(`  routed call failed: ${text.slice(0, 300)}`);
          }
        }
        const rtt = performance.now() - sentAt;
        if (recording) {
          latencies.push(rtt);
          done++;
        }
        if (running) send();
        else resolve();
      });
      send();
    });
  });
  await sleep(WARMUP_MS);
  recording = true;
  const t0 = performance.now();
  await sleep(DURATION_MS);
  recording = false;
  const elapsed = performance.now() - t0;
  running = false;
  await Promise.race([Promise.all(loops), sleep(5000)]);
  await Promise.all(sockets.map((ws) => new Promise((r) => (ws.once("close", r), ws.close(), setTimeout(r, 500)))));
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? NaN;
  return { rps: (done / elapsed) * 1000, p50: pct(50), p99: pct(99), count: done, failures };
}

// ------------------------------------------------------------------ main

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : "—");

async function main() {
  console.log(`iii-edge bench: ${RUNS} runs × callers ${CONCURRENCY.join("/")} × ${DURATION_MS} ms (+${WARMUP_MS} ms warm-up), answering worker: ${WORKER_MODE === "sdk" ? "iii-sdk@0.22.1" : "raw ws"} in a separate process`);
  console.log("callers = N WebSocket connections, one call outstanding each (closed loop); same for the raw echo.");
  const engine = await startEngine();
  console.log(`engine (wrangler dev, tests/bench/wrangler.bench.toml) on ${engine.url}`);
  const worker = startAnswerWorker(engine.wsUrl);
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const r = await callOnce(engine.wsUrl, "bench::echo", { ping: 1 });
      if (!r.error) break;
    } catch {
      // not ready
    }
    if (worker.exitCode !== null) throw new Error("answering worker exited");
    if (Date.now() > deadline) throw new Error("bench::echo never became callable");
    await sleep(200);
  }

  // The relay baseline's responder, also in its own process.
  const relay = startAnswerWorker(engine.wsUrl, "relay");
  await sleep(500);
  if (relay.exitCode !== null) throw new Error("relay responder exited");

  const results = {}; // results[kind][n] = [{rps,p50,p99}]
  for (let run = 1; run <= RUNS; run++) {
    for (const n of CONCURRENCY) {
      // Alternate the order so drift (thermal, GC, other load) does not favour one side.
      const order = run % 2 ? ["echo", "relay", "routed"] : ["routed", "relay", "echo"];
      for (const kind of order) {
        const r = await measure(kind, engine.wsUrl, n);
        ((results[kind] ??= {})[n] ??= []).push(r);
        console.log(`  run ${run}  ${kind.padEnd(6)} callers=${String(n).padStart(3)}  ${fmt(r.rps).padStart(6)} rt/s  p50 ${fmt(r.p50, 2).padStart(7)} ms  p99 ${fmt(r.p99, 2).padStart(7)} ms  (${r.count} calls${r.failures ? `, ${r.failures} failed` : ""})`);
      }
    }
  }

  console.log(`\nMedians of ${RUNS} runs:`);
  console.log("| callers | routed rt/s | routed p50 | routed p99 | echo rt/s | echo p50 | echo p99 | routed/echo rt/s | routed/echo p99 | relay rt/s | relay p99 | routed/relay rt/s |");
  console.log("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
  const verdicts = [];
  for (const n of CONCURRENCY) {
    const m = (kind, key) => median(results[kind][n].map((r) => r[key]));
    const rr = m("routed", "rps"), rp50 = m("routed", "p50"), rp99 = m("routed", "p99");
    const er = m("echo", "rps"), ep50 = m("echo", "p50"), ep99 = m("echo", "p99");
    const lr = m("relay", "rps"), lp99 = m("relay", "p99");
    const rpsRatio = rr / er, p99Ratio = rp99 / ep99;
    console.log(`| ${n} | ${fmt(rr)} | ${fmt(rp50, 2)} ms | ${fmt(rp99, 2)} ms | ${fmt(er)} | ${fmt(ep50, 2)} ms | ${fmt(ep99, 2)} ms | ${fmt(rpsRatio * 100)} % | ${fmt(p99Ratio, 2)}× | ${fmt(lr)} | ${fmt(lp99, 2)} ms | ${fmt((rr / lr) * 100)} % |`);
    if (n === 1 || n === 100) verdicts.push(`routed/raw rt/s at ${n} caller${n > 1 ? "s" : ""}: ${fmt(rpsRatio * 100)} % (target ≥ ${TARGET_RPS_RATIO * 100} %) ${rpsRatio >= TARGET_RPS_RATIO ? "PASS" : "MISS"}`);
    if (n === 100) verdicts.push(`routed p99 / raw p99 at 100 callers: ${fmt(p99Ratio, 2)}× (target ≤ ${TARGET_P99_RATIO}×) ${p99Ratio <= TARGET_P99_RATIO ? "PASS" : "MISS"}`);
  }
  console.log("");
  for (const v of verdicts) console.log(v);
  if (process.env.BENCH_DEBUG) console.log(engine.log());
  worker.kill("SIGTERM");
  relay.kill("SIGTERM");
  cleanup();
  await sleep(300);
  rmSync(engine.persist, { recursive: true, force: true });
}

main().catch((e) => {
  console.error(e);
  cleanup();
  process.exit(1);
});
