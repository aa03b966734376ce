// The frame parser in plain Node: the hand-written check of a routed call's frames
// (protocol/src/call-frames.ts) against the zod schemas it stands in for, on the frames a routed
// call parses. Measured twice, in two processes: with zod's compiled object parsers (Node allows
// `new Function`) and without them (`jitless`, as in workerd, which forbids eval: what the engine
// object really runs). Each figure is the median of MICRO_ROUNDS rounds of MICRO_FRAMES parses,
// variants rotated round by round. Alone:
// node --conditions=iii-edge-source tests/bench/parse-micro.ts
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { fmt, median } from "./stats.ts";

const FRAMES = Number(process.env.MICRO_FRAMES ?? 100_000);
const ROUNDS = Number(process.env.MICRO_ROUNDS ?? 7);
const JITLESS = process.env.PARSE_MICRO_JITLESS === "1";

// Before the schemas are built: zod decides per schema, at construction, whether it may compile.
if (JITLESS) z.config({ jitless: true });
const { parseCallFrame, parseWorkerFrame, workerFrame } = await import("@iii-edge/protocol");
const { echoCalls, memoryPorts } = await import("./micro-core.ts");
const { EngineCore } = await import("@iii-edge/engine-do/core/engine.ts");

const id = "6f1c2a9e-3b7d-4c1e-9a51-0d8e7f2b4c60";
const samples: Record<string, string> = {
  call: `{"type":"invokefunction","invocation_id":"${id}","function_id":"bench::echo","data":{"caller":0,"seq":1}}`,
  "call+trace": JSON.stringify({
    type: "invokefunction",
    invocation_id: id,
    function_id: "orders::place",
    data: { order: { sku: "A-1", qty: 2 } },
    metadata: { source: "web" },
    traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    baggage: "tenant=acme",
    timeout_ms: 10_000,
    namespace: "shop",
  }),
  result: `{"type":"invocationresult","invocation_id":"${id}","function_id":"bench::echo","result":{"caller":0,"seq":1}}`,
  "result+error": JSON.stringify({
    type: "invocationresult",
    invocation_id: id,
    function_id: "orders::place",
    error: { code: "invocation_failed", message: "card declined", stacktrace: "Error: card declined\n    at pay (pay.ts:1:1)" },
    traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
  }),
};

/** ns per call of `fn` over `n` calls (the result is kept so the work is not optimised away). */
let sink = 0;
function time(n: number, fn: () => unknown): number {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) if (fn()) sink++;
  return ((performance.now() - t0) * 1e6) / n;
}

interface Row {
  frame: string;
  fast: number;
  zod: number;
  parse: number;
  jsonOnly: number;
}

function measure(): Row[] {
  const rows: Row[] = [];
  for (const [frame, raw] of Object.entries(samples)) {
    const value = JSON.parse(raw) as Record<string, unknown>;
    if (!parseCallFrame(value) || !workerFrame.safeParse(value).success) throw new Error(`${frame} does not parse`);
    const variants = {
      fast: () => parseCallFrame(value),
      zod: () => workerFrame.safeParse(value).success,
      parse: () => parseWorkerFrame(raw).ok,
      jsonOnly: () => JSON.parse(raw),
    };
    const names = Object.keys(variants) as (keyof typeof variants)[];
    for (const v of names) time(FRAMES / 4, variants[v]); // warm-up (JIT)
    const ns: Record<string, number[]> = { fast: [], zod: [], parse: [], jsonOnly: [] };
    for (let r = 0; r < ROUNDS; r++) {
      const order = names.slice(r % names.length).concat(names.slice(0, r % names.length));
      for (const v of order) ns[v]!.push(time(FRAMES, variants[v]));
    }
    rows.push({ frame, fast: median(ns.fast!), zod: median(ns.zod!), parse: median(ns.parse!), jsonOnly: median(ns.jsonOnly!) });
  }
  return rows;
}

/** The core's µs per sequential routed call, for scale (micro-core.ts): each call parses two of these frames. */
async function coreCall(): Promise<number> {
  const core = new EngineCore(memoryPorts({ clockRate: 100, timerRate: 100 }));
  core.start([]);
  const run = echoCalls(core);
  await run(5_000);
  const us: number[] = [];
  for (let r = 0; r < ROUNDS; r++) us.push(await run(5_000));
  return median(us);
}

const rows = measure();
const core = await coreCall();
if (sink < 0) console.log(sink);

if (process.env.PARSE_MICRO_CHILD === "1") {
  console.log(JSON.stringify({ rows, core }));
} else {
  const child = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url)], {
    env: { ...process.env, PARSE_MICRO_CHILD: "1", PARSE_MICRO_JITLESS: "1" },
    encoding: "utf8",
  });
  if (child.status !== 0) throw new Error(`jitless run failed: ${child.stderr}`);
  const jitless = JSON.parse(child.stdout.trim().split("\n").pop()!) as { rows: Row[]; core: number };
  console.log(
    `\nparse micro: Node ${process.version}, ${ROUNDS} rounds × ${FRAMES} parses of each frame, medians (ns per frame; ratios in the same run):`,
  );
  for (const [mode, r, c] of [
    ["zod compiled (Node)", rows, core],
    ["zod jitless (as in workerd)", jitless.rows, jitless.core],
  ] as const) {
    // The core parses one call and one result per routed call (the caller's and the worker's frames).
    const saved = ((r[0]!.zod - r[0]!.fast + r[2]!.zod - r[2]!.fast) / 1000).toFixed(2);
    console.log(`\n  ${mode}; the engine core's routed call: ${fmt(c, 2)} µs, of which the call-frames parser saves ${saved} µs`);
    console.log("  frame           JSON.parse   zod schema   call-frames   zod/fast   parseWorkerFrame   saved per frame");
    for (const x of r) {
      console.log(
        `  ${x.frame.padEnd(14)} ${fmt(x.jsonOnly, 0).padStart(10)} ${fmt(x.zod, 0).padStart(12)} ${fmt(x.fast, 0).padStart(13)} ${`${fmt(x.zod / x.fast, 1)}×`.padStart(10)} ${fmt(x.parse, 0).padStart(18)} ${`${fmt((x.zod - x.fast) / 1000, 2)} µs`.padStart(17)}`,
      );
    }
  }
}
