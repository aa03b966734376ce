// Queue delivery at the speed of calls: a flood of MESSAGES enqueued on a durable queue
// (`jobs`, the durable backend) and, the same way, on a Cloudflare Queues queue (`default`, the
// local simulator of `wrangler dev`), delivered to a no-op handler in another process
// (flood-handler.mjs, iii-sdk) — against the routed-invoke rate of CALLERS closed-loop callers to
// the same handler, in the same run on the same engine. Part of `npm run bench`; alone:
//   node --conditions=iii-edge-source tests/bench/queue-flood-bench.ts
// Options (env): BENCH_RUNS (3), BENCH_FLOOD (1000 messages), BENCH_CF_FLOOD (1000), BENCH_CALLERS (10),
// BENCH_DURATION_MS (3000, the routed measurement), BENCH_WARMUP_MS (1000), BENCH_KINDS (all; a comma
// list of routed,durable,cloudflare,http,plain,object to run only those, e.g. "routed,durable").
//
// Method: the producer is one raw WebSocket in this process keeping ENQUEUE_WINDOW enqueue frames
// (`invokefunction` with `action: {type: "enqueue"}`) outstanding, the next sent when an ack comes
// back; each payload carries `t0` (Date.now() at send). Throughput = messages / (last delivery at
// the handler − first enqueue sent): enqueueing and delivering overlap, as in a real flood.
// Latency = arrival at the handler − t0. The routed baseline: CALLERS sockets, one call to
// `bench::sink` outstanding on each, 1 s warm-up, 3 s recorded. Also an http trigger
// (`GET /bench/json`) against the same JSON from the Worker alone (the plain route) and from a
// Durable Object one RPC away (the object route, no engine). Kinds alternate order run by run.
import { fork, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BENCH_OBJECT_PATH, BENCH_PLAIN_PATH } from "./baseline.ts";
import { startBenchEngine } from "./bench-engine.mjs";
import { closedLoop, DURATION_MS, openWs, RUNS, runMain, sleep, timedWindow, WARMUP_MS, wsChannel, type Window } from "./callers.ts";
import { fmt, median, pct } from "./stats.ts";

const here = path.dirname(fileURLToPath(import.meta.url));
const FLOOD = Number(process.env.BENCH_FLOOD ?? 1000);
const CF_FLOOD = Number(process.env.BENCH_CF_FLOOD ?? 1000);
const CALLERS = Number(process.env.BENCH_CALLERS ?? 10);
/** Enqueue frames the producer keeps outstanding (a flood, not a closed loop of one). */
const ENQUEUE_WINDOW = 50;
/** How long one flood may take before the run is reported short (the Cloudflare simulator is slow). */
const FLOOD_TIMEOUT_MS = 120_000;
/** The targets (docs/performance.md): flood delivery ≥ 0.8× the routed rate of CALLERS callers; an
 * http trigger ≥ 0.7× the requests/s of a plain Worker route answering the same JSON. */
const TARGET_RATIO = 0.8;
const TARGET_HTTP_RATIO = 0.7;
/** HTTP clients in the http measurements (keep-alive fetch loops), and seconds recorded. */
const HTTP_CONNECTIONS = Number(process.env.BENCH_HTTP_CONNECTIONS ?? 16);
const HTTP_MS = Number(process.env.BENCH_HTTP_MS ?? 3000);
/** The measurements to run (BENCH_KINDS), all by default. */
const ALL_KINDS = ["routed", "durable", "cloudflare", "http", "plain", "object"] as const;
const KINDS = process.env.BENCH_KINDS ? ALL_KINDS.filter((k) => process.env.BENCH_KINDS!.split(",").includes(k)) : ALL_KINDS;

/** Resolves on the next IPC message of `child` matching `pred`. */
function nextMessage<T>(child: ChildProcess, pred: (m: T) => boolean, timeoutMs: number): Promise<T | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => (child.off("message", on), resolve(undefined)), timeoutMs);
    const on = (m: unknown) => {
      if (!pred(m as T)) return;
      clearTimeout(timer);
      child.off("message", on);
      resolve(m as T);
    };
    child.on("message", on);
  });
}

interface FloodResult {
  perSec: number;
  enqueuePerSec: number;
  p50: number;
  p99: number;
  delivered: number;
}

