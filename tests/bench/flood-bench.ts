// Floods against /healthz (the security issue's liveness point): SOCKETS (4) sockets × FRAMES
// (15 000) frames sent at once to control sockets (`/`), channel writers (`/ws/channels/…`) and
// browser stream sockets (`/_iii/streams`) of an engine with AUTH_SECRET, all four sockets holding a
// token of one principal, as in tests/security/floods.test.ts. /healthz (answered by the engine
// object) is polled every 100 ms from just before the burst until a poll sent after the last frame
// left has been answered. Beside it, in the same run: the same burst of control frames at the
// do-nothing Durable Object of tests/bench/ws-sink (its `/count` goes through that object's queue
// as the engine's /healthz does): the runtime's own floor. Every burst gets a fresh runtime
// (wrangler dev under inspector keeps making each later WebSocket message dearer; ws-sink/README.md).
//   node --conditions=iii-edge-source tests/bench/flood-bench.ts   (npm run bench:floods)
// Options (env): BENCH_RUNS (3), BENCH_FLOOD_SOCKETS (4), BENCH_FLOOD_FRAMES (15000),
// BENCH_FLOOD_KINDS (sink,control,channel,stream), BENCH_DEBUG=1 (wrangler output on failure),
// BENCH_PROFILE=<dir> (a CPU profile of the engine's Worker per burst, through wrangler's inspector:
// `<kind>-<run>.cpuprofile` for Chrome DevTools, and the functions costing most self time printed).
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { Worker } from "node:worker_threads";
import path from "node:path";
import { mintToken } from "@iii-edge/protocol/token";
import NodeWs from "ws";
import { startBenchEngine } from "./bench-engine.mjs";
import { runtimeOf, startSink } from "./ws-sink/common.mjs";
import { RUNS, runMain, sleep } from "./callers.ts";
import { fmt, median } from "./stats.ts";

const SOCKETS = Number(process.env.BENCH_FLOOD_SOCKETS ?? 4);
const FRAMES = Number(process.env.BENCH_FLOOD_FRAMES ?? 15_000);
const KINDS = (process.env.BENCH_FLOOD_KINDS ?? "sink,control,channel,stream").split(",") as Kind[];
const AUTH_SECRET = "flood-bench-secret-0123456789abcdef0123456789ab";
/** The issue's target for every kind on a quiet machine. */
const TARGET_MS = 1_000;
/** How long one burst may take to be handled before the run gives up on it. */
const LIMIT_MS = 120_000;
const POLL_MS = 100;
const PROFILE_DIR = process.env.BENCH_PROFILE;

type Kind = "sink" | "control" | "channel" | "stream";
interface Target {
  url: string;
  wsUrl: string;
  /** The request polled: through the object's input queue. */
  probe: string;
  /** The workerd process that runs the Worker (for its CPU time). */
  runtime: number | undefined;
  /** wrangler's inspector proxy (the engine only: BENCH_PROFILE). */
  inspectorPort?: number;
  stop(): Promise<void>;
}
interface Result {
  worst: number;
  median: number;
  samples: number;
  failures: number;
  /** How long the bench took to hand every frame to its sockets. */
  sentMs: number;
  handledMs: number;
  cpuS: number;
  closed: number;
  /** Channel bursts: chunks the readers got (what the engine admitted, relayed in order). */
  delivered: number;
}

// ------------------------------------------------------------------ runtimes

/** CPU seconds (user + system) of a process, or NaN when it is gone. */
function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return NaN;
  }
}

let enginePersist: string | undefined;
async function startEngineTarget(): Promise<Target> {
  const e = await startBenchEngine({ secretVars: { AUTH_SECRET }, persist: enginePersist });
  enginePersist = e.persist;
  return {
    url: e.url,
    wsUrl: e.wsUrl,
    probe: `${e.url}/healthz`,
    runtime: runtimeOf(e.child.pid!, e.port),
    inspectorPort: e.inspectorPort,
    stop: e.stop,
  };
}

/** tests/bench/ws-sink under wrangler dev, as its run.mjs starts it (collector off, like npm start). */
async function startSinkTarget(): Promise<Target> {
  const sink = await startSink({ obs: false });
  return { url: sink.url, wsUrl: `ws://127.0.0.1:${sink.port}`, probe: `${sink.url}/count`, runtime: sink.runtime, stop: sink.stop };
}

