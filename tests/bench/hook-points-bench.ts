// Hooks at every point of a turn, measured (`node tests/bench/hook-points-bench.ts`): exactly
// `npm start` (the orchestrator inside the deployed Worker), a zero-latency OpenAI replay, a
// function that answers at once, and the function-call step of a turn (the model's first request →
// its second: round 1's post_generate, the call's pre_trigger and post_trigger, round 2's
// pre_generate) with
//   - nothing bound to any `harness::hook::*` type (the binding cache answers: no engine call), and
//   - one iii-sdk hook bound to each of the five points, answering `continue` at once.
// Each turn is paired with one whose call the policy denies right after it (no pre_trigger, no
// post_trigger, no call), and the ratio of the medians is printed beside the same run's baseline:
// the nothing-bound step over the denied step. The machine is shared: read ratios, not absolutes.
// Options (env): BENCH_RUNS (3), BENCH_TURNS (30 per kind and run), BENCH_WARMUP_TURNS (5).
import { registerWorker, type IIIClient } from "iii-sdk";
import { BENCH_RULES, functionSteps, registered, settledAt, shutdownSettled, startHarnessBench, triggerCount } from "./harness-engine.ts";
import { fmt, median, pct } from "./stats.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const TURNS = Number(process.env.BENCH_TURNS ?? 30);
const WARMUP = Number(process.env.BENCH_WARMUP_TURNS ?? 5);
/** The orchestrator's HOOK_BINDINGS_TTL_MS: after binding or unbinding, a sample starts only once
 * any isolate's cache must have seen the change. */
const BINDINGS_TTL_MS = 5_000;

/** The five points (protocol/src/harness/hooks.ts); named here so the bench runs on plain `node`. */
const HOOK_POINTS = ["pre_turn", "pre_generate", "post_generate", "pre_trigger", "post_trigger"] as const;

const bench = await startHarnessBench("hook-points-bench", { rules: BENCH_RULES });
const { replay, engine, iii } = bench;
const app = registerWorker(engine.wsUrl, { workerName: "hook-points-bench-app", otel: { enabled: false } });
app.registerFunction("bench::echo", async (p: unknown) => p);

const hookBindings = () => triggerCount(iii, { search: "harness::hook::" });

/** One iii-sdk worker with a hook on each of the five points, answering `continue` at once. */
async function bind(): Promise<IIIClient> {
  const hooks = registerWorker(engine.wsUrl, { workerName: "hook-points-bench-hooks", otel: { enabled: false } });
  for (const point of HOOK_POINTS) {
    hooks.registerFunction(`benchhooks::${point}`, async () => ({ decision: "continue" }));
    hooks.registerTrigger({ type: `harness::hook::${point}`, function_id: `benchhooks::${point}`, config: {} });
  }
  await settledAt("the hooks bound", hookBindings, HOOK_POINTS.length, BINDINGS_TTL_MS);
  return hooks;
}
const unbind = (hooks: IIIClient) => shutdownSettled(hooks, "the hooks gone", hookBindings, BINDINGS_TTL_MS);

const functionStep = functionSteps(bench, "hook-points-bench");

try {
  await registered(iii, ["bench::echo", "run::start", "provider::openai::stream"]);
  console.log(
    `iii-edge hook points bench: npm start (built-in workers in the deployed Worker), zero-latency OpenAI replay, ${RUNS} runs × ${TURNS} turn pairs per kind (+${WARMUP} warm-up)`,
  );
  for (let i = 0; i < WARMUP; i++) await functionStep("warm");
  type Run = { none: number[]; noneDenied: number[]; five: number[]; fiveDenied: number[] };
  const runs: Run[] = [];
  const pairs = async (kind: string, raw: number[], denied: number[]) => {
    for (let i = 0; i < TURNS; i++) {
      raw.push(await functionStep(kind));
      denied.push(await functionStep(`${kind}-denied`, "denied::call"));
    }
  };
  for (let run = 1; run <= RUNS; run++) {
    const r: Run = { none: [], noneDenied: [], five: [], fiveDenied: [] };
    await pairs("none", r.none, r.noneDenied);
    const hooks = await bind();
    for (let i = 0; i < WARMUP; i++) await functionStep("warm-bound");
    await pairs("five", r.five, r.fiveDenied);
    await unbind(hooks);
    runs.push(r);
    console.log(
      `  run ${run}  function-call step: nothing bound p50 ${fmt(median(r.none))} ms (denied call ${fmt(median(r.noneDenied))} ms, ratio ${fmt(median(r.none) / median(r.noneDenied), 2)}), ` +
        `a hook on each point p50 ${fmt(median(r.five))} ms (denied call ${fmt(median(r.fiveDenied))} ms, ratio ${fmt(median(r.five) / median(r.fiveDenied), 2)})`,
    );
  }
  const m = (f: (r: Run) => number) => median(runs.map(f));
  console.log(`\nMedians of ${RUNS} runs:`);
  console.log("| measure | p50 | p99 | ratio to the same run's denied call |");
  console.log("|---|--:|--:|--:|");
  console.log(
    `| function-call step, nothing bound | ${fmt(m((r) => median(r.none)))} ms | ${fmt(m((r) => pct(r.none, 99)))} ms | ${fmt(
      m((r) => median(r.none) / median(r.noneDenied)),
      2,
    )} |`,
  );
  console.log(
    `| function-call step, one hook on each of the five points | ${fmt(m((r) => median(r.five)))} ms | ${fmt(m((r) => pct(r.five, 99)))} ms | ${fmt(
      m((r) => median(r.five) / median(r.fiveDenied)),
      2,
    )} |`,
  );
  console.log(
    `| baseline: the step of a call the policy denies (nothing bound / bound) | ${fmt(m((r) => median(r.noneDenied)))} / ${fmt(m((r) => median(r.fiveDenied)))} ms | | 1.00 |`,
  );
} finally {
  await Promise.allSettled([iii.shutdown(), app.shutdown()]);
  await engine.stop();
  await replay.close();
}
