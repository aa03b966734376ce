// Function-call hooks, measured alone (`node tests/bench/hooks-bench.ts`, like harness-bench.ts):
// exactly `npm start` (the orchestrator and hook-fanout inside the deployed Worker), a zero-latency
// OpenAI replay, a function that answers at once, and
//   - the function-call step (the model's first request → its second, for a round that calls one
//     allowed function) with nobody subscribed to the hook topics, vs with one iii-sdk subscriber
//     on each of `agent::before_function_call` and `agent::after_function_call` answering at once;
//   - `hook-fanout::publish_collect` called directly by an iii-sdk client, with no subscriber and
//     with one, to price what one hook costs.
// Each dispatched turn is paired with a turn whose call the policy denies (policy asked, nothing
// dispatched, no hooks) right after it; the pair's difference cancels the drift of a shared box.
// The saving per call is what the subscriber-presence short-circuit spares a call when nobody
// subscribes (two publish-and-collect rounds), and beside it what a collector that waits for its
// deadline would have cost (a 500 ms after-hook deadline; or 10 s on both hooks).
// Options (env): BENCH_RUNS (3), BENCH_TURNS (30 per kind and run), BENCH_WARMUP_TURNS (5),
// BENCH_DIRECT_CALLS (200).
import { registerWorker, type IIIClient } from "iii-sdk";
import { BENCH_RULES, functionSteps, settledAt, shutdownSettled, startHarnessBench, triggerCount, waitFor } from "./harness-engine.ts";
import { pct, median, fmt } from "./stats.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const TURNS = Number(process.env.BENCH_TURNS ?? 30);
const WARMUP = Number(process.env.BENCH_WARMUP_TURNS ?? 5);
const DIRECT_CALLS = Number(process.env.BENCH_DIRECT_CALLS ?? 200);
/** The orchestrator's PRESENCE_SETTLE_MS: after a subscriber comes or goes, lookups are uncached
 * this long; the samples start after it so each kind is measured in its steady state. */
const PRESENCE_SETTLE_MS = 1_000;
const BEFORE = "agent::before_function_call";
const AFTER = "agent::after_function_call";

const bench = await startHarnessBench("hooks-bench", { rules: BENCH_RULES });
const { replay, engine, iii } = bench;
const app = registerWorker(engine.wsUrl, { workerName: "hooks-bench-app", otel: { enabled: false } });
app.registerFunction("bench::echo", async (p: unknown) => p);

const functionIds = async () =>
  (
    (await iii.trigger({ function_id: "engine::functions::list", payload: { include_internal: true } })) as {
      functions: { function_id: string }[];
    }
  ).functions.map((f) => f.function_id);
const subscriberCount = () => triggerCount(iii, { trigger_type: "durable:subscriber" });

/** One iii-sdk worker subscribed to both hook topics, answering `{}` (no change) at once. */
async function subscribe(): Promise<IIIClient> {
  const hooks = registerWorker(engine.wsUrl, { workerName: "hooks-bench-subscriber", otel: { enabled: false } });
  for (const [fn, topic] of [
    ["benchhooks::before", BEFORE],
    ["benchhooks::after", AFTER],
  ] as const) {
    hooks.registerFunction(fn, async (env: { event_id: string; reply_stream: string }) => {
      await hooks.trigger({
        function_id: "stream::set",
        payload: { stream_name: env.reply_stream, group_id: env.event_id, item_id: fn, data: {} },
      });
      return null;
    });
    hooks.registerTrigger({ type: "durable:subscriber", function_id: fn, config: { topic } });
  }
  await settledAt("the subscribers", subscriberCount, 2, PRESENCE_SETTLE_MS);
  return hooks;
}
const unsubscribe = (hooks: IIIClient) => shutdownSettled(hooks, "the subscribers gone", subscriberCount, PRESENCE_SETTLE_MS);

const functionStep = functionSteps(bench, "hooks-bench");

async function direct(topic: string): Promise<number[]> {
  const xs: number[] = [];
  for (let i = 0; i < DIRECT_CALLS; i++) {
    const t0 = performance.now();
    await iii.trigger({
      function_id: "hook-fanout::publish_collect",
      payload: { topic, payload: { i }, merge_rule: "first_block_wins", timeout_ms: 5_000 },
    });
    xs.push(performance.now() - t0);
  }
  return xs;
}

