// `node tests/bench/budget-bench.ts` (alone, not part of `npm run bench`): what a budget costs a
// turn, on exactly `npm start` (the built-in budget-tracker inside the deployed Worker) with a
// zero-latency OpenAI replay. The same one-round turn runs with and without `budget_id`,
// alternating, and is timed in three parts a UI following the turn (a `/_iii/streams` socket on
// `agent::events`) would see:
//   - before the model: POST /api/turns → the provider received the request (with a budget:
//     `budget::check` with its hold, the step's one extra call);
//   - after the model: the provider received the request → `agent_end` at the UI (with a budget:
//     `budget::record` of the usage);
//   - the whole turn: POST → `agent_end`.
// Plus the functions alone, called from an iii-sdk client: `budget::check` (a read, and with a
// hold: a compare-and-set) and `budget::record`.
// Options (env): BENCH_RUNS (3), BENCH_TURNS (30 per kind and run), BENCH_WARMUP_TURNS (5), BENCH_CALLS (200).
import { replyWith, say } from "@iii-edge/test-support/provider-replay";
import { followTurn, postTurn, registered, startHarnessBench, toPerf } from "./harness-engine.ts";
import { pct, median, fmt } from "./stats.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const TURNS = Number(process.env.BENCH_TURNS ?? 30);
const WARMUP = Number(process.env.BENCH_WARMUP_TURNS ?? 5);
const CALLS = Number(process.env.BENCH_CALLS ?? 200);

const { replay, engine, iii } = await startHarnessBench("budget-bench");
replay.setDefault("openai", replyWith({ usage: { input: 1_000, output: 50 } }, say("Hello from the bench.")));

interface Sample {
  before: number;
  after: number;
  turn: number;
}

let seq = 0;
async function turn(budgetId: string | undefined): Promise<Sample> {
  const sid = `budget-bench-${budgetId ? "b" : "n"}-${++seq}`;
  const n = replay.requestsFor("openai").length;
  const f = followTurn(engine, sid);
  await f.joined;
  const t0 = performance.now();
  await postTurn(engine, sid, budgetId ? { budget_id: budgetId } : {});
  const end = await f;
  const req = replay.requestsFor("openai")[n];
  if (!req) throw new Error(`turn ${sid}: the provider saw no request`);
  const called = toPerf(req.received_at);
  return { before: called - t0, after: end - called, turn: end - t0 };
}

async function calls(fn: string, payload: (i: number) => unknown): Promise<number[]> {
  const xs: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const t0 = performance.now();
    await iii.trigger({ function_id: fn, payload: payload(i) });
    xs.push(performance.now() - t0);
  }
  return xs;
}

try {
  await registered(iii, ["run::start", "budget::check", "provider::openai::stream"]);
  const { budget_id } = (await iii.trigger({ function_id: "budget::create", payload: { ceiling_usd: 1_000_000, period: "month" } })) as {
    budget_id: string;
  };
  console.log(
    `iii-edge budget bench: npm start (built-in workers in the deployed Worker), zero-latency OpenAI replay, ${RUNS} runs × ${TURNS} turns with and without budget_id (+${WARMUP} warm-up each)`,
  );
  for (let i = 0; i < WARMUP; i++) {
    await turn(undefined);
    await turn(budget_id);
  }
  const runs: { plain: Sample[]; budget: Sample[] }[] = [];
  for (let run = 1; run <= RUNS; run++) {
    const r = { plain: [] as Sample[], budget: [] as Sample[] };
    for (let i = 0; i < TURNS; i++) {
      // Alternate which goes first, so drift on the shared box hits both alike.
      if (i % 2 === 0) {
        r.plain.push(await turn(undefined));
        r.budget.push(await turn(budget_id));
      } else {
        r.budget.push(await turn(budget_id));
        r.plain.push(await turn(undefined));
      }
    }
    runs.push(r);
    const p = (xs: Sample[], k: keyof Sample) => fmt(median(xs.map((s) => s[k])));
    console.log(
      `  run ${run}  turn p50 ${p(r.plain, "turn")} → ${p(r.budget, "turn")} ms  before-model p50 ${p(r.plain, "before")} → ${p(r.budget, "before")} ms  after-model p50 ${p(r.plain, "after")} → ${p(r.budget, "after")} ms`,
    );
  }
  const m = (kind: "plain" | "budget", k: keyof Sample) => median(runs.map((r) => median(r[kind].map((s) => s[k]))));
  const m99 = (kind: "plain" | "budget", k: keyof Sample) =>
    median(
      runs.map((r) =>
        pct(
          r[kind].map((s) => s[k]),
          99,
        ),
      ),
    );

  const read = await calls("budget::check", () => ({ budget_id, estimated_cost_micros: 10 }));
  const hold = await calls("budget::check", (i) => ({
    budget_id,
    estimate: { provider: "openai", model: "gpt-4o", input_tokens: 1_000, output_tokens: 1_024 },
    hold_id: `bench:${i}`,
  }));
  const record = await calls("budget::record", (i) => ({
    budget_id,
    record_id: `bench:${i}`,
    provider: "openai",
    model: "gpt-4o",
    usage: { input: 1_000, output: 50 },
  }));
  const routed = await calls("engine::functions::info", () => ({ function_id: "budget::check" })).catch(() => [] as number[]);

  console.log(`\nMedians of ${RUNS} runs (p50 of each run; p99 likewise):`);
  console.log("| measure | without budget | with budget_id | Δ p50 | ratio |");
  console.log("|---|--:|--:|--:|--:|");
  for (const [label, k] of [
    ["whole turn (POST → agent_end)", "turn"],
    ["before the model (POST → provider request: + budget::check)", "before"],
    ["after the model (provider request → agent_end: + budget::record)", "after"],
  ] as const) {
    const a = m("plain", k);
    const b = m("budget", k);
    console.log(
      `| ${label} | ${fmt(a)} ms (p99 ${fmt(m99("plain", k))}) | ${fmt(b)} ms (p99 ${fmt(m99("budget", k))}) | ${fmt(b - a)} ms | ${fmt(b / a, 2)} |`,
    );
  }
  console.log("\n| function, from an iii-sdk client | p50 | p99 |");
  console.log("|---|--:|--:|");
  console.log(`| budget::check, no hold (reads) | ${fmt(median(read), 2)} ms | ${fmt(pct(read, 99), 2)} ms |`);
  console.log(`| budget::check with estimate + hold (prices, CAS) | ${fmt(median(hold), 2)} ms | ${fmt(pct(hold, 99), 2)} ms |`);
  console.log(`| budget::record of usage (prices, CAS) | ${fmt(median(record), 2)} ms | ${fmt(pct(record, 99), 2)} ms |`);
  if (routed.length > 0)
    console.log(`| engine::functions::info (a built-in, for scale) | ${fmt(median(routed), 2)} ms | ${fmt(pct(routed, 99), 2)} ms |`);
} finally {
  await iii.shutdown();
  await engine.stop();
  await replay.close();
}
