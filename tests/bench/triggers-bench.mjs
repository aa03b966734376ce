#!/usr/bin/env node
// Triggers and delivery, measured against the bench engine (bench-engine.mjs: the engine `npm start`
// runs, with its queues, plus the bench's baselines, bench-worker.ts):
//  - enqueue → handler throughput and p50/p99 latency, durable backend (queue `jobs`) and Cloudflare
//    Queues backend (queue `default`), with an iii-sdk worker as the handler;
//  - http-trigger requests/s versus the plain Worker route `/_iii/bench/plain` answering the same
//    JSON without the engine object, in the same run.
// Each measurement runs RUNS times (interleaved); medians are printed, with ratios. Usage:
//   node tests/bench/triggers-bench.mjs [--runs 3] [--messages 1000] [--cf-messages 300] [--seconds 5] [--connections 16]
import { registerWorker, TriggerAction } from "iii-sdk";
import { BENCH_PLAIN_BODY, BENCH_PLAIN_PATH } from "./baseline.ts";
import { startBenchEngine } from "./bench-engine.mjs";

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const RUNS = arg("runs", 3);
const MESSAGES = arg("messages", 1000);
const CF_MESSAGES = arg("cf-messages", 300);
const SECONDS = arg("seconds", 5);
const CONNECTIONS = arg("connections", 16);
/** Enqueue calls in flight at once from the producer. */
const ENQUEUE_WINDOW = 50;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

const engine = await startBenchEngine();
const iii = registerWorker(engine.wsUrl, { workerName: "triggers-bench", otel: { enabled: false } });
let sink = null;
iii.registerFunction("bench::deliver", async (d) => {
  sink?.(d);
});
iii.registerFunction("bench::http", async () => ({ status_code: 200, body: BENCH_PLAIN_BODY }));
iii.registerTrigger({ type: "http", function_id: "bench::http", config: { api_path: "bench/json" } });
for (let i = 0; i < 100; i++) {
  if ((await fetch(`${engine.url}/bench/json`)).status === 200) break;
  await new Promise((r) => setTimeout(r, 100));
}

async function queueRun(queue, n) {
  const latencies = [];
  let done;
  const finished = new Promise((r) => (done = r));
  sink = (d) => {
    latencies.push(Date.now() - d.t0);
    if (latencies.length === n) done();
  };
  const start = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: ENQUEUE_WINDOW }, async () => {
      while (next < n) {
        next++;
        await iii.trigger({ function_id: "bench::deliver", payload: { t0: Date.now() }, action: TriggerAction.Enqueue({ queue }) });
      }
    }),
  );
  const enqueued = Date.now();
  const timeout = setTimeout(() => done(), 120_000);
  await finished;
  clearTimeout(timeout);
  const end = Date.now();
  sink = null;
  return {
    delivered: latencies.length,
    perSec: (latencies.length / (end - start)) * 1000,
    enqueuePerSec: (n / (enqueued - start)) * 1000,
    p50: pct(latencies, 50),
    p99: pct(latencies, 99),
  };
}

/** Unloaded latency: one message at a time, each enqueued after the previous one was handled. */
async function idleLatency(queue, n) {
  const lat = [];
  for (let i = 0; i < n; i++) {
    const got = new Promise((r) => (sink = (d) => r(Date.now() - d.t0)));
    await iii.trigger({ function_id: "bench::deliver", payload: { t0: Date.now() }, action: TriggerAction.Enqueue({ queue }) });
    lat.push(await got);
  }
  sink = null;
  return { p50: pct(lat, 50), p99: pct(lat, 99) };
}

async function httpRun(path) {
  const url = `${engine.url}${path}`;
  const end = Date.now() + SECONDS * 1000;
  let ok = 0;
  let bad = 0;
  const lat = [];
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (Date.now() < end) {
        const t = performance.now();
        const res = await fetch(url);
        const body = await res.json();
        lat.push(performance.now() - t);
        if (res.status === 200 && body.ok === true) ok++;
        else bad++;
      }
    }),
  );
  return { perSec: ok / SECONDS, bad, p50: pct(lat, 50), p99: pct(lat, 99) };
}

