#!/usr/bin/env node
// Tracing overhead: routed invoke (caller → engine → iii-sdk worker in its own process →
// engine → caller, as run.mjs measures it) on five bench engines started in one run — TRACING=off,
// TRACING=on as deployed by default (spans batched to D1, at most TRACE_RATE_LIMIT = 100 new
// traces a second recorded), TRACING=on with no rate limit (every call a span), the default with
// OTLP export to a local collector (a loopback HTTP sink that reads and discards each body), and no
// rate limit with export (every call's span exported: what export costs when it has the most to
// do) — at 1 and 100 callers. Targets: tracing on costs ≤ 10 % rt/s; export adds ≤ 5 % more.
//
// This machine's speed drifts by tens of percent within a minute, more than the 10 % to resolve,
// so the configurations are compared in short windows close together: each run restarts the five
// engines with the configurations rotated one slot on (processes of one configuration differ by
// ~6 %, so over the runs the configurations move through the slots), opens the callers of every
// engine once, and measures each concurrency in cycles of one 1 s window per configuration, the
// order rotated cycle by cycle. After each window the engine stores what it holds before the next
// window begins, so a configuration's deferred work (its last batch of spans) is never counted
// against another. The verdicts are medians of the per-cycle ratios (4 runs × 8 cycles = 32), and
// the middle half of those ratios is printed beside them: what one cycle resolves here. (Two
// engines loaded at the same time share the cores so unevenly that their ratio is noisier still:
// 28–250 % at 100 callers; pinning each to its own core with taskset did no better. Both tried
// and dropped.)
// Options (env): BENCH_DURATION_MS (1000), BENCH_WARMUP_MS (250), BENCH_RUNS (4), BENCH_CYCLES (8),
// BENCH_AA=1 (every engine TRACING=off: the bench's own resolution), BENCH_CONCURRENCY ("1,100").
import { spawn } from "node:child_process";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startBenchEngine } from "./bench-engine.mjs";
import { closedLoop, openWs, sleep, wsChannel } from "./callers.ts";
import { fmt, median, pct } from "./stats.ts";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "1,100").split(",").map(Number);
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 1000);
const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? 250);
const RUNS = Number(process.env.BENCH_RUNS ?? 4);
const CYCLES = Number(process.env.BENCH_CYCLES ?? 8);
/** Idle after a window's flush, for the export and retention that follow it. */
const SETTLE_MS = 300;
/** Load on each freshly started engine before a run measures it. */
const WARM_MS = 2_000;
/** The issue's targets. */
const TARGET_TRACING_COST = 0.1;
const TARGET_EXPORT_COST = 0.05;

const children = [];
const stops = [];
process.on("exit", () => children.forEach((c) => c.kill("SIGTERM")));

