// What a worker's tracer (../src/telemetry.ts) costs per span, in plain Node: a span made current
// with `withSpan` (AsyncLocalStorage, as both worker surfaces do), four attributes, an event, ended,
// then flushed as OTLP/JSON frames to a transport that only counts bytes — beside the baseline of
// the same run: encoding one `invokefunction` frame of the same call (what every call already costs
// the SDK). A turn makes about 14 harness spans (tests/harness/trace.test.ts), so the per-turn
// figure is 14 spans. Run by `npm run bench`; alone:
// node --conditions=iii-edge-source sdk-edge/bench/tracer-micro.ts
import { AsyncLocalStorage } from "node:async_hooks";
import type { TraceFields } from "@iii-edge/sdk-edge/client";
import { createTracer } from "@iii-edge/sdk-edge/telemetry";
import { fmt, median } from "../../tests/bench/stats.ts";

const SPANS = Number(process.env.MICRO_SPANS ?? 20_000);
const ROUNDS = Number(process.env.MICRO_ROUNDS ?? 7);
/** Harness spans of one turn with one approved function call (the acceptance test's tree). */
const SPANS_PER_TURN = 14;
/** Spans per flush: a Worker flushes per invocation, Node every 200 ms; 500 is a busy step's worth. */
const FLUSH_EVERY = 500;
const PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

const als = new AsyncLocalStorage<TraceFields>();
let _bytes = 0;
const tracer = createTracer({
  serviceName: "bench",
  store: { run: (f, fn) => als.run(f, fn), get: () => als.getStore() },
  transport: (frame) => ((_bytes += frame.length), true),
  flush: "manual",
});

async function spansRound(): Promise<number> {
  const t0 = performance.now();
  await als.run({ traceparent: PARENT }, async () => {
    for (let i = 0; i < SPANS; i++) {
      await tracer.withSpan(
        "execute_tool ledger::record",
        {
          attributes: {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "ledger::record",
            "gen_ai.tool.call.id": `call-${i}`,
            "iii.session.id": "s-1",
          },
        },
        async (span) => {
          span.addEvent("dispatched");
        },
      );
      // Flushed as a worker would be (well inside the buffer bound: nothing is dropped).
      if (i % FLUSH_EVERY === FLUSH_EVERY - 1) await tracer.flush();
    }
  });
  await tracer.flush();
  return ((performance.now() - t0) * 1000) / SPANS;
}

async function baselineRound(): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < SPANS; i++) {
    // What the client does for every call: build and encode its frame (core.ts `call`).
    const frame = {
      type: "invokefunction",
      function_id: "ledger::record",
      invocation_id: `inv-${i}`,
      data: { amount: 42, session_id: "s-1", function_call_id: `call-${i}` },
      traceparent: PARENT,
      timeout_ms: 30_000,
    };
    _bytes += JSON.stringify(frame).length;
    await Promise.resolve();
  }
  return ((performance.now() - t0) * 1000) / SPANS;
}

// Warm-up, then alternate so drift on a shared machine hits both alike.
await spansRound();
await baselineRound();
const span: number[] = [];
const base: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  base.push(await baselineRound());
  span.push(await spansRound());
}
const s = median(span);
const b = median(base);
console.log(`\nworker tracer (sdk-edge/src/telemetry.ts): ${SPANS} spans × ${ROUNDS} rounds, medians`);
console.log(`  baseline: encode one call frame      ${fmt(b, 2)} µs`);
console.log(`  one span (withSpan, 4 attrs, event, OTLP/JSON)  ${fmt(s, 2)} µs  = ${fmt(s / b, 1)}× the baseline`);
console.log(`  a turn's ${SPANS_PER_TURN} harness spans            ${fmt((s * SPANS_PER_TURN) / 1000, 3)} ms of worker CPU`);
if (tracer.dropped.spans > 0) console.log(`  (dropped ${tracer.dropped.spans} spans at the buffer bound: the figure is too low)`);
