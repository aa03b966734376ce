// `npm run bench` (the harness part; alone: `npm run -s bench:harness`): what the agent harness adds
// to a turn, measured on exactly `npm start` (every built-in worker inside the deployed Worker) with
// a zero-latency provider replay, beside the raw routed invoke of the same run:
//   - TTFT overhead: the provider received the request and answered at once → the first text delta
//     reaches a UI following the turn (a `/_iii/streams` socket joined to `agent::events`);
//   - per assistant step: the provider received the request → that round's `message_complete`
//     reaches the UI (parse, channel, events, transcript append, with no model time);
//   - per function-call step: the model's first request → its second one, for a round that calls
//     one allowed function (policy check, checkpoints, the routed call itself, results appended,
//     steering check, the next round's prompt) — the target answers at once;
//   - routed invoke: an iii-sdk caller → engine → iii-sdk worker → back, the same engine.
// Options (env): BENCH_RUNS (3), BENCH_TURNS (30 per kind and run), BENCH_WARMUP_TURNS (5).
import { registerWorker } from "iii-sdk";
import { callAgentTrigger, reply, say } from "@iii-edge/test-support/provider-replay";
import { followedTurn, registered, startHarnessBench, toPerf } from "./harness-engine.ts";
import { pct, median, fmt } from "./stats.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const TURNS = Number(process.env.BENCH_TURNS ?? 30);
const WARMUP = Number(process.env.BENCH_WARMUP_TURNS ?? 5);
/** Targets of the keyed-session issue: the function-call step as a multiple of the same run's routed
 * invoke (machine speed cancels out), the other two in milliseconds of harness overhead. */
const TARGET_FUNCTION_STEP_X_ROUTED = 8;
const TARGET_ASSISTANT_STEP_MS = 3;
const TARGET_TTFT_OVERHEAD_MS = 3;
const ROUTED_CALLS = 300;

const { replay, engine, iii } = await startHarnessBench("harness-bench", { rules: "version: 1\nrules:\n  - 'bench::*'\n" });
const app = registerWorker(engine.wsUrl, { workerName: "bench-app", otel: { enabled: false } });
app.registerFunction("bench::echo", async (p: unknown) => p);

let turnSeq = 0;
async function turn(kind: "plain" | "call"): Promise<{ ttft: number; assistantStep: number; functionStep?: number }> {
  const sid = `bench-${kind}-${++turnSeq}`;
  const answers =
    kind === "plain"
      ? [reply(say("Hello from the bench."))]
      : [reply(callAgentTrigger("bench::echo", { n: turnSeq }, `c-${turnSeq}`)), reply(say("Echoed."))];
  const completes: number[] = [];
  let firstDelta: number | undefined;
  const reqs = await followedTurn({ replay, engine }, sid, answers, (e, now) => {
    if (e.type === "message_update" && e.llm_event?.type === "text_delta" && firstDelta === undefined) firstDelta = now;
    if (e.type === "message_complete") completes.push(now);
  });
  const first = toPerf(reqs[0]!.received_at);
  const out: { ttft: number; assistantStep: number; functionStep?: number } = {
    ttft: (firstDelta ?? NaN) - first,
    assistantStep: (completes[0] ?? NaN) - first,
  };
  if (kind === "call") out.functionStep = reqs[1]!.received_at - reqs[0]!.received_at;
  return out;
}

async function routed(): Promise<number[]> {
  const xs: number[] = [];
  for (let i = 0; i < ROUTED_CALLS; i++) {
    const t0 = performance.now();
    await iii.trigger({ function_id: "bench::echo", payload: { i } });
    xs.push(performance.now() - t0);
  }
  return xs;
}

try {
  await registered(iii, ["bench::echo", "run::start", "provider::openai::stream"]);
  console.log(
    `iii-edge harness bench: npm start (built-in workers in the deployed Worker), zero-latency OpenAI replay, ${RUNS} runs × ${TURNS} turns per kind (+${WARMUP} warm-up)`,
  );
  for (let i = 0; i < WARMUP; i++) {
    await turn("plain");
    await turn("call");
  }
  await routed();
  const runs: { ttft: number[]; step: number[]; fn: number[]; routed: number[] }[] = [];
  for (let run = 1; run <= RUNS; run++) {
    const r = { ttft: [] as number[], step: [] as number[], fn: [] as number[], routed: await routed() };
    for (let i = 0; i < TURNS; i++) {
      const p = await turn("plain");
      r.ttft.push(p.ttft);
      r.step.push(p.assistantStep);
      const c = await turn("call");
      r.fn.push(c.functionStep!);
    }
    runs.push(r);
    console.log(
      `  run ${run}  routed p50 ${fmt(median(r.routed), 2)} ms  TTFT overhead p50 ${fmt(median(r.ttft))} / p99 ${fmt(pct(r.ttft, 99))} ms  assistant step p50 ${fmt(median(r.step))} / p99 ${fmt(pct(r.step, 99))} ms  function-call step p50 ${fmt(median(r.fn))} / p99 ${fmt(pct(r.fn, 99))} ms`,
    );
  }
  const m = (f: (r: (typeof runs)[number]) => number) => median(runs.map(f));
  const routedP50 = m((r) => median(r.routed));
  const fnP50 = m((r) => median(r.fn));
  const ttftP50 = m((r) => median(r.ttft));
  const stepP50 = m((r) => median(r.step));
  console.log(`\nMedians of ${RUNS} runs:`);
  console.log("| measure | p50 | p99 | × routed invoke p50 |");
  console.log("|---|--:|--:|--:|");
  console.log(
    `| routed invoke (iii-sdk → engine → iii-sdk) | ${fmt(routedP50, 2)} ms | ${fmt(
      m((r) => pct(r.routed, 99)),
      2,
    )} ms | 1 |`,
  );
  console.log(
    `| TTFT overhead (provider answered → first delta at the UI) | ${fmt(ttftP50)} ms | ${fmt(m((r) => pct(r.ttft, 99)))} ms | ${fmt(ttftP50 / routedP50)} |`,
  );
  console.log(
    `| assistant step (provider answered → message_complete at the UI) | ${fmt(stepP50)} ms | ${fmt(m((r) => pct(r.step, 99)))} ms | ${fmt(stepP50 / routedP50)} |`,
  );
  console.log(
    `| function-call step (model's request → its next, one allowed call) | ${fmt(fnP50)} ms | ${fmt(m((r) => pct(r.fn, 99)))} ms | ${fmt(fnP50 / routedP50)} |`,
  );
  console.log("");
  const verdict = (ok: boolean) => (ok ? "PASS" : "MISS");
  const fnX = fnP50 / routedP50;
  console.log(
    `function-call step p50: ${fmt(fnX)}× routed (target ≤ ${TARGET_FUNCTION_STEP_X_ROUTED}×) ${verdict(fnX <= TARGET_FUNCTION_STEP_X_ROUTED)}`,
  );
  console.log(
    `assistant step p50: ${fmt(stepP50)} ms (target ≤ ${TARGET_ASSISTANT_STEP_MS} ms) ${verdict(stepP50 <= TARGET_ASSISTANT_STEP_MS)}`,
  );
  console.log(
    `TTFT overhead p50: ${fmt(ttftP50)} ms (target ≤ ${TARGET_TTFT_OVERHEAD_MS} ms) ${verdict(ttftP50 <= TARGET_TTFT_OVERHEAD_MS)}`,
  );
} finally {
  await Promise.allSettled([iii.shutdown(), app.shutdown()]);
  await engine.stop();
  await replay.close();
}
