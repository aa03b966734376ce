// Compaction of a 100k-token session, alone: `node --conditions=iii-edge-source tests/bench/compaction-bench.ts`.
// On exactly `npm start` (the context-compaction and session-storage workers inside the deployed
// Worker) with a zero-latency provider replay as the summariser, so the figures are the harness's
// own work: read the path, count it with o200k (gpt-4o's encoding), prune, choose the tail, render
// the head, the summariser round trip through a channel, persist. Sessions are seeded straight into
// session storage (append_many); the model is gpt-4o (128k window: usable 98 816 tokens).
//   - prune path: old function outputs make up the bulk → pruning alone brings it under the target;
//   - summary path: the bulk is conversation text → the head is summarised;
//   - manual (/compact): prune and summarise, always;
//   - count only: compact_now on a session that fits (the pre-flight's exact count).
// In-process: the o200k count of the same transcript.
// Options (env): BENCH_RUNS (5 sessions per kind), BENCH_SESSION_TOKENS (100000).
import type { AgentMessage } from "@iii-edge/protocol/harness";
import { counterFor } from "@iii-edge/worker-context-compaction/tokens";
import { reply, say } from "@iii-edge/test-support/provider-replay";
import { registered, startHarnessBench } from "./harness-engine.ts";
import { pct, fmt } from "./stats.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const SESSION_TOKENS = Number(process.env.BENCH_SESSION_TOKENS ?? 100_000);
const MODEL = { id: "gpt-4o", providerID: "openai", limit: { context: 128_000, output: 16_384 } };
/** One function output / assistant text block, in tokens (" alpha" is one o200k token). */
const BLOCK_TOKENS = 2_000;
const APPEND_BATCH = 64;

const { replay, engine, iii } = await startHarnessBench("compaction-bench");
replay.setDefault("openai", reply(say("## Goal\n- benchmark the compaction\n## Progress\n### Done\n- (none)")));
const call = <T>(function_id: string, payload: unknown) => iii.trigger({ function_id, payload, timeoutMs: 120_000 }) as Promise<T>;

await registered(iii, ["context-compaction::compact_now", "session-tree::compactions", "provider::openai::stream"], 60_000);

const block = (tag: string) => `${tag}:${" alpha".repeat(BLOCK_TOKENS)}`;
const user = (text: string): AgentMessage => ({ role: "user", content: [{ type: "text", text }], timestamp: 1 });
const said = (text: string): AgentMessage => ({
  role: "assistant",
  content: [{ type: "text", text }],
  stop_reason: "end",
  model: "gpt-4o",
  provider: "openai",
  timestamp: 1,
});
const calls = (id: string): AgentMessage => ({
  role: "assistant",
  content: [
    { type: "function_call", id, function_id: "agent_trigger", arguments: { function: "files::read", payload: { path: `/src/${id}.ts` } } },
  ],
  stop_reason: "function_call",
  model: "gpt-4o",
  provider: "openai",
  timestamp: 1,
});
const output = (id: string, text: string): AgentMessage => ({
  role: "function_result",
  function_call_id: id,
  function_id: "files::read",
  content: [{ type: "text", text }],
  details: null,
  is_error: false,
  timestamp: 1,
});

/** A session of ~SESSION_TOKENS: turns of a user message and either a call + a large output, or a large answer. */
function transcript(kind: "outputs" | "text", tokens: number): [string, AgentMessage][] {
  const out: [string, AgentMessage][] = [];
  for (let k = 0; k * (BLOCK_TOKENS + 40) < tokens; k++) {
    out.push([`u${k}`, user(`U${k}: next step`)]);
    if (kind === "outputs")
      out.push([`c${k}`, calls(`k${k}`)], [`r${k}`, output(`k${k}`, block(`R${k}`))], [`a${k}`, said(`A${k}: read it.`)]);
    else out.push([`a${k}`, said(block(`A${k}`))]);
  }
  return out;
}

async function seed(sid: string, entries: [string, AgentMessage][]): Promise<void> {
  await call("session-tree::ensure", { session_id: sid });
  for (let i = 0; i < entries.length; i += APPEND_BATCH) {
    await call("session-tree::append_many", {
      session_id: sid,
      entries: entries.slice(i, i + APPEND_BATCH).map(([entry_id, message]) => ({ entry_id, message })),
    });
  }
}

interface Sample {
  ms: number;
  status: string;
  before: number;
  after: number;
  summaryAtMs?: number;
}

async function measure(
  label: string,
  kind: "outputs" | "text",
  fn: "compact_now" | "compact_session",
  tokens = SESSION_TOKENS,
): Promise<Sample[]> {
  const samples: Sample[] = [];
  for (let i = 0; i < RUNS + 1; i++) {
    const sid = `bench-${label.replace(/\W+/g, "-")}-${i}`;
    await seed(sid, transcript(kind, tokens));
    const summariesBefore = replay.requestsFor("openai").length;
    const t0 = performance.now();
    const t0Wall = Date.now();
    const r = await call<{ status: string; tokens_before?: number; tokens_after?: number; tokens?: number }>(`context-compaction::${fn}`, {
      session_id: sid,
      model: MODEL,
    });
    const ms = performance.now() - t0;
    const sreq = replay.requestsFor("openai")[summariesBefore];
    if (i === 0) continue; // warm-up: the encoding's first load, the Worker's first compile
    samples.push({
      ms,
      status: r.status,
      before: r.tokens_before ?? r.tokens ?? 0,
      after: r.tokens_after ?? r.tokens ?? 0,
      summaryAtMs: sreq ? sreq.received_at - t0Wall : undefined,
    });
  }
  const ms = samples.map((s) => s.ms);
  const at = samples.map((s) => s.summaryAtMs).filter((n): n is number => n !== undefined);
  console.log(
    `${label.padEnd(44)} ${samples[0]?.status.padEnd(7)} before ${String(samples[0]?.before).padStart(6)} → after ${String(samples[0]?.after).padStart(6)} tokens   p50 ${fmt(pct(ms, 50)).padStart(7)} ms  min ${fmt(Math.min(...ms)).padStart(7)}  max ${fmt(Math.max(...ms)).padStart(7)}${at.length ? `   summariser asked after p50 ${fmt(pct(at, 50), 0)} ms` : ""}`,
  );
  return samples;
}

process.on("unhandledRejection", (e) => {
  console.error(`failed: ${String(e)}\nengine output (tail):\n${engine.output().slice(-3_000)}`);
  process.exit(1);
});
console.log(
  `compaction of a ${SESSION_TOKENS}-token session (gpt-4o, usable 98 816), ${RUNS} sessions per kind, zero-latency summariser\n`,
);
await measure("compact_now, bulk in function outputs (prune)", "outputs", "compact_now");
await measure("compact_now, bulk in conversation (summary)", "text", "compact_now");
await measure("compact_session /compact (prune + summary)", "outputs", "compact_session");
await measure("compact_now on a 60k session (count only)", "text", "compact_now", 60_000);

// In-process: the exact count alone (the worker's main CPU share of the above).
const counter = await counterFor({ id: "gpt-4o", provider: "openai" });
const msgs = transcript("outputs", SESSION_TOKENS).map(([, m]) => m);
const countMs: number[] = [];
let total = 0;
for (let i = 0; i < 10; i++) {
  const t = performance.now();
  total = counter.request({ system: null, messages: msgs, tools: [] });
  countMs.push(performance.now() - t);
}
console.log(`\nin process: o200k count of the ${total}-token transcript p50 ${fmt(pct(countMs, 50))} ms (first ${fmt(countMs[0]!)} ms)`);

await iii.shutdown();
await engine.stop();
await replay.close();