async function flood(wsUrl: string, handler: ChildProcess, queue: string, n: number): Promise<FloodResult> {
  handler.send({ expect: n });
  await nextMessage(handler, (m: { ready?: boolean }) => !!m.ready, 10_000);
  const done = nextMessage<{ done: boolean; at: number; latencies: number[] }>(handler, (m) => !!m.done, FLOOD_TIMEOUT_MS);
  const ws = await openWs(`${wsUrl}/`);
  let sent = 0;
  let acked = 0;
  let enqueuedAt = 0;
  const start = Date.now();
  const send = () => {
    sent++;
    ws.send(
      `{"type":"invokefunction","invocation_id":"e${sent}","function_id":"bench::sink","data":{"t0":${Date.now()}},"action":{"type":"enqueue","queue":"${queue}"}}`,
    );
  };
  const allAcked = new Promise<void>((resolve) => {
    ws.on("message", (raw) => {
      const text = raw.toString();
      if (!text.includes('"invocationresult"')) return;
      if (text.includes('"error"')) console.warn(`  enqueue failed: ${text.slice(0, 300)}`);
      acked++;
      if (sent < n) send();
      if (acked === n) {
        enqueuedAt = Date.now();
        resolve();
      }
    });
  });
  for (let i = 0; i < Math.min(ENQUEUE_WINDOW, n); i++) send();
  await allAcked;
  const r = await done;
  ws.close();
  if (!r) return { perSec: NaN, enqueuePerSec: (n / (enqueuedAt - start)) * 1000, p50: NaN, p99: NaN, delivered: 0 };
  return {
    perSec: (n / (r.at - start)) * 1000,
    enqueuePerSec: (n / (enqueuedAt - start)) * 1000,
    p50: pct(r.latencies, 50),
    p99: pct(r.latencies, 99),
    delivered: r.latencies.length,
  };
}

/** CALLERS closed-loop callers of `bench::sink`; round trips per second and latency. */
async function routed(wsUrl: string, callers: number): Promise<{ perSec: number; p50: number; p99: number }> {
  const sockets = await Promise.all(Array.from({ length: callers }, () => openWs(`${wsUrl}/`)));
  await sleep(50);
  const r = await closedLoop(sockets.map(wsChannel), {
    frame: (i, seq) => `{"type":"invokefunction","invocation_id":"c${i}-${seq}","function_id":"bench::sink","data":{"caller":${i}}}`,
    warmupMs: WARMUP_MS,
    durationMs: DURATION_MS,
  });
  for (const ws of sockets) ws.close();
  return { perSec: r.rps, p50: r.p50, p99: r.p99 };
}

/** HTTP_CONNECTIONS closed-loop GETs of `path` for HTTP_MS after a 500 ms warm-up; requests/s of 200s. */
async function http(baseUrl: string, path: string): Promise<{ perSec: number; p50: number; p99: number; enqueuePerSec?: number }> {
  const url = `${baseUrl}${path}`;
  const w: Window = { recording: false, running: true };
  let ok = 0;
  let bad = 0;
  const lat: number[] = [];
  const loops = Array.from({ length: HTTP_CONNECTIONS }, async () => {
    while (w.running) {
      const t = performance.now();
      const res = await fetch(url);
      const body = (await res.json()) as { ok?: boolean };
      if (!w.recording) continue;
      lat.push(performance.now() - t);
      if (res.status === 200 && body.ok === true) ok++;
      else bad++;
    }
  });
  const elapsed = await timedWindow(w, 500, HTTP_MS);
  await Promise.all(loops);
  if (bad) console.warn(`  ${bad} requests to ${path} failed`);
  return { perSec: (ok / elapsed) * 1000, p50: pct(lat, 50), p99: pct(lat, 99) };
}

