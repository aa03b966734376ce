// The per-call CPU cost of tracing in plain Node, away from workerd's noise (as auth-micro.ts for
// the grant check): sequential routed calls through the engine core (fake ports, node:sqlite) with
// TRACING=off, TRACING=on (spans batched to a real SQLite trace store with the repo's D1
// migrations, through the same D1-shaped adaptor the tests use), on + OTLP export to a loopback
// HTTP sink, and both again with no trace rate limit (every call a span, every span exported). The Durable Object is single-threaded, so its CPU per call is what bounds rt/s; this
// is the engine's share of it. Run by `npm run bench` after trace-bench.ts; alone:
// node --conditions=iii-edge-source tests/bench/trace-micro.ts
import http from "node:http";
import type { AddressInfo } from "node:net";
import { EngineCore } from "@iii-edge/engine-do/core/engine.ts";
import { installEngine } from "@iii-edge/engine-do/core/install.ts";
import type { TelemetryVars } from "@iii-edge/engine-do/core/telemetry/config.ts";
import { EXPORT_BATCH } from "@iii-edge/engine-do/core/telemetry/exporter.ts";
import { encodeSpans } from "@iii-edge/engine-do/core/telemetry/otlp.ts";
import type { Span } from "@iii-edge/protocol/telemetry";
import { nodeD1 } from "@iii-edge/test-support/node-sql";
import { echoCalls, memoryPorts } from "./micro-core.ts";
import { median } from "./stats.ts";

const CALLS = Number(process.env.MICRO_CALLS ?? 20_000);
const ROUNDS = Number(process.env.MICRO_ROUNDS ?? 7);

const d1 = (discard = false) => nodeD1({ discardInserts: discard });

function setup(vars: TelemetryVars, discard = false) {
  // The clock runs 100× fast, so the per-connection frame limit (10,000/s) never drops a frame here.
  // Timers run as asked: the pipeline flushes as deployed (at 500 records or after 1 s), so the
  // store's and the exporter's batches are the size they are in the object, and the export
  // timeout is its real 10 s (100× sooner, a loaded machine's loopback POST timed out and was retried).
  const core = new EngineCore(memoryPorts({ clockRate: 100 }), {
    telemetry: { vars, db: d1(discard), fetch: (url, init) => fetch(url, init) },
  });
  installEngine(core, {});
  core.start([]);
  return { core, run: echoCalls(core) };
}

const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
});
await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
const sinkUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const variants = {
  off: setup({ TRACING: "off" }),
  on: setup({ TRACING: "on" }),
  onShare: setup({ TRACING: "on" }, true),
  export: setup({ TRACING: "on", OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl }),
  unlimited: setup({ TRACING: "on", TRACE_RATE_LIMIT: "0" }),
  unlimitedExport: setup({ TRACING: "on", TRACE_RATE_LIMIT: "0", OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl }),
};
type V = keyof typeof variants;
const names = Object.keys(variants) as V[];
for (const v of names) await variants[v].run(CALLS); // warm-up (JIT)
const perCall: Record<V, number[]> = { off: [], on: [], onShare: [], export: [], unlimited: [], unlimitedExport: [] };
for (let r = 0; r < ROUNDS; r++) for (const v of r % 2 ? [...names].reverse() : names) perCall[v].push(await variants[v].run(CALLS));
const stored = (await variants.on.core.telemetry.store!.counts()).spans;
const o = median(perCall.off),
  n = median(perCall.on),
  sh = median(perCall.onShare),
  e = median(perCall.export),
  u = median(perCall.unlimited),
  ue = median(perCall.unlimitedExport);
console.log(`\ntrace micro: engine core in Node ${process.version}, ${ROUNDS} rounds × ${CALLS} sequential routed calls, medians:`);
console.log(`  TRACING=off        ${o.toFixed(2)} µs/call`);
console.log(
  `  TRACING=on         ${n.toFixed(2)} µs/call  (+${(n - o).toFixed(2)} µs, ${(((n - o) / o) * 100).toFixed(1)} %; ${stored} spans stored, after retention)`,
);
console.log(
  `  on, object's share ${sh.toFixed(2)} µs/call  (+${(sh - o).toFixed(2)} µs: spans and their serialisation, SQLite left to D1)`,
);
console.log(
  `  on + OTLP export   ${e.toFixed(2)} µs/call  (+${(e - n).toFixed(2)} µs over on, ${(((e - n) / n) * 100).toFixed(1)} %; the loopback sink runs in this process too)`,
);
console.log(`  on, no rate limit  ${u.toFixed(2)} µs/call  (+${(u - o).toFixed(2)} µs over off: every call a span)`);
console.log(
  `  no limit + export  ${ue.toFixed(2)} µs/call  (+${(ue - u).toFixed(2)} µs over no limit, ${(((ue - u) / u) * 100).toFixed(1)} %: every span exported)`,
);

// The exporter's encoding alone, against a same-run baseline: JSON.stringify of the same spans (what
// the store's batch serialisation costs). Batches of EXPORT_BATCH spans shaped as an invoke hop's.
const batch: Span[] = Array.from({ length: EXPORT_BATCH }, (_, i) => ({
  trace_id: `6573a1b2${"0123456789abcdef01234567"}`,
  span_id: (0x1000000000000 + i).toString(16).padStart(16, "0"),
  parent_span_id: "00f067aa0ba902b7",
  name: "invoke bench::echo",
  kind: "client",
  start_time_unix_nano: (1_765_000_000_000 + i) * 1e6,
  end_time_unix_nano: (1_765_000_000_001 + i) * 1e6,
  status: "ok",
  attributes: {
    "rpc.system": "iii",
    "rpc.method": "bench::echo",
    "faas.invoked_name": "bench::echo",
    "iii.function_id": "bench::echo",
    "iii.function.kind": "worker",
    "iii.worker.id": `w-${i % 4}`,
    "iii.caller.worker_id": "caller",
    "iii.invocation_id": `c1-${i}`,
    "iii.namespace": "default",
  },
  service_name: "iii-engine",
  events: [],
}));
const encodeUs: number[] = [];
const ratio: number[] = [];
// Results are kept in a sink so the work cannot be optimised away.
let sink = 0;
for (let r = 0; r < 21; r++) {
  let t = performance.now();
  for (let k = 0; k < 20; k++) sink += encodeSpans(batch, { "service.namespace": "default" }).length;
  const te = performance.now() - t;
  t = performance.now();
  for (let k = 0; k < 20; k++) sink += JSON.stringify(batch).length;
  const ts = performance.now() - t;
  if (r === 0) continue; // warm-up
  encodeUs.push((te * 1000) / (20 * EXPORT_BATCH));
  ratio.push(te / ts);
}
const perSpan = (text: string) => Math.round(text.length / EXPORT_BATCH);
console.log(
  `  OTLP encoding      ${median(encodeUs).toFixed(2)} µs/span, ${(median(ratio) * 100).toFixed(0)} % of JSON.stringify of the same spans; ${perSpan(encodeSpans(batch))} bytes/span (stringify: ${perSpan(JSON.stringify(batch))}) (medians of 20 rounds of 20 batches of ${EXPORT_BATCH})`,
);
if (sink === 0) throw new Error("nothing was encoded");
server.close();
process.exit(0);
