// `npm run -s bench:harness-profile`: where a function-call step's time goes, read from the turn's
// own trace (docs/observability.md, "A turn as a trace") on exactly `npm start` with a zero-latency
// provider replay. For each of BENCH_TURNS turns that call `bench::echo` once, the spans that start
// between the model's two requests are taken from `engine::traces::list {session_id}`; the script
// prints, per span name, the median count per turn, the median summed duration and the median
// start offset from the first request, then one turn's timeline (the median turn by step length).
// Spans nest (a step's calls are its children), so durations of different rows overlap; the gaps
// between a step's children are the orchestrator's own work and the hops between processes.
// Options (env): BENCH_TURNS (15), BENCH_WARMUP_TURNS (5).
import { callAgentTrigger, reply, say } from "@iii-edge/test-support/provider-replay";
import { registerWorker } from "iii-sdk";
import { followedTurn, registered, startHarnessBench } from "./harness-engine.ts";
import { fmt, median } from "./stats.ts";

const TURNS = Number(process.env.BENCH_TURNS ?? 15);
const WARMUP = Number(process.env.BENCH_WARMUP_TURNS ?? 5);

interface Span {
  name: string;
  span_id: string;
  parent_span_id?: string;
  start_time_unix_nano: number;
  end_time_unix_nano: number;
}

const { replay, engine, iii } = await startHarnessBench("harness-profile", { rules: "version: 1\nrules:\n  - 'bench::*'\n" });
const app = registerWorker(engine.wsUrl, { workerName: "bench-app", otel: { enabled: false } });
app.registerFunction("bench::echo", async (p: unknown) => p);

/** One turn's spans inside its function-call step, as [name, start offset ms, duration ms, depth]. */
async function profiledTurn(n: number): Promise<{ step: number; spans: [string, number, number, number][] }> {
  const sid = `profile-${n}`;
  const [first, second] = await followedTurn({ replay, engine }, sid, [
    reply(callAgentTrigger("bench::echo", { n }, `c-${n}`)),
    reply(say("Echoed.")),
  ]);
  const from = first!.received_at;
  const to = second!.received_at;
  // The engine stores what it holds in batches: ask until the spans of the step are there.
  let spans: Span[] = [];
  for (let i = 0; i < 50; i++) {
    const r = await iii.trigger<unknown, { spans: Span[] }>({
      function_id: "engine::traces::list",
      payload: { session_id: sid, limit: 1000 },
    });
    spans = r.spans.filter((s) => s.start_time_unix_nano / 1e6 >= from && s.start_time_unix_nano / 1e6 <= to);
    if (spans.some((s) => s.name.startsWith("step function_execute"))) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const byId = new Map(spans.map((s) => [s.span_id, s]));
  const depth = (s: Span): number => (s.parent_span_id && byId.has(s.parent_span_id) ? 1 + depth(byId.get(s.parent_span_id)!) : 0);
  const rows = spans
    .map((s): [string, number, number, number] => [
      s.name,
      s.start_time_unix_nano / 1e6 - from,
      (s.end_time_unix_nano - s.start_time_unix_nano) / 1e6,
      depth(s),
    ])
    .sort((a, b) => a[1] - b[1]);
  return { step: to - from, spans: rows };
}

try {
  await registered(iii, ["bench::echo", "run::start", "provider::openai::stream"]);
  for (let i = 0; i < WARMUP; i++) await profiledTurn(-1 - i);
  const turns: Awaited<ReturnType<typeof profiledTurn>>[] = [];
  for (let i = 1; i <= TURNS; i++) turns.push(await profiledTurn(i));
  const names = [...new Set(turns.flatMap((t) => t.spans.map((s) => s[0])))];
  console.log(
    `iii-edge harness profile: npm start, zero-latency replay, ${TURNS} turns; function-call step p50 ${fmt(median(turns.map((t) => t.step)))} ms`,
  );
  console.log("\n| span (between the model's two requests) | per turn | sum of durations p50 | first start p50 |");
  console.log("|---|--:|--:|--:|");
  const rows = names.map((name) => {
    const of = turns.map((t) => t.spans.filter((s) => s[0] === name));
    return {
      name,
      count: median(of.map((s) => s.length)),
      total: median(of.map((s) => s.reduce((a, x) => a + x[2], 0))),
      start: median(of.filter((s) => s.length > 0).map((s) => s[0]![1])),
    };
  });
  for (const r of rows.sort((a, b) => a.start - b.start))
    console.log(`| ${r.name} | ${r.count} | ${fmt(r.total, 2)} ms | +${fmt(r.start, 1)} ms |`);
  const mid = [...turns].sort((a, b) => a.step - b.step)[Math.floor(turns.length / 2)]!;
  console.log(`\nThe median turn (${fmt(mid.step)} ms between the requests), its spans in start order:`);
  for (const [name, at, dur, d] of mid.spans) console.log(`  +${fmt(at, 1).padStart(6)} ms ${"  ".repeat(d)}${name} (${fmt(dur, 2)} ms)`);
} finally {
  await Promise.allSettled([iii.shutdown(), app.shutdown()]);
  await engine.stop();
  await replay.close();
}