async function main(): Promise<void> {
  console.log(
    `queue flood vs routed invoke: ${RUNS} runs; floods of ${FLOOD} (durable \`jobs\`) / ${CF_FLOOD} (Cloudflare Queues \`default\`, local simulator), enqueue window ${ENQUEUE_WINDOW}; routed: ${CALLERS} closed-loop callers × ${DURATION_MS} ms (+${WARMUP_MS} ms warm-up); handler: iii-sdk in its own process`,
  );
  const engine = await startBenchEngine();
  const handler = fork(path.join(here, "flood-handler.mjs"), [engine.wsUrl], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
  try {
    // Until bench::sink answers through the engine.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const ws = await openWs(`${engine.wsUrl}/`);
      const answer = await new Promise<string>((resolve) => {
        ws.on("message", (raw) => {
          const t = raw.toString();
          if (t.includes('"invocationresult"')) resolve(t);
        });
        ws.send('{"type":"invokefunction","invocation_id":"probe","function_id":"bench::sink","data":{}}');
        setTimeout(() => resolve("timeout"), 2000);
      });
      ws.close();
      if (!answer.includes('"error"') && answer !== "timeout") break;
      if (Date.now() > deadline) throw new Error(`bench::sink never became callable: ${answer}`);
      await sleep(200);
    }
    // Warm every path once.
    const warm = [await flood(engine.wsUrl, handler, "jobs", 100)];
    if (KINDS.includes("cloudflare")) warm.push(await flood(engine.wsUrl, handler, "default", 50));
    if (warm.some((w) => w.delivered === 0)) throw new Error(`a warm-up flood was not delivered within ${FLOOD_TIMEOUT_MS / 1000} s`);
    await routed(engine.wsUrl, CALLERS);
    for (let i = 0; (await fetch(`${engine.url}/bench/json`)).status !== 200; i++) {
      if (i > 100) throw new Error("the http trigger /bench/json never answered 200");
      await sleep(100);
    }

    const res: Record<
      "routed" | "durable" | "cloudflare" | "http" | "plain" | "object",
      { perSec: number; p50: number; p99: number; enqueuePerSec?: number }[]
    > = { routed: [], durable: [], cloudflare: [], http: [], plain: [], object: [] };
    const kinds = KINDS;
    for (let run = 1; run <= RUNS; run++) {
      for (const kind of run % 2 ? kinds : [...kinds].reverse()) {
        const r =
          kind === "routed"
            ? await routed(engine.wsUrl, CALLERS)
            : kind === "http"
              ? await http(engine.url, "/bench/json")
              : kind === "plain"
                ? await http(engine.url, BENCH_PLAIN_PATH)
                : kind === "object"
                  ? await http(engine.url, BENCH_OBJECT_PATH)
                  : await flood(engine.wsUrl, handler, kind === "durable" ? "jobs" : "default", kind === "durable" ? FLOOD : CF_FLOOD);
        res[kind].push(r);
        const extra =
          "enqueuePerSec" in r
            ? `  (enqueue acks ${fmt(r.enqueuePerSec as number, 0)}/s${(r as FloodResult).delivered ? "" : ", TIMED OUT"})`
            : "";
        console.log(
          `  run ${run}  ${kind.padEnd(10)} ${fmt(r.perSec, 0).padStart(6)} /s  p50 ${fmt(r.p50, 1).padStart(7)} ms  p99 ${fmt(r.p99, 1).padStart(7)} ms${extra}`,
        );
      }
    }
    const m = (k: keyof typeof res, f: "perSec" | "p50" | "p99" | "enqueuePerSec") => median(res[k].map((x) => x[f] ?? NaN));
    const paired = (k: "durable" | "cloudflare" | "http" | "object", base: "routed" | "plain" | "object" = "routed") =>
      // A kind left out by BENCH_KINDS has no runs: its ratios print as "—".
      median(res[k].map((x, i) => x.perSec / (res[base][i]?.perSec ?? Number.NaN)));
    console.log(`\nMedians of ${RUNS} runs:`);
    console.log("| measurement | rate | p50 | p99 | × routed (median of paired runs) |");
    console.log("|---|--:|--:|--:|--:|");
    console.log(
      `| routed invoke, ${CALLERS} closed-loop callers → bench::sink | ${fmt(m("routed", "perSec"), 0)} rt/s | ${fmt(m("routed", "p50"), 2)} ms | ${fmt(m("routed", "p99"), 2)} ms | 1 |`,
    );
    console.log(
      `| flood of ${FLOOD}, durable backend (\`jobs\`, concurrency 10) | ${fmt(m("durable", "perSec"), 0)} msg/s (enqueue acks ${fmt(m("durable", "enqueuePerSec"), 0)}/s) | ${fmt(m("durable", "p50"), 0)} ms | ${fmt(m("durable", "p99"), 0)} ms | ${fmt(paired("durable"), 2)}× |`,
    );
    console.log(
      `| flood of ${CF_FLOOD}, Cloudflare Queues backend (\`default\`, local simulator) | ${fmt(m("cloudflare", "perSec"), 0)} msg/s (enqueue acks ${fmt(m("cloudflare", "enqueuePerSec"), 0)}/s) | ${fmt(m("cloudflare", "p50"), 0)} ms | ${fmt(m("cloudflare", "p99"), 0)} ms | ${fmt(paired("cloudflare"), 2)}× |`,
    );
    console.log(
      `| plain Worker route \`GET ${BENCH_PLAIN_PATH}\` (${HTTP_CONNECTIONS} clients, no engine object) | ${fmt(m("plain", "perSec"), 0)} req/s | ${fmt(m("plain", "p50"), 1)} ms | ${fmt(m("plain", "p99"), 1)} ms | — |`,
    );
    console.log(
      `| one object \`GET ${BENCH_OBJECT_PATH}\` (Worker → an object by RPC → Worker, no engine) | ${fmt(m("object", "perSec"), 0)} req/s | ${fmt(m("object", "p50"), 1)} ms | ${fmt(m("object", "p99"), 1)} ms | ${fmt(paired("object", "plain"), 2)}× the plain route |`,
    );
    console.log(
      `| http trigger \`GET /bench/json\` (Worker → engine object → iii-sdk worker) | ${fmt(m("http", "perSec"), 0)} req/s | ${fmt(m("http", "p50"), 1)} ms | ${fmt(m("http", "p99"), 1)} ms | ${fmt(paired("http", "plain"), 2)}× the plain route, ${fmt(paired("http", "object"), 2)}× the object |`,
    );
    const ratio = paired("durable");
    const httpRatio = paired("http", "plain");
    console.log(
      `\ndurable flood / routed invoke: ${fmt(ratio, 2)}× (target ≥ ${TARGET_RATIO}×) ${ratio >= TARGET_RATIO ? "PASS" : "MISS"}`,
    );
    console.log(
      `http trigger / plain Worker route: ${fmt(httpRatio, 2)}× (target ≥ ${TARGET_HTTP_RATIO}×) ${httpRatio >= TARGET_HTTP_RATIO ? "PASS" : "MISS"}`,
    );
  } finally {
    handler.kill("SIGTERM");
    await engine.stop();
  }
}

runMain(main);
