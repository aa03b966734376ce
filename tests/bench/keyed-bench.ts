#!/usr/bin/env node
// Keyed calls (docs/keyed-workers.md) against a routed call to a Worker-hosted function, on one
// engine as `npm start` runs it, in one run. Closed-loop caller sockets in this process send raw
// `invokefunction` frames:
//   routed edge   `edge::hello` — engine → service binding → FunctionHost (the baseline)
//   keyed get     `counter::get` — engine → service binding → WorkerHost → the user's Durable Object
//                 (one SQLite read); caller i calls its own user, so no two callers share a line
//   keyed add     `counter::add` — the same with a SQLite write
//   one key       `counter::add` with every caller on one user: the calls wait in one line
//   state write   `state::set` (a built-in writing the engine object's SQLite): a durable write's
//                 cost on this machine, beside the keyed add's
//
// Options (env): BENCH_DURATION_MS (3000), BENCH_WARMUP_MS (1000), BENCH_RUNS (3),
// BENCH_KEYED_CALLERS ("1,10").
import { startEngine } from "@iii-edge/test-support/engine-server";
import { closedLoop, RUNS, runMain, sleep } from "./callers.ts";
import { fmt, median } from "./stats.ts";

const CALLERS = (process.env.BENCH_KEYED_CALLERS ?? "1,10").split(",").map(Number);
const RUN_ID = crypto.randomUUID().slice(0, 8);

interface Kind {
  name: string;
  frame(i: number, seq: number): string;
}
const call = (i: number, seq: number, function_id: string, data: unknown) =>
  JSON.stringify({ type: "invokefunction", invocation_id: `c${i}-${seq}`, function_id, data });
const KINDS: Kind[] = [
  { name: "routed edge", frame: (i, seq) => call(i, seq, "edge::hello", { name: `c${i}` }) },
  { name: "keyed get", frame: (i, seq) => call(i, seq, "counter::get", { user_id: `bench-${RUN_ID}-${i}` }) },
  { name: "keyed add", frame: (i, seq) => call(i, seq, "counter::add", { user_id: `bench-${RUN_ID}-${i}` }) },
  { name: "one key", frame: (i, seq) => call(i, seq, "counter::add", { user_id: `bench-${RUN_ID}-shared` }) },
  // A durable write through the engine itself, for what a keyed add's write costs here.
  { name: "state write", frame: (i, seq) => call(i, seq, "state::set", { scope: `bench-${RUN_ID}`, key: `k${i}`, value: seq }) },
];

function openSocket(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.addEventListener("open", () => resolve(ws), { once: true });
    ws.addEventListener("error", () => reject(new Error(`could not open ${url}`)), { once: true });
  });
}

interface Run {
  rps: number;
  p50: number;
  p99: number;
  failures: number;
}

async function measure(wsUrl: string, kind: Kind, n: number): Promise<Run> {
  const sockets = await Promise.all(Array.from({ length: n }, () => openSocket(`${wsUrl}/`)));
  await sleep(50); // the workerregistered frames first
  const r = await closedLoop(
    sockets.map((ws) => ({
      send: (text: string) => ws.send(text),
      onText: (fn: (text: string) => void) =>
        ws.addEventListener("message", (ev) => {
          if (typeof ev.data === "string") fn(ev.data);
        }),
    })),
    { frame: kind.frame, failureLabel: `${kind.name} failed` },
  );
  for (const ws of sockets) ws.close();
  return r;
}

async function main(): Promise<void> {
  const engine = await startEngine({ env: { HARNESS_DISABLE: "" } });
  try {
    // Every kind answers once before timing starts (manifests loaded, objects created).
    for (const kind of KINDS) {
      const r = await measure(engine.wsUrl, kind, 1);
      if (r.failures) throw new Error(`${kind.name} fails: is the demo keyed counter (EDGE_KEYED) in EDGE_HOSTS?`);
    }
    console.log(`keyed calls vs a routed call to a Worker-hosted function (engine ${engine.url}); callers in this process`);
    const results = new Map<string, Run[]>();
    for (let run = 1; run <= RUNS; run++) {
      for (const n of CALLERS) {
        // Alternate the order run by run so drift does not favour one kind.
        const order = run % 2 ? KINDS : [...KINDS].reverse();
        for (const kind of order) {
          const r = await measure(engine.wsUrl, kind, n);
          const key = `${kind.name}|${n}`;
          results.set(key, [...(results.get(key) ?? []), r]);
          console.log(
            `  run ${run}  ${kind.name.padEnd(12)} ${String(n).padStart(3)} callers  ${fmt(r.rps, 0).padStart(6)} rt/s  p50 ${fmt(r.p50, 2).padStart(6)} ms  p99 ${fmt(r.p99, 2).padStart(6)} ms${r.failures ? `  ${r.failures} failed` : ""}`,
          );
        }
      }
    }
    console.log(
      `\nMedians of ${RUNS} runs; ratios against "routed edge" with the same callers in the same run (per-run ratios paired by run):`,
    );
    console.log("| callers | kind | rt/s | p50 | p99 | p50 vs routed | per-run p50 ratios |");
    console.log("|--:|---|--:|--:|--:|--:|--:|");
    for (const n of CALLERS) {
      const base = results.get(`routed edge|${n}`) ?? [];
      for (const kind of KINDS) {
        const rs = results.get(`${kind.name}|${n}`) ?? [];
        const paired = rs.map((r, i) => r.p50 / (base[i]?.p50 ?? Number.NaN));
        console.log(
          `| ${n} | ${kind.name} | ${fmt(median(rs.map((r) => r.rps)), 0)} | ${fmt(median(rs.map((r) => r.p50)), 2)} ms | ${fmt(median(rs.map((r) => r.p99)), 2)} ms | ${kind.name === "routed edge" ? "1.00×" : `${fmt(median(paired), 2)}×`} | ${kind.name === "routed edge" ? "—" : paired.map((x) => fmt(x, 2)).join(" / ")} |`,
        );
      }
    }
  } finally {
    await engine.stop();
  }
}

runMain(main);