try {
  await waitFor("the harness and the bench app", async () => {
    const ids = await functionIds();
    return ["bench::echo", "run::start", "provider::openai::stream", "hook-fanout::publish_collect"].every((id) => ids.includes(id));
  });
  console.log(
    `iii-edge hooks bench: npm start (built-in workers in the deployed Worker), zero-latency OpenAI replay, ${RUNS} runs × ${TURNS} turns per kind (+${WARMUP} warm-up), ${DIRECT_CALLS} direct publish_collect calls per kind`,
  );
  for (let i = 0; i < WARMUP; i++) await functionStep("warm");
  const runs: { unsub: number[]; sub: number[]; unsubPaired: number[]; subPaired: number[]; directNone: number[]; directOne: number[] }[] =
    [];
  /** TURNS pairs: the dispatched call's step into `raw`, minus the denied call's after it into `paired`. */
  const pairs = async (kind: string, raw: number[], paired: number[]) => {
    for (let i = 0; i < TURNS; i++) {
      raw.push(await functionStep(kind));
      paired.push(raw.at(-1)! - (await functionStep(`${kind}-denied`, "denied::call")));
    }
  };
  for (let run = 1; run <= RUNS; run++) {
    const r = {
      unsub: [] as number[],
      sub: [] as number[],
      unsubPaired: [] as number[],
      subPaired: [] as number[],
      directNone: await direct("benchhooks::nobody"),
      directOne: [] as number[],
    };
    await pairs("unsub", r.unsub, r.unsubPaired);
    const hooks = await subscribe();
    for (let i = 0; i < WARMUP; i++) await functionStep("warm-sub");
    await pairs("sub", r.sub, r.subPaired);
    r.directOne = await direct(BEFORE);
    await unsubscribe(hooks);
    runs.push(r);
    console.log(
      `  run ${run}  function-call step: nobody subscribed p50 ${fmt(median(r.unsub))} / p99 ${fmt(pct(r.unsub, 99))} ms (${fmt(median(r.unsubPaired))} above a denied call), ` +
        `one subscriber per hook p50 ${fmt(median(r.sub))} / p99 ${fmt(pct(r.sub, 99))} ms (${fmt(median(r.subPaired))} above); ` +
        `publish_collect direct: no subscriber p50 ${fmt(median(r.directNone), 2)} ms, one p50 ${fmt(median(r.directOne), 2)} ms`,
    );
  }
  const m = (f: (r: (typeof runs)[number]) => number) => median(runs.map(f));
  const unsubP50 = m((r) => median(r.unsub));
  const subP50 = m((r) => median(r.sub));
  const unsubPaired = m((r) => median(r.unsubPaired));
  const subPaired = m((r) => median(r.subPaired));
  const noneP50 = m((r) => median(r.directNone));
  const oneP50 = m((r) => median(r.directOne));
  console.log(`\nMedians of ${RUNS} runs:`);
  console.log("| measure | p50 | p99 |");
  console.log("|---|--:|--:|");
  console.log(
    `| function-call step, nobody subscribed (short-circuit: no hook call) | ${fmt(unsubP50)} ms | ${fmt(m((r) => pct(r.unsub, 99)))} ms |`,
  );
  console.log(
    `| function-call step, one subscriber per hook (before + after, answering at once) | ${fmt(subP50)} ms | ${fmt(m((r) => pct(r.sub, 99)))} ms |`,
  );
  console.log(
    `| … nobody subscribed, above the paired denied call (dispatch + presence check) | ${fmt(unsubPaired)} ms | ${fmt(m((r) => pct(r.unsubPaired, 99)))} ms |`,
  );
  console.log(
    `| … one subscriber per hook, above the paired denied call (dispatch + two hook rounds) | ${fmt(subPaired)} ms | ${fmt(m((r) => pct(r.subPaired, 99)))} ms |`,
  );
  console.log(
    `| publish_collect from an iii-sdk client, no subscriber | ${fmt(noneP50, 2)} ms | ${fmt(
      m((r) => pct(r.directNone, 99)),
      2,
    )} ms |`,
  );
  console.log(
    `| publish_collect from an iii-sdk client, one subscriber (early exit) | ${fmt(oneP50, 2)} ms | ${fmt(
      m((r) => pct(r.directOne, 99)),
      2,
    )} ms |`,
  );
  console.log("");
  console.log(
    `two hooks with one subscriber each cost ${fmt(subPaired - unsubPaired)} ms per call (p50 of the paired differences; raw p50s ${fmt(subP50)} vs ${fmt(unsubP50)} ms): what the short-circuit spares a call when nobody subscribes; against an always-publishing orchestrator whose collector exits on 0 subscribers it still spares ≥ ${fmt(2 * noneP50, 2)} ms`,
  );
  console.log(
    `against a collector that waits for its deadline: 500 ms per call (500 ms after-hook deadline), 20 000 ms (10 s on both hooks)`,
  );
} finally {
  await Promise.allSettled([iii.shutdown(), app.shutdown()]);
  await engine.stop();
  await replay.close();
}