// Warm up every path once.
await queueRun("jobs", 50);
await queueRun("default", 20);
await httpRun("/bench/json");
await httpRun(BENCH_PLAIN_PATH);

const results = { durable: [], cloudflare: [], http: [], plain: [], durableIdle: [], cloudflareIdle: [] };
for (let r = 0; r < RUNS; r++) {
  results.durable.push(await queueRun("jobs", MESSAGES));
  results.cloudflare.push(await queueRun("default", CF_MESSAGES));
  results.durableIdle.push(await idleLatency("jobs", 50));
  results.cloudflareIdle.push(await idleLatency("default", 10));
  results.http.push(await httpRun("/bench/json"));
  results.plain.push(await httpRun(BENCH_PLAIN_PATH));
  console.error(`run ${r + 1}/${RUNS} done`);
}
const m = (k, f) => median(results[k].map((x) => x[f]));
const fmt = (x, d = 0) => x.toFixed(d);
console.log(
  `\nTriggers and delivery (${RUNS} runs, medians; ${MESSAGES} durable / ${CF_MESSAGES} Cloudflare messages per run, enqueue window ${ENQUEUE_WINDOW}; http ${CONNECTIONS} connections × ${SECONDS} s)\n`,
);
console.log("| measurement | throughput | p50 | p99 |");
console.log("|---|---|---|---|");
console.log(
  `| enqueue → handler, durable backend (queue \`jobs\`) | ${fmt(m("durable", "perSec"))} msg/s | ${fmt(m("durable", "p50"))} ms | ${fmt(m("durable", "p99"))} ms |`,
);
console.log(
  `| enqueue → handler, Cloudflare Queues backend (queue \`default\`) | ${fmt(m("cloudflare", "perSec"))} msg/s | ${fmt(m("cloudflare", "p50"))} ms | ${fmt(m("cloudflare", "p99"))} ms |`,
);
console.log(`| one message at a time, durable backend | – | ${fmt(m("durableIdle", "p50"))} ms | ${fmt(m("durableIdle", "p99"))} ms |`);
console.log(
  `| one message at a time, Cloudflare Queues backend | – | ${fmt(m("cloudflareIdle", "p50"))} ms | ${fmt(m("cloudflareIdle", "p99"))} ms |`,
);
console.log(
  `| http trigger \`GET /bench/json\` (Worker → Engine DO → iii-sdk worker) | ${fmt(m("http", "perSec"))} req/s | ${fmt(m("http", "p50"), 1)} ms | ${fmt(m("http", "p99"), 1)} ms |`,
);
console.log(
  `| plain Worker route \`GET /_iii/bench/plain\` (same JSON, no DO) | ${fmt(m("plain", "perSec"))} req/s | ${fmt(m("plain", "p50"), 1)} ms | ${fmt(m("plain", "p99"), 1)} ms |`,
);
console.log(
  `\nratios: http trigger / plain route = ${fmt(m("http", "perSec") / m("plain", "perSec"), 2)}×; durable / Cloudflare throughput = ${fmt(m("durable", "perSec") / m("cloudflare", "perSec"), 1)}×; unloaded p50 latency Cloudflare / durable = ${fmt(m("cloudflareIdle", "p50") / Math.max(1, m("durableIdle", "p50")), 1)}×`,
);
const short = [...results.durable.map((x) => [x, MESSAGES]), ...results.cloudflare.map((x) => [x, CF_MESSAGES])].filter(
  ([x, n]) => x.delivered < n,
);
if (short.length) console.log("WARNING: some runs timed out before every message was delivered");
await iii.shutdown?.();
await engine.stop();
process.exit(0);
