// What the Engine object's constructor path costs with 1,000 functions and 200 trigger bindings
// stored, in plain Node (node:sqlite in a file-less DB shared by two "instances", as an eviction
// leaves SQLite behind): the core's constructor (catalog load), installEngine (built-ins, queues,
// cron, http, …) and start() (bindings re-announced, dead owners cleaned, alarm armed), then the
// first routed call. CPU ms, medians of ROUNDS wakes. Not part of `npm run bench`; usage:
//   node --conditions=iii-edge-source tests/bench/wake-micro.ts
import { DatabaseSync } from "node:sqlite";
import type { EngineFrame } from "@iii-edge/protocol";
import { EngineCore } from "@iii-edge/engine-do/core/engine.ts";
import { installEngine } from "@iii-edge/engine-do/core/install.ts";
import type { Conn } from "@iii-edge/engine-do/core/ports.ts";
import { memoryPorts } from "./micro-core.ts";
import { fmt, median } from "./stats.ts";

const ROUNDS = Number(process.env.MICRO_ROUNDS ?? 15);
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const db = new DatabaseSync(":memory:");
const ports = () => memoryPorts({ db });
const QUEUES =
  '{"default":{"backend":"cloudflare"},"jobs":{"backend":"durable","concurrency":10},"turns":{"backend":"durable","type":"fifo","message_group_field":"session_id","concurrency":50}}';
const conn = (id: string, onFrame: (f: EngineFrame) => void = () => {}): Conn => ({
  workerId: id,
  send: (f) => (onFrame(f), true),
  close() {},
});

// The first instance: an owner registers everything.
let first = new EngineCore(ports());
installEngine(first, { QUEUES });
first.start([]);
const owner = conn("owner");
const caller = conn("caller");
first.connect(owner, "o");
first.connect(caller, "c");
for (let i = 0; i < 1000; i++)
  first.message(
    owner,
    JSON.stringify({ type: "registerfunction", id: `wake::f${i}`, description: `function ${i}`, request_format: { type: "object" } }),
  );
for (let i = 0; i < 200; i++) {
  const k = i % 5;
  const [trigger_type, config] =
    k < 2 ? ["http", { api_path: `bench/wake/r${i}` }] : k < 4 ? ["state", { scope: `s${i}` }] : ["cron", { expression: "0 0 1 1 *" }];
  first.message(owner, JSON.stringify({ type: "registertrigger", id: `b${i}`, trigger_type, function_id: `wake::f${i}`, config }));
}
await new Promise((r) => setTimeout(r, 50));

const phases: Record<string, number[]> = { construct: [], install: [], start: [], firstCall: [], total: [] };
for (let r = 0; r < ROUNDS + 2; r++) {
  const t0 = cpuMs();
  const core = new EngineCore(ports());
  const t1 = cpuMs();
  installEngine(core, { QUEUES });
  const t2 = cpuMs();
  let answered!: () => void;
  const got = new Promise<void>((res) => (answered = res));
  const o = conn("owner", (f) => {
    if (f.type === "invokefunction")
      core.message(
        o,
        JSON.stringify({ type: "invocationresult", invocation_id: f.invocation_id, function_id: f.function_id, result: null }),
      );
  });
  const c = conn("caller", (f) => f.type === "invocationresult" && answered());
  core.start([o, c]);
  const t3 = cpuMs();
  core.message(c, JSON.stringify({ type: "invokefunction", invocation_id: `w${r}`, function_id: "wake::f0", data: {} }));
  await got;
  const t4 = cpuMs();
  if (r < 2) continue; // warm-up (JIT)
  phases.construct!.push(t1 - t0);
  phases.install!.push(t2 - t1);
  phases.start!.push(t3 - t2);
  phases.firstCall!.push(t4 - t3);
  phases.total!.push(t4 - t0);
  first = core;
}
console.log(`wake with 1,000 functions and 200 bindings stored (Node ${process.version}), CPU ms, medians of ${ROUNDS}:`);
for (const [k, xs] of Object.entries(phases)) console.log(`  ${k.padEnd(10)} ${fmt(median(xs), 2)} ms`);
process.exit(0);