/** The collector: reads each body and answers 200, counting what arrived. */
async function sink() {
  let bytes = 0;
  let requests = 0;
  const server = http.createServer((req, res) => {
    req.on("data", (c) => (bytes += c.length));
    req.on("end", () => {
      requests++;
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", () => r()));
  return { url: `http://127.0.0.1:${server.address().port}`, bytes: () => bytes, requests: () => requests, close: () => server.close() };
}

/** One call over a fresh socket; its result. */
async function builtin(wsUrl, functionId, data) {
  const ws = await openWs(`${wsUrl}/`);
  try {
    return await new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${functionId}: no answer`)), 10_000);
      ws.on("message", (raw) => {
        const f = JSON.parse(raw.toString());
        if (f.type !== "invocationresult" || f.invocation_id !== "q") return;
        clearTimeout(t);
        if (f.error) reject(new Error(JSON.stringify(f.error)));
        else resolve(f.result);
      });
      ws.send(JSON.stringify({ type: "invokefunction", invocation_id: "q", function_id: functionId, data }));
    });
  } finally {
    ws.close();
  }
}

/** Wait until the engine has stored what it holds (engine::traces::list flushes first) and its
 * background work is done: what one window's configuration deferred stays out of the next. */
async function settle(wsUrl) {
  await builtin(wsUrl, "engine::traces::list", { limit: 1 }).catch(() => undefined);
  await sleep(SETTLE_MS);
}

async function untilCallable(wsUrl) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ok = await openWs(`${wsUrl}/`)
      .then(
        (ws) =>
          new Promise((resolve) => {
            const t = setTimeout(() => (ws.close(), resolve(false)), 3000);
            ws.on("message", (raw) => {
              const f = JSON.parse(raw.toString());
              if (f.type === "invocationresult") {
                clearTimeout(t);
                ws.close();
                resolve(!f.error);
              }
            });
            ws.send(JSON.stringify({ type: "invokefunction", invocation_id: "probe", function_id: "bench::echo", data: {} }));
          }),
      )
      .catch(() => false);
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`bench::echo never became callable on ${wsUrl}`);
    await sleep(200);
  }
}

const callFrame = (i, seq) =>
  `{"type":"invokefunction","invocation_id":"c${i}-${seq}","function_id":"bench::echo","data":{"caller":${i},"seq":${seq}}}`;

/** N sockets kept open across windows (a window then starts at once, with no handshakes in it). */
async function openCallers(wsUrl, n) {
  const sockets = await Promise.all(Array.from({ length: n }, () => openWs(`${wsUrl}/`)));
  const channels = sockets.map(wsChannel);
  await sleep(50);
  return {
    measure: (durationMs = DURATION_MS, warmupMs = WARMUP_MS) =>
      closedLoop(channels, { frame: callFrame, failureLabel: "routed call failed", durationMs, warmupMs }),
    close: () => sockets.forEach((ws) => ws.close()),
  };
}

async function main() {
  const collector = await sink();
  const variants = {
    off: { TRACING: "off" },
    on: { TRACING: "on" },
    unlimited: { TRACING: "on", TRACE_RATE_LIMIT: "0" },
    export: { TRACING: "on", OTEL_EXPORTER_OTLP_ENDPOINT: collector.url },
    "unlimited+export": { TRACING: "on", TRACE_RATE_LIMIT: "0", OTEL_EXPORTER_OTLP_ENDPOINT: collector.url },
  };
  // BENCH_AA=1: all five run TRACING=off, to see what this bench resolves on this machine (an A/A run).
  if (process.env.BENCH_AA === "1") for (const v of Object.keys(variants)) variants[v] = { TRACING: "off" };
  const names = Object.keys(variants);
  const pairs = [
    ["off", "on"],
    ["off", "unlimited"],
    ["on", "export"],
    ["unlimited", "unlimited+export"],
  ];
  console.log(
    `iii-edge trace bench: routed invoke, TRACING off / on (default rate limit) / on, unlimited / on + OTLP export / unlimited + OTLP export; ${RUNS} runs × callers ${CONCURRENCY.join("/")} × ${CYCLES} cycles × ${DURATION_MS} ms (+${WARMUP_MS} ms warm-up), answering worker iii-sdk@0.22.1 in its own process${process.env.BENCH_AA === "1" ? "; A/A: every engine TRACING=off" : ""}`,
  );
  // Five engine processes ("slots"), each on its own state; every run they are restarted with the
  // configurations rotated one slot on, so no configuration keeps the luck of one process (the A/A
  // run showed processes of one configuration ~6 % apart). A slot's D1 keeps what earlier runs
  // stored in it, so the store grows through the bench as it would in use.
  const slots = names.map(() => ({ engine: undefined, worker: undefined, persist: undefined, variant: undefined }));
  stops.push(() => Promise.all(slots.map((s) => s.engine?.stop())));
  const assign = async (run) => {
    await Promise.all(
      slots.map(async (slot, i) => {
        slot.worker?.kill("SIGTERM");
        await slot.engine?.stop();
        slot.variant = names[(i + run) % names.length];
        slot.engine = await startBenchEngine({ secretVars: variants[slot.variant], persist: slot.persist });
        slot.persist = slot.engine.persist;
        slot.worker = spawn(process.execPath, [path.join(here, "answer-worker.mjs"), slot.engine.wsUrl, "sdk"], {
          cwd: root,
          stdio: ["ignore", "ignore", "inherit"],
        });
        children.push(slot.worker);
        await untilCallable(slot.engine.wsUrl);
      }),
    );
    return Object.fromEntries(slots.map((s) => [s.variant, s.engine]));
  };
  let byName;
  const results = {};
  const ratios = {};
  for (let run = 1; run <= RUNS; run++) {
    byName = await assign(run);
    for (const n of CONCURRENCY) {
      const callers = Object.fromEntries(await Promise.all(names.map(async (v) => [v, await openCallers(byName[v].wsUrl, n)])));
      // A fresh process is cold (its JIT, its object's first wake): warm each before it is measured.
      for (const v of names) await callers[v].measure(WARM_MS, 0);
      for (let cycle = 0; cycle < CYCLES; cycle++) {
        const k = (run + cycle) % names.length;
        const rotated = [...names.slice(k), ...names.slice(0, k)];
        const order = cycle % 2 ? rotated.reverse() : rotated;
        const got = {};
        for (const v of order) {
          const r = await callers[v].measure();
          await settle(byName[v].wsUrl);
          got[v] = r;
          ((results[v] ??= {})[n] ??= []).push(r);
          if (r.failures) console.warn(`  ${v}: ${r.failures} calls failed`);
        }
        console.log(
          `  run ${run} cycle ${String(cycle + 1).padStart(2)}  callers=${String(n).padStart(3)}  rt/s: ${order.map((v) => `${v} ${fmt(got[v].rps, 0)}`).join(", ")}`,
        );
        for (const [a, b] of pairs) ((ratios[`${b}/${a}`] ??= {})[n] ??= []).push(got[b].rps / got[a].rps);
      }
      for (const c of Object.values(callers)) c.close();
    }
  }
  const m = (v, n, k) => median(results[v][n].map((r) => r[k]));
  const paired = (b, a, n) => median(ratios[`${b}/${a}`][n]);
  // The middle half of the per-cycle ratios: how far one cycle's pair can be trusted here.
  const spread = (b, a, n) => `${fmt(pct(ratios[`${b}/${a}`][n], 25) * 100)}–${fmt(pct(ratios[`${b}/${a}`][n], 75) * 100)} %`;
  console.log(`\nMedians over ${RUNS} runs × ${CYCLES} cycles (ratios: median of the per-cycle pairs):`);
  console.log(
    "| callers | off rt/s | on rt/s | on, unlimited rt/s | on+export rt/s | unlimited+export rt/s | on/off | unlimited/off | on+export/on | unlimited+export/unlimited | off p99 | on p99 | on+export p99 |",
  );
  console.log("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
  const verdicts = [];
  for (const n of CONCURRENCY) {
    const onOff = paired("on", "off", n);
    const exOn = paired("export", "on", n);
    const unOff = paired("unlimited", "off", n);
    const exUn = paired("unlimited+export", "unlimited", n);
    console.log(
      `| ${n} | ${fmt(m("off", n, "rps"), 0)} | ${fmt(m("on", n, "rps"), 0)} | ${fmt(m("unlimited", n, "rps"), 0)} | ${fmt(m("export", n, "rps"), 0)} | ${fmt(m("unlimited+export", n, "rps"), 0)} | ${fmt(onOff * 100)} % | ${fmt(unOff * 100)} % | ${fmt(exOn * 100)} % | ${fmt(exUn * 100)} % | ${fmt(m("off", n, "p99"), 2)} ms | ${fmt(m("on", n, "p99"), 2)} ms | ${fmt(m("export", n, "p99"), 2)} ms |`,
    );
    verdicts.push(
      `tracing cost at ${n} caller${n > 1 ? "s" : ""}: ${fmt((1 - onOff) * 100)} % rt/s (target ≤ ${TARGET_TRACING_COST * 100} %) ${1 - onOff <= TARGET_TRACING_COST ? "PASS" : "MISS"}  (on/off middle half ${spread("on", "off", n)})`,
    );
    verdicts.push(`  no rate limit, every call a span: ${fmt((1 - unOff) * 100)} % rt/s (middle half ${spread("unlimited", "off", n)})`);
    verdicts.push(
      `export cost at ${n} caller${n > 1 ? "s" : ""}: ${fmt((1 - exOn) * 100)} % rt/s more (target ≤ ${TARGET_EXPORT_COST * 100} %) ${1 - exOn <= TARGET_EXPORT_COST ? "PASS" : "MISS"}  (export/on middle half ${spread("export", "on", n)})`,
    );
    verdicts.push(
      `  every call's span exported: ${fmt((1 - exUn) * 100)} % rt/s more than unlimited alone (middle half ${spread("unlimited+export", "unlimited", n)})`,
    );
  }
  // What the default engine recorded and what its rate limit passed on unsampled, in the last run.
  const counters = await builtin(byName.on.wsUrl, "engine::metrics::list", {}).catch(() => undefined);
  const value = (name) => counters?.metrics?.find((x) => x.name === name)?.value ?? 0;
  const stored = value("iii.telemetry.spans.stored");
  const limited = value("iii.telemetry.traces.rate_limited");
  console.log(
    `\ndefault engine, last run (TRACE_RATE_LIMIT 100/s): ${stored} spans stored, ${limited} traces passed on unsampled by the rate limit (${fmt((100 * limited) / Math.max(1, stored + limited))} % of calls)`,
  );
  console.log(`collector received ${collector.requests()} requests, ${fmt(collector.bytes() / 1e6)} MB`);
  // What the exporting engines did with their spans in the last run: all sent, or dropped where.
  for (const v of ["export", "unlimited+export"]) {
    const got = await builtin(byName[v].wsUrl, "engine::metrics::list", {}).catch(() => undefined);
    const c = (name) => got?.metrics?.find((x) => x.name === name)?.value ?? 0;
    console.log(
      `${v} engine, last run: ${c("iii.telemetry.export.sent")} records exported, ${c("iii.telemetry.export.dropped")} dropped at the full buffer, ${c("iii.telemetry.export.failed")} failed`,
    );
  }
  for (const v of verdicts) console.log(v);
  collector.close();
  children.forEach((c) => c.kill("SIGTERM"));
  await Promise.all(stops.map((s) => s()));
}

main().catch(async (e) => {
  console.error(e);
  children.forEach((c) => c.kill("SIGTERM"));
  await Promise.all(stops.map((s) => s().catch(() => {})));
  process.exit(1);
});
