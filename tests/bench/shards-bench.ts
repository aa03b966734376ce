#!/usr/bin/env node
// Connection shards (engine-do/src/shards/, docs/scaling.md): aggregate routed throughput of one
// namespace with CONNECTION_SHARDS = 1 (today's engine: one object holds every socket — the
// baseline), 2 and 4: three engines as `npm start` runs them, side by side in one run, each serving the same load:
// ANSWERERS answering sockets (one separate `node` process, raw wire protocol), each registering
// its own `bench::echo-<k>`, and N closed-loop caller sockets in this process, caller i calling
// `bench::echo-<i mod ANSWERERS>`. With shards on, the front door spreads all of them round-robin,
// so most calls cross shards: the first call of a caller's shard to a function goes through the
// catalog object, later ones shard → shard directly (engine-do/src/shards/direct-calls.ts).
//
// Options (env): BENCH_DURATION_MS (3000), BENCH_WARMUP_MS (1000), BENCH_RUNS (3),
// BENCH_SHARD_CALLERS ("4,40"), BENCH_SHARD_COUNTS ("1,2,4"; the first is the baseline).
// Internal: `node shards-bench.ts answer <ws url> <count>` is the answering process.
import { spawn, type ChildProcess } from "node:child_process";
import { rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { closedLoop, RUNS, sleep } from "./callers.ts";
import { fmt, median } from "./stats.ts";

/** Answering sockets per engine: one per shard at 4 shards, so every shard holds an answerer. */
const ANSWERERS = 4;
const CALLERS = (process.env.BENCH_SHARD_CALLERS ?? "4,40").split(",").map(Number);
const SHARD_COUNTS = (process.env.BENCH_SHARD_COUNTS ?? "1,2,4").split(",").map(Number);
/** How long an engine's answerers may take to be callable after they connect. */
const READY_TIMEOUT_MS = 30_000;

/** Node's own WebSocket (undici), on both sides of every measurement. */
function openSocket(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.addEventListener("open", () => resolve(ws), { once: true });
    ws.addEventListener("error", () => reject(new Error(`could not open ${url}`)), { once: true });
  });
}

const onText = (ws: WebSocket, fn: (text: string) => void) =>
  ws.addEventListener("message", (ev) => {
    if (typeof ev.data === "string") fn(ev.data);
  });

function closeSocket(ws: WebSocket): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, 500);
    ws.addEventListener("close", () => (clearTimeout(t), resolve()), { once: true });
    ws.close();
  });
}

// ------------------------------------------------------------------ the answering process

async function answer(url: string, count: number): Promise<void> {
  for (let k = 0; k < count; k++) {
    const ws = await openSocket(url);
    ws.send(JSON.stringify({ type: "registerfunction", id: `bench::echo-${k}` }));
    onText(ws, (text) => {
      const f = JSON.parse(text);
      if (f.type !== "invokefunction" || !f.invocation_id) return;
      ws.send(JSON.stringify({ type: "invocationresult", invocation_id: f.invocation_id, function_id: f.function_id, result: f.data }));
    });
    // A dropped socket (wrangler dev reloads the Worker when a source file changes) ends the bench.
    ws.addEventListener("close", () => process.exit(3));
  }
  process.on("SIGTERM", () => process.exit(0));
}

// ------------------------------------------------------------------ measuring

