#!/usr/bin/env node
// The no-op handler of queue-flood-bench.ts, in its own process: an iii-sdk@0.22.1 worker that
// registers `bench::sink` (answers null) and counts what reaches it. The bench (its parent, over
// IPC) sends {expect: n} before a flood; when the n-th delivery carrying `t0` has arrived the
// handler answers {done: true, at: Date.now(), latencies} (each latency = arrival − the `t0` the
// producer stamped at enqueue; one machine, one clock). Calls without `t0` (the routed baseline)
// are answered and not counted. It also serves `GET /bench/json` (an http trigger on `bench::http`)
// answering the JSON of the plain Worker route (baseline.ts). usage: node flood-handler.mjs <ws url>
import { registerWorker } from "iii-sdk";
import { BENCH_PLAIN_BODY } from "./baseline.ts";

const [url] = process.argv.slice(2);
if (!url || !process.send) {
  console.error("usage: forked by queue-flood-bench.ts with the engine's ws url");
  process.exit(2);
}
let expect = 0;
let latencies = [];
const iii = registerWorker(url, { workerName: "bench-flood-handler", otel: { enabled: false } });
iii.registerFunction("bench::sink", async (data) => {
  if (expect > 0 && data && typeof data.t0 === "number") {
    latencies.push(Date.now() - data.t0);
    if (latencies.length === expect) {
      process.send({ done: true, at: Date.now(), latencies });
      expect = 0;
      latencies = [];
    }
  }
  return null;
});
// The http-trigger side of the bench: the same JSON the plain Worker route answers.
iii.registerFunction("bench::http", async () => ({ status_code: 200, body: BENCH_PLAIN_BODY }));
iii.registerTrigger({ type: "http", function_id: "bench::http", config: { api_path: "bench/json" } });
process.on("message", (m) => {
  if (m && typeof m.expect === "number") {
    expect = m.expect;
    latencies = [];
    process.send({ ready: true });
  }
});
process.on("SIGTERM", () => process.exit(0));
process.on("disconnect", () => process.exit(0));