// ------------------------------------------------------------------ profiles (BENCH_PROFILE)

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; scriptId: string; url: string; lineNumber: number; columnNumber: number };
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** V8's sampling profiler on the Worker's isolate (engine and front door), over the inspector. */
async function startProfile(port: number): Promise<{ stop(): Promise<{ profile: CpuProfile; sources: Map<string, string[]> }> }> {
  const [target] = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as { webSocketDebuggerUrl: string }[];
  // (`ws`: wrangler's inspector proxy refuses the handshake of Node's own WebSocket.)
  const ws = new NodeWs(target!.webSocketDebuggerUrl, { maxPayload: 1024 * 1024 * 1024 });
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  const waiting = new Map<number, (r: unknown) => void>();
  const scripts: string[] = [];
  ws.on("message", (data) => {
    const m = JSON.parse(String(data)) as { id?: number; result?: unknown; method?: string; params?: { scriptId: string } };
    if (m.id !== undefined) waiting.get(m.id)?.(m.result);
    else if (m.method === "Debugger.scriptParsed") scripts.push(m.params!.scriptId);
  });
  let next = 0;
  const send = (method: string, params: object = {}) =>
    new Promise<unknown>((resolve) => {
      waiting.set(++next, resolve);
      ws.send(JSON.stringify({ id: next, method, params }));
    });
  mkdirSync(PROFILE_DIR!, { recursive: true });
  await send("Profiler.enable");
  await send("Profiler.setSamplingInterval", { interval: 100 });
  await send("Profiler.start");
  return {
    async stop() {
      const { profile } = (await send("Profiler.stop")) as { profile: CpuProfile };
      // The bundle's source, to name anonymous functions by their line (after the burst: the
      // debugger's bookkeeping is not part of what is measured).
      await send("Debugger.enable");
      const sources = new Map<string, string[]>();
      for (const id of new Set(profile.nodes.map((n) => n.callFrame.scriptId)))
        if (scripts.includes(id)) {
          const r = (await send("Debugger.getScriptSource", { scriptId: id })) as { scriptSource?: string };
          if (r?.scriptSource) {
            sources.set(id, r.scriptSource.split("\n"));
            // The bundle itself (wrangler deletes it on exit), to read the profile's lines in.
            writeFileSync(path.join(PROFILE_DIR!, `script-${id}.js`), r.scriptSource);
          }
        }
      ws.close();
      return { profile, sources };
    },
  };
}

/** The functions with the most self time, one line each. */
function topSelf(p: CpuProfile, sources: Map<string, string[]>, n = 25): string[] {
  const byNode = new Map(p.nodes.map((node) => [node.id, node]));
  const self = new Map<string, number>();
  let total = 0;
  p.samples.forEach((id, i) => {
    const f = byNode.get(id)!.callFrame;
    const line = sources
      .get(f.scriptId)
      ?.[f.lineNumber]?.slice(f.columnNumber, f.columnNumber + 70)
      .trim();
    const key = `${f.functionName || "(anonymous)"} ${f.url.split("/").pop()}:${f.lineNumber + 1}${line && !f.functionName ? `  ${line}` : ""}`;
    const us = p.timeDeltas[i] ?? 0;
    total += us;
    self.set(key, (self.get(key) ?? 0) + us);
  });
  return [...self]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, us]) => `    ${fmt(us / 1000, 1).padStart(8)} ms ${fmt((100 * us) / total, 1).padStart(5)} %  ${k}`);
}

// ------------------------------------------------------------------ sockets

interface Socket {
  ws: WebSocket;
  texts: string[];
  closed: boolean;
}

async function open(url: string, token?: string): Promise<Socket> {
  const init = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;
  const ws = new WebSocket(url, init as unknown as string[]);
  const s: Socket = { ws, texts: [], closed: false };
  ws.addEventListener("message", (ev) => {
    if (typeof ev.data === "string") s.texts.push(ev.data);
  });
  ws.addEventListener("close", () => (s.closed = true));
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve(), { once: true });
    ws.addEventListener("error", () => reject(new Error(`could not open ${url}`)), { once: true });
  });
  return s;
}

async function closeAll(sockets: Socket[]): Promise<void> {
  for (const s of sockets) if (!s.closed) s.ws.close(1000, "done");
  const end = Date.now() + 10_000;
  while (sockets.some((s) => !s.closed) && Date.now() < end) await sleep(20);
}

/** A call over a control socket, answered within 10 s. */
async function call(s: Socket, function_id: string, data: unknown): Promise<Record<string, unknown>> {
  const invocation_id = randomUUID();
  s.ws.send(JSON.stringify({ type: "invokefunction", invocation_id, function_id, data }));
  const end = Date.now() + 10_000;
  for (;;) {
    for (const t of s.texts) {
      const f = JSON.parse(t) as { type?: string; invocation_id?: string; result?: Record<string, unknown>; error?: unknown };
      if (f.type === "invocationresult" && f.invocation_id === invocation_id) {
        if (f.error) throw new Error(`${function_id}: ${JSON.stringify(f.error)}`);
        return f.result!;
      }
    }
    if (Date.now() > end) throw new Error(`${function_id}: no answer`);
    await sleep(10);
  }
}

