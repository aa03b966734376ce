// Idle sockets: IDLE worker connections held open on one engine object (each upgraded
// through the front door, accepted by the object as a hibernatable WebSocket, announced with
// `workerregistered`, then silent), against none: workerd's resident memory per idle connection,
// and a routed call's latency (1 closed-loop caller of an iii-sdk `bench::echo` in its own process)
// with them open against without, in the same run. Part of scale-bench.mjs; alone:
//   node --conditions=iii-edge-source tests/bench/idle-sockets-bench.ts
// Options (env): BENCH_IDLE (10000), BENCH_IDLE_BATCH (200 connects at once), BENCH_DURATION_MS (3000).
// File descriptors: each idle socket is one in this process and one in workerd (limit here:
// `ulimit -n` 20000 for both); the engine's per-principal and per-IP connection bounds
// (MAX_CONNECTIONS_PER_TOKEN / _IP, default 1,000 / 2,000) are raised for this engine only.
import { spawn } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { startBenchEngine } from "./bench-engine.mjs";
import { runMain, sleep } from "./callers.ts";
import { fmt, median, pct } from "./stats.ts";

const here = path.dirname(fileURLToPath(import.meta.url));
const IDLE = Number(process.env.BENCH_IDLE ?? 10_000);
const BATCH = Number(process.env.BENCH_IDLE_BATCH ?? 200);
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 3000);
/** The issue's target: a routed call's p50 with the idle sockets ≤ 1.2× without. */
const TARGET_RATIO = 1.2;

/** workerd's resident set (kB) for the engine on `port`, read from /proc. */
function workerdRssKb(port: number): number {
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (!cmd.includes("workerd") || !cmd.includes(`127.0.0.1:${port}`)) continue;
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
      if (m) return Number(m[1]);
    } catch {
      // gone
    }
  }
  return NaN;
}

function connect(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    const timer = setTimeout(() => (ws.terminate(), reject(new Error("no workerregistered within 30 s"))), 30_000);
    ws.once("error", (e) => (clearTimeout(timer), reject(e)));
    ws.once("unexpected-response", (_q, res) => (clearTimeout(timer), reject(new Error(`HTTP ${res.statusCode}`))));
    ws.on("message", (raw) => {
      if (!raw.toString().includes('"workerregistered"')) return;
      clearTimeout(timer);
      resolve(ws);
    });
  });
}

async function routedLatency(wsUrl: string): Promise<{ p50: number; p99: number; n: number }> {
  const ws = await connect(`${wsUrl}/`);
  const lat: number[] = [];
  const end = performance.now() + 500 + DURATION_MS;
  const warmEnd = performance.now() + 500;
  let seq = 0;
  while (performance.now() < end) {
    const id = `r${++seq}`;
    const t0 = performance.now();
    await new Promise<void>((resolve) => {
      const on = (raw: WebSocket.RawData) => {
        if (!raw.toString().includes(`"${id}"`)) return;
        ws.off("message", on);
        resolve();
      };
      ws.on("message", on);
      ws.send(`{"type":"invokefunction","invocation_id":"${id}","function_id":"bench::echo","data":{"seq":${seq}}}`);
    });
    if (t0 > warmEnd) lat.push(performance.now() - t0);
  }
  ws.close();
  return { p50: median(lat), p99: pct(lat, 99), n: lat.length };
}

async function main(): Promise<void> {
  const engine = await startBenchEngine({
    secretVars: { MAX_CONNECTIONS_PER_TOKEN: String(IDLE + 100), MAX_CONNECTIONS_PER_IP: String(IDLE + 100) },
  });
  const worker = spawn(process.execPath, [path.join(here, "answer-worker.mjs"), engine.wsUrl, "sdk"], { stdio: "ignore" });
  const idle: WebSocket[] = [];
  try {
    for (let i = 0; ; i++) {
      const r = await routedLatency(engine.wsUrl).catch(() => undefined);
      if (r && r.n > 0) break;
      if (i > 60) throw new Error("bench::echo never answered");
      await sleep(500);
    }
    const before = await routedLatency(engine.wsUrl);
    await sleep(500);
    const rssBefore = workerdRssKb(engine.port);
    let failed = 0;
    let firstError = "";
    const t0 = performance.now();
    while (idle.length + failed < IDLE) {
      const n = Math.min(BATCH, IDLE - idle.length - failed);
      const got = await Promise.allSettled(Array.from({ length: n }, () => connect(`${engine.wsUrl}/`)));
      for (const g of got) {
        if (g.status === "fulfilled") idle.push(g.value);
        else if (failed++ === 0) firstError = String(g.reason);
      }
      if (failed > 0 && failed >= n) break; // the engine (or this machine) takes no more
      if (idle.length % 2000 < BATCH)
        console.log(`  ${idle.length} idle sockets open, workerd RSS ${fmt(workerdRssKb(engine.port) / 1024, 0)} MiB`);
    }
    const connectS = (performance.now() - t0) / 1000;
    await sleep(2000);
    const rssAfter = workerdRssKb(engine.port);
    const during = await routedLatency(engine.wsUrl);
    const ratio = during.p50 / before.p50;
    const perConn = ((rssAfter - rssBefore) * 1024) / Math.max(1, idle.length);
    console.log(
      `idle sockets: ${idle.length} open of ${IDLE} asked${failed ? ` (${failed} refused or failed; first: ${firstError})` : ""}, connected in ${fmt(connectS, 1)} s`,
    );
    console.log(`| measurement | value |`);
    console.log(`|---|--:|`);
    console.log(`| workerd RSS before / after | ${fmt(rssBefore / 1024, 1)} / ${fmt(rssAfter / 1024, 1)} MiB |`);
    console.log(`| memory per idle connection (RSS delta / connections) | ${fmt(perConn / 1024, 1)} KiB |`);
    console.log(`| routed call p50 / p99, no idle sockets | ${fmt(before.p50, 2)} / ${fmt(before.p99, 2)} ms |`);
    console.log(`| routed call p50 / p99, ${idle.length} idle sockets | ${fmt(during.p50, 2)} / ${fmt(during.p99, 2)} ms |`);
    console.log(
      `\nrouted p50 with ${idle.length} idle sockets / without: ${fmt(ratio, 2)}× (target ≤ ${TARGET_RATIO}×) ${ratio <= TARGET_RATIO && idle.length >= IDLE ? "PASS" : "MISS"}`,
    );
  } catch (e) {
    console.log(`failed with ${idle.length} idle sockets open: ${String(e)}; engine log (tail):\n${engine.log().slice(-1500)}`);
    throw e;
  } finally {
    for (const ws of idle) ws.terminate();
    worker.kill("SIGTERM");
    await engine.stop();
  }
}

runMain(main);