/** One call on a fresh socket; the answer frame (readiness checks). */
async function callOnce(wsUrl: string, functionId: string): Promise<{ error?: { code: string } }> {
  const ws = await openSocket(`${wsUrl}/`);
  try {
    return await new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${functionId}: no answer`)), 5000);
      onText(ws, (text) => {
        const f = JSON.parse(text);
        if (f.type === "invocationresult" && f.invocation_id === "probe") {
          clearTimeout(t);
          resolve(f);
        }
      });
      ws.send(JSON.stringify({ type: "invokefunction", invocation_id: "probe", function_id: functionId, data: {} }));
    });
  } finally {
    await closeSocket(ws);
  }
}

async function untilCallable(wsUrl: string, answerer: ChildProcess): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (let k = 0; k < ANSWERERS; k++) {
    for (;;) {
      if (answerer.exitCode !== null) throw new Error("the answering process exited");
      const r = await callOnce(wsUrl, `bench::echo-${k}`).catch(() => ({ error: { code: "no answer" } }));
      if (!r.error) break;
      if (Date.now() > deadline) throw new Error(`bench::echo-${k} not callable on ${wsUrl}: ${r.error.code}`);
      await sleep(100);
    }
  }
}

interface Run {
  rps: number;
  p50: number;
  p99: number;
  failures: number;
}

/** `n` closed-loop callers (one call outstanding on each socket) for DURATION_MS after WARMUP_MS. */
async function measure(wsUrl: string, n: number): Promise<Run> {
  const sockets = await Promise.all(Array.from({ length: n }, () => openSocket(`${wsUrl}/`)));
  await sleep(50); // the workerregistered frames first
  const { rps, p50, p99, failures } = await closedLoop(
    sockets.map((ws) => ({ send: (text: string) => ws.send(text), onText: (fn: (text: string) => void) => onText(ws, fn) })),
    {
      frame: (i, seq) =>
        `{"type":"invokefunction","invocation_id":"c${i}-${seq}","function_id":"bench::echo-${i % ANSWERERS}","data":{"caller":${i},"seq":${seq}}}`,
      failureLabel: "call failed",
    },
  );
  await Promise.all(sockets.map(closeSocket));
  return { rps, p50, p99, failures };
}

// ------------------------------------------------------------------ main

async function main(): Promise<void> {
  const self = fileURLToPath(import.meta.url);
  const children: ChildProcess[] = [];
  // The engine as `npm start` runs it (tests/support/engine-server.ts), each with its own port and state.
  const engines: EngineServer[] = await Promise.all(SHARD_COUNTS.map((s) => startEngine({ vars: { CONNECTION_SHARDS: String(s) } })));
  try {
    for (const [i, e] of engines.entries()) {
      const health = (await (await fetch(`${e.url}/healthz`)).json()) as { engine: { shards?: Record<string, number> } };
      const shards = health.engine.shards ? Object.keys(health.engine.shards).length : 1;
      if (shards !== SHARD_COUNTS[i]) throw new Error(`engine ${e.url} has ${shards} shards, not ${SHARD_COUNTS[i]}`);
      const child = spawn(process.execPath, [self, "answer", e.wsUrl, String(ANSWERERS)], { stdio: ["ignore", "inherit", "inherit"] });
      children.push(child);
      await untilCallable(e.wsUrl, child);
    }
    console.log(
      `connection shards: ${SHARD_COUNTS.join(", ")} (bench engines ${engines.map((e) => e.url).join(", ")}); ${ANSWERERS} answering sockets per engine in one process, callers in this one`,
    );
    const results: Run[][][] = SHARD_COUNTS.map(() => CALLERS.map(() => []));
    for (let run = 1; run <= RUNS; run++) {
      for (const [ci, n] of CALLERS.entries()) {
        // Alternate the order run by run so drift does not favour one configuration.
        const order = run % 2 ? [...SHARD_COUNTS.keys()] : [...SHARD_COUNTS.keys()].reverse();
        for (const si of order) {
          const r = await measure(engines[si]!.wsUrl, n);
          if (children[si]!.exitCode !== null)
            throw new Error(
              `the answering sockets of the ${SHARD_COUNTS[si]}-shard engine dropped (did wrangler dev reload? run on a tree nobody is editing, tests/bench/README.md)`,
            );
          results[si]![ci]!.push(r);
          console.log(
            `  run ${run}  ${SHARD_COUNTS[si]} shard${SHARD_COUNTS[si] === 1 ? " " : "s"}  ${String(n).padStart(3)} callers  ${fmt(r.rps, 0).padStart(6)} rt/s  p50 ${fmt(r.p50, 2).padStart(6)} ms  p99 ${fmt(r.p99, 2).padStart(6)} ms${r.failures ? `  ${r.failures} failed` : ""}`,
          );
        }
      }
    }
    console.log(
      `\nAggregate routed throughput, one namespace, medians of ${RUNS} runs (ratios against ${SHARD_COUNTS[0]} shard in the same run; per-run ratios paired by run):`,
    );
    console.log("| callers | shards | rt/s | p50 | p99 | rt/s vs 1 shard | per-run |");
    console.log("|--:|--:|--:|--:|--:|--:|--:|");
    for (const [ci, n] of CALLERS.entries()) {
      const base = results[0]![ci]!;
      for (const [si, s] of SHARD_COUNTS.entries()) {
        const rs = results[si]![ci]!;
        const rps = median(rs.map((r) => r.rps));
        const paired = rs.map((r, i) => r.rps / base[i]!.rps);
        console.log(
          `| ${n} | ${s} | ${fmt(rps, 0)} | ${fmt(median(rs.map((r) => r.p50)), 2)} ms | ${fmt(median(rs.map((r) => r.p99)), 2)} ms | ${si === 0 ? "1.00×" : `${fmt(median(paired), 2)}×`} | ${si === 0 ? "—" : paired.map((x) => fmt(x, 2)).join(" / ")} |`,
        );
      }
    }
    console.log(
      "(locally every object runs in the one workerd process of wrangler dev, on one JavaScript thread: shards cannot add CPU here, only the DO RPC a cross-shard call adds — one round trip shard → shard once the caller's shard knows the route, four one-way hops through the catalog before — while the second core runs the callers and answerers. docs/scaling.md says what sharding buys where each object has its own thread.)",
    );
  } catch (e) {
    // What the engines logged (warnings: an unreachable shard, a full backlog) says why a run failed.
    for (const [i, en] of engines.entries())
      console.error(`--- ${SHARD_COUNTS[i]}-shard engine log (last lines):\n${en.output().split("\n").slice(-15).join("\n")}`);
    throw e;
  } finally {
    for (const c of children) c.kill("SIGTERM");
    await Promise.all(engines.map((e) => e.stop()));
    for (const e of engines) rmSync(e.stateDir, { recursive: true, force: true });
  }
}

if (process.argv[2] === "answer") {
  void answer(process.argv[3]!, Number(process.argv[4]));
} else {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