const pad = "x".repeat(80);
/** The junk mix of the floods test's burst: ~100-byte frames, refused (not JSON, invalid), ignored
 * (unknown type), and one in ten a call. */
function controlFrame(i: number): string {
  const kind = i % 10;
  if (kind < 3) return `{oops ${pad}`;
  if (kind < 6) return `{"type":"teleport","pad":"${pad}"}`;
  if (kind < 9) return `{"type":"registerfunction","id":${i},"pad":"${pad}"}`;
  const data = i % 20 === 9 ? { scope: "flood", key: "kept" } : { scope: 5, key: "x", value: pad };
  return JSON.stringify({
    type: "invokefunction",
    invocation_id: randomUUID(),
    function_id: i % 20 === 9 ? "state::get" : "state::set",
    data,
  });
}
const streamFrame = (i: number): string =>
  i % 2 ? `{not json ${i}` : JSON.stringify({ type: "leave", data: { subscriptionId: `s-${i}`, streamName: "fl", groupId: "g" } });
const channelFrame = (i: number): string => `chunk ${i}`;

/** The flooding sockets of `kind` (and what else must stay open meanwhile: channel readers). */
async function floodSockets(kind: Kind, t: Target): Promise<{ flooders: Socket[]; others: Socket[]; frame: (i: number) => string }> {
  if (kind === "sink")
    return {
      flooders: await Promise.all(Array.from({ length: SOCKETS }, () => open(`${t.wsUrl}/?mode=hibernate`))),
      others: [],
      frame: controlFrame,
    };
  const tok = await mintToken(AUTH_SECRET, { ns: ["*"], sub: "flooder" }, 3600);
  if (kind === "control")
    return {
      flooders: await Promise.all(Array.from({ length: SOCKETS }, () => open(`${t.wsUrl}/`, tok))),
      others: [],
      frame: controlFrame,
    };
  if (kind === "stream")
    return {
      flooders: await Promise.all(Array.from({ length: SOCKETS }, () => open(`${t.wsUrl}/_iii/streams`, tok))),
      others: [],
      frame: streamFrame,
    };
  const owner = await open(`${t.wsUrl}/`, await mintToken(AUTH_SECRET, { ns: ["*"], sub: "channel-owner" }, 3600));
  const flooders: Socket[] = [];
  const others: Socket[] = [owner];
  const endPath = (r: Record<string, unknown>) =>
    `/ws/channels/${String(r.channel_id)}?key=${encodeURIComponent(String(r.access_key))}&dir=${String(r.direction)}`;
  for (let i = 0; i < SOCKETS; i++) {
    const refs = (await call(owner, "engine::channels::create", { buffer_size: 64 })) as {
      writer: Record<string, unknown>;
      reader: Record<string, unknown>;
    };
    others.push(await open(`${t.wsUrl}${endPath(refs.reader)}`, tok));
    flooders.push(await open(`${t.wsUrl}${endPath(refs.writer)}`, tok));
  }
  return { flooders, others, frame: channelFrame };
}

// ------------------------------------------------------------------ one burst

/** The poller, in a thread of its own: in the thread that floods, a poll's answer waits for the
 * send loop (60 000 sends take that thread 0.5–6 s, by load) and the figure is the bench's own. */
const POLLER = `
const { parentPort, workerData } = require("node:worker_threads");
const now = () => performance.timeOrigin + performance.now();
let running = true;
parentPort.on("message", () => (running = false));
(async () => {
  while (running) {
    const sentAt = now();
    const ok = await fetch(workerData.url, { signal: AbortSignal.timeout(30000) }).then(
      async (r) => (await r.arrayBuffer(), r.ok),
      () => false,
    );
    parentPort.postMessage({ sentAt, ms: now() - sentAt, ok });
    await new Promise((r) => setTimeout(r, workerData.pollMs));
  }
  parentPort.close();
})();
`;

/** Wall-clock milliseconds comparable between threads. */
const wall = () => performance.timeOrigin + performance.now();

/** Polls `url` every POLL_MS (one request at a time, as a load balancer would) until stopped. */
function poll(url: string) {
  const polls: { sentAt: number; ms: number; ok: boolean }[] = [];
  const worker = new Worker(POLLER, { eval: true, workerData: { url, pollMs: POLL_MS } });
  worker.on("message", (m: { sentAt: number; ms: number; ok: boolean }) => polls.push(m));
  const exited = new Promise((r) => worker.once("exit", r));
  return {
    /** When the last answered poll was sent (wall()). */
    lastSentAt: () => polls.at(-1)?.sentAt ?? 0,
    count: () => polls.length,
    async stop() {
      worker.postMessage("stop");
      await exited;
      return { latencies: polls.map((p) => p.ms), failures: polls.filter((p) => !p.ok).length };
    },
  };
}

async function burst(kind: Kind, run: number): Promise<Result> {
  const t = kind === "sink" ? await startSinkTarget() : await startEngineTarget();
  try {
    const { flooders, others, frame } = await floodSockets(kind, t);
    await sleep(500); // the opens settled
    const profile = PROFILE_DIR && t.inspectorPort ? await startProfile(t.inspectorPort) : undefined;
    const cpu0 = cpuSeconds(t.runtime);
    const health = poll(t.probe);
    while (health.count() === 0) await sleep(5); // one poll of the idle object first
    const t0 = performance.now();
    for (let i = 0; i < FRAMES; i++) for (const f of flooders) if (!f.closed) f.ws.send(frame(i));
    const sentMs = performance.now() - t0;
    const end = Date.now() + LIMIT_MS;
    while (flooders.some((f) => !f.closed && f.ws.bufferedAmount > 0) && Date.now() < end) await sleep(5);
    // Handled: a poll sent after the last frame left has been answered (it queued behind them).
    const leftAt = wall();
    while (health.lastSentAt() < leftAt && Date.now() < end) await sleep(5);
    const n = health.count();
    while (health.count() === n && Date.now() < end) await sleep(5);
    const handledMs = performance.now() - t0;
    const h = await health.stop();
    const cpuS = cpuSeconds(t.runtime) - cpu0;
    const closed = flooders.filter((f) => f.closed).length;
    const delivered = kind === "channel" ? others.slice(1).reduce((n, r) => n + r.texts.length, 0) : 0;
    if (profile) {
      const { profile: p, sources } = await profile.stop();
      writeFileSync(path.join(PROFILE_DIR!, `${kind}-${run + 1}.cpuprofile`), JSON.stringify(p));
      console.log(
        `  ${kind} run ${run + 1}: self time by function (V8 samples of the Worker's isolate)\n${topSelf(p, sources).join("\n")}`,
      );
    }
    await closeAll([...flooders, ...others]);
    return {
      worst: Math.max(...h.latencies),
      median: median(h.latencies),
      samples: h.latencies.length,
      failures: h.failures,
      sentMs,
      handledMs,
      cpuS,
      closed,
      delivered,
    };
  } finally {
    await t.stop();
  }
}

// ------------------------------------------------------------------ main

runMain(async () => {
  console.log(
    `flood bench: ${SOCKETS} sockets × ${FRAMES} frames per burst, /healthz polled every ${POLL_MS} ms, ${RUNS} runs, a fresh runtime per burst`,
  );
  const results = new Map<Kind, Result[]>(KINDS.map((k) => [k, []]));
  for (let run = 0; run < RUNS; run++) {
    // Kinds rotate run by run: no kind always goes first on a cold machine.
    const order = KINDS.map((_, i) => KINDS[(i + run) % KINDS.length]!);
    for (const kind of order) {
      const r = await burst(kind, run);
      results.get(kind)!.push(r);
      console.log(
        `  run ${run + 1} ${kind.padEnd(7)} healthz worst ${fmt(r.worst, 0)} ms, median ${fmt(r.median, 0)} ms over ${r.samples} (${r.failures} failed); sent in ${fmt(r.sentMs, 0)} ms, handled in ${fmt(r.handledMs, 0)} ms; workerd ${fmt(r.cpuS, 2)} s CPU; ${r.closed}/${SOCKETS} flooders closed${kind === "channel" ? `; ${r.delivered} chunks delivered` : ""}`,
      );
    }
  }
  const med = (k: Kind, f: (r: Result) => number) => median((results.get(k) ?? []).map(f));
  const base = results.has("sink") ? med("sink", (r) => r.worst) : NaN;
  console.log(
    "\n| burst (medians of runs) | healthz worst | healthz median | handled in | workerd CPU | worst / sink worst | worst < 1 s |",
  );
  console.log("|---|--:|--:|--:|--:|--:|:-:|");
  for (const k of KINDS) {
    const worst = med(k, (r) => r.worst);
    const label = k === "sink" ? "do-nothing DO (ws-sink), baseline" : `${k} sockets`;
    console.log(
      `| ${label} | ${fmt(worst, 0)} ms | ${fmt(
        med(k, (r) => r.median),
        0,
      )} ms | ${fmt(
        med(k, (r) => r.handledMs),
        0,
      )} ms | ${fmt(
        med(k, (r) => r.cpuS),
        2,
      )} s | ${fmt(worst / base, 2)}× | ${worst < TARGET_MS ? "yes" : "no"} |`,
    );
  }
});
