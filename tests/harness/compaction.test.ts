// Context compaction end to end: exactly `npm start` (every harness worker in the deployed Worker),
// the real OpenAI provider against the replay, a model registered with a 6 000-token window
// (MODELS_OVERRIDES), an app function whose outputs are large. A session is driven past the window
// over several runs; what the model is sent (recorded by the replay, counted with the model's own
// encoding) must fit and carry the summary; the second compaction updates the first summary; old
// outputs are pruned before anything is summarised; `compaction_done` reaches `agent::events`.
import type { AgentEvent, AgentMessage, CompactionRecord } from "@iii-edge/protocol/harness";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { counterFor, loadEncoding, wireRequestTokens, type WireMessage, type WireTool } from "@iii-edge/worker-context-compaction/tokens";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { ensureBundle, SCRIPT_FILE } from "../../scripts/worker-bundle.mjs";
import { callAgentTrigger, reply, replyWith, say, startProviderReplay } from "@iii-edge/test-support/provider-replay";
import { permissionsFile, replayEnv, type RecordedRequest, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { turnClient, TURN_DEADLINE_MS, user, type EventItem } from "./turn-client.ts";

const PERMISSIONS = `version: 1
rules:
  - '!approval::*'
  - 'data::*'
`;

/** 6 000-token window, 1 000 out: hard limit 5 000; reserve min(20k, 600) → usable 4 400; tail
 * budget 2 000; prune protect 1 760 / min free 880. */
const MODEL = "gpt-4o-small";
const WINDOW = { context_window: 6_000, max_output_tokens: 1_000 };
const USABLE = 4_400;
/** Each `data::dump` output: ~1 150 tokens. Three runs stay under the usable window, a fourth output
 * goes past it. */
const DUMP_TOKENS = 1_150;
const SYSTEM = "You are a test agent. Use data::dump when asked.";
const SID = "compaction-e2e";

let replay: ReplayServer;
let engine: EngineServer;
let iii: IIIClient;
let app: IIIClient;
let ui: ReturnType<typeof turnClient>;

beforeAll(async () => {
  replay = await startProviderReplay();
  const rules = permissionsFile(PERMISSIONS);
  engine = await startEngine({
    env: {
      ...replayEnv(replay),
      III_PERMISSIONS_PATH: rules,
      MODELS_OVERRIDES: JSON.stringify([{ provider: "openai", id: MODEL, ...WINDOW }]),
    },
  });
  iii = registerWorker(engine.wsUrl, { workerName: "compaction-e2e-client", otel: { enabled: false } });
  app = registerWorker(engine.wsUrl, { workerName: "data-app", otel: { enabled: false } });
  app.registerFunction(
    "data::dump",
    async (a: { tag?: string }) => ({
      content: [{ type: "text", text: `${a.tag ?? "D"}:${" alpha".repeat(DUMP_TOKENS)}` }],
      details: { tag: a.tag },
    }),
    {
      description: "Dump a large block of data.",
    },
  );
  ui = turnClient(engine, () => iii);
  await until(async () => (await fetch(`${engine.url}/api/turns/none`)).status === 404 || undefined, "the harness routes", 30_000, 200);
  await until(
    async () => {
      const r = (await iii.trigger({ function_id: "engine::functions::list", payload: {} })) as { functions: { function_id: string }[] };
      return ["data::dump", "context-compaction::compact_now", "session-tree::compactions"].every((id) =>
        r.functions.some((f) => f.function_id === id),
      );
    },
    "the app's function and the compaction worker",
    30_000,
  );
});

afterAll(async () => {
  await Promise.allSettled([iii?.shutdown(), app?.shutdown()]);
  await engine?.stop();
  await replay?.close();
});

// ------------------------------------------------------------------ helpers

let runs = 0;
/** Start run k of the session (a fresh message id each time) and wait for its agent_end. */
async function run(text: string): Promise<EventItem[]> {
  runs += 1;
  const res = await ui.post("api/turns", {
    session_id: SID,
    message_id: `${SID}-m${runs}`,
    payload: {
      session_id: SID,
      message_id: `${SID}-m${runs}`,
      model: MODEL,
      provider: "openai",
      system_prompt: SYSTEM,
      messages: [user(text)],
    },
  });
  expect(res.status, await res.clone().text()).toBe(200);
  expect(await res.json()).toEqual({ session_id: SID, started: true });
  return until(
    async () => {
      const view = await ui.turnState(SID);
      if (view?.state !== "stopped") return undefined;
      const events = await ui.allEvents(SID);
      return events.filter((e) => e.data.type === "agent_end").length === runs && events.at(-1)?.data.type === "agent_end"
        ? events
        : undefined;
    },
    `run ${runs} of ${SID} to end`,
    TURN_DEADLINE_MS,
    100,
  );
}

/** A run that calls data::dump once and then answers. */
function scriptDumpRun(k: number, finalUsage?: { input: number; output: number }): void {
  replay.enqueue("openai", reply(callAgentTrigger("data::dump", { tag: `D${k}` })));
  const answer = say(`A${k}: dumped.`);
  replay.enqueue("openai", finalUsage ? replyWith({ usage: finalUsage }, answer) : reply(answer));
}

const isSummaryRequest = (r: RecordedRequest) => !Array.isArray(r.body?.tools);
const roundRequests = () => replay.requestsFor("openai").filter((r) => !isSummaryRequest(r));
const summaryRequests = () => replay.requestsFor("openai").filter(isSummaryRequest);
const messagesOf = (r: RecordedRequest) => (r.body?.messages ?? []) as WireMessage[];
const textOfWire = (r: RecordedRequest) => JSON.stringify(messagesOf(r));

/** The recorded request's size, counted as OpenAI frames it with gpt-4o's o200k encoding. */
async function tokensOf(r: RecordedRequest): Promise<number> {
  const enc = await loadEncoding("o200k_base");
  return wireRequestTokens({ messages: messagesOf(r), tools: (r.body?.tools ?? []) as WireTool[] }, "o200k_base", (t) =>
    t ? enc.countTokens(t, { disallowedSpecial: new Set() }) : 0,
  );
}

const compactionsOf = async () =>
  ((await iii.trigger({ function_id: "session-tree::compactions", payload: { session_id: SID } })) as { compactions: CompactionRecord[] })
    .compactions;
const rawPath = async () =>
  (
    (await iii.trigger({ function_id: "session-tree::messages", payload: { session_id: SID } })) as {
      messages: { entry_id: string; message: AgentMessage }[];
    }
  ).messages;
const doneEvents = (events: EventItem[]) =>
  events.filter((e) => e.data.type === "compaction_done") as { item_id: string; data: Extract<AgentEvent, { type: "compaction_done" }> }[];

// ------------------------------------------------------------------ the scenario

describe("a session driven past a 6 000-token window", () => {
  it("three runs fit: nothing is compacted or summarised", async () => {
    for (let k = 1; k <= 3; k++) {
      scriptDumpRun(k);
      await run(`U${k}: dump batch ${k}`);
    }
    expect(await compactionsOf()).toEqual([]);
    expect(summaryRequests()).toHaveLength(0);
    const last = roundRequests().at(-1)!;
    expect(await tokensOf(last)).toBeLessThan(USABLE);
  });

  it("the fourth output overflows: old outputs pruned first, the head summarised, the next request fits and carries the summary", async () => {
    const before = roundRequests().length;
    replay.enqueue("openai", reply(callAgentTrigger("data::dump", { tag: "D4" })));
    replay.enqueue("openai", reply(say("## Goal\n- dump the batches (S1-MARKER)\n## Progress\n### Done\n- batches 1-3")));
    replay.enqueue("openai", reply(say("A4: dumped.")));
    const events = await run("U4: dump batch 4");

    // Past the window: the round before the output was sent near the limit; with the ~1 150-token
    // output added, the request would not have fit.
    const roundBefore = await tokensOf(roundRequests()[before]!);
    expect(roundBefore).toBeLessThan(USABLE);
    expect(roundBefore + DUMP_TOKENS).toBeGreaterThan(USABLE);
    const raw = await rawPath();

    // Pruned before summarising: the oldest output is a stub in the transcript and in the summary's input.
    const r1 = raw.find((e) => e.message.role === "function_result")!; // the oldest output
    expect(r1.message).toMatchObject({
      content: [{ type: "text", text: "[output pruned]" }],
      details: { compacted_at: expect.any(Number) },
    });
    const [summaryReq] = summaryRequests();
    expect(summaryReq).toBeDefined();
    const summaryUser = JSON.stringify(messagesOf(summaryReq).at(-1)?.content);
    expect(summaryUser).toContain("[tool_result] data::dump: [output pruned]");
    expect(summaryUser).toContain("U1: dump batch 1");
    expect(JSON.stringify(messagesOf(summaryReq)[0]?.content)).toContain("Create a new summary");
    expect(summaryReq.body?.max_tokens).toBe(880);

    // The round after the compaction: under the window, summary first, old turns gone.
    const next = roundRequests()[before + 1]!;
    expect(await tokensOf(next)).toBeLessThanOrEqual(USABLE);
    const sent = messagesOf(next);
    expect(sent[0]).toMatchObject({ role: "system" });
    expect(sent[1]).toMatchObject({ role: "assistant" });
    expect(String(sent[1]?.content)).toContain("<conversation-summary>");
    expect(String(sent[1]?.content)).toContain("S1-MARKER");
    expect(textOfWire(next)).not.toContain("U1: dump batch 1");
    expect(textOfWire(next)).toContain("U4: dump batch 4");
    expect(textOfWire(next)).toContain("D4:");

    // One compaction entry; compaction_done (sync, the orchestrator's own event id) in the events.
    const [c1] = await compactionsOf();
    expect(c1).toMatchObject({ summary: expect.stringContaining("S1-MARKER"), tail_start_id: expect.any(String) });
    const done = doneEvents(events);
    expect(done).toHaveLength(1);
    expect(done[0]!.data).toMatchObject({ mode: "sync", compaction_entry_id: c1.entry_id, tail_start_id: c1.tail_start_id });
    expect(done[0]!.data.tokens_before).toBeGreaterThan(USABLE);
  });

  it("a turn whose provider reports a full window compacts in the background; that summary updates the first", async () => {
    // The provider reports the run's last round at the usable window: compaction wakes on that
    // turn_end (agent::turn_end stream trigger), once, after the run.
    scriptDumpRun(5, { input: USABLE + 100, output: 20 });
    replay.enqueue("openai", reply(say("## Goal\n- dump the batches (S2-MARKER)\n## Progress\n### Done\n- batches 1-5")));
    await run("U5: dump batch 5");
    const events = await until(
      async () => {
        const evs = await ui.allEvents(SID);
        return doneEvents(evs).length === 2 ? evs : undefined;
      },
      "the second compaction_done",
      TURN_DEADLINE_MS,
      100,
    );

    const second = doneEvents(events)[1]!;
    expect(second.data).toMatchObject({ mode: "async", summary_text: expect.stringContaining("S2-MARKER") });
    // Its id sorts right after the turn_end that woke it, and is a cursor run::events accepts.
    const turnEnds = events.filter((e) => e.data.type === "turn_end").map((e) => e.item_id);
    const anchor = turnEnds.filter((id) => id < second.item_id).at(-1)!;
    expect(second.item_id).toBe(`${anchor}1`);
    const page = await fetch(`${engine.url}/api/turns/${SID}/events?after=${encodeURIComponent(second.item_id)}`);
    expect(page.status).toBe(200);

    // Update, not re-summarise: the previous summary in the instructions, only newer messages in the input.
    const req = summaryRequests()[1]!;
    const system = JSON.stringify(messagesOf(req)[0]?.content);
    expect(system).toContain("previous summary");
    expect(system).toContain("<previous-summary>");
    expect(system).toContain("S1-MARKER");
    const input = JSON.stringify(messagesOf(req).at(-1)?.content);
    expect(input).toContain("U4: dump batch 4");
    expect(input).not.toContain("U1: dump batch 1");
    expect(input).not.toContain("S1-MARKER");
    expect((await compactionsOf()).map((c) => c.summary)).toEqual([
      expect.stringContaining("S1-MARKER"),
      expect.stringContaining("S2-MARKER"),
    ]);
  });

  it("the next run's request carries the updated summary and fits", async () => {
    replay.enqueue("openai", reply(say("A6: hello again.")));
    await run("U6: what have we done?");
    const last = roundRequests().at(-1)!;
    expect(await tokensOf(last)).toBeLessThanOrEqual(USABLE);
    const sent = messagesOf(last);
    expect(String(sent[1]?.content)).toContain("S2-MARKER");
    expect(textOfWire(last)).not.toContain("S1-MARKER");
    expect(textOfWire(last)).not.toContain("U4: dump batch 4");
    expect(textOfWire(last)).toContain("U6: what have we done?");
    expect(replay.pending("openai")).toBe(0);
  });

  it("a request that cannot fit even compacted fails the run, saying so, without calling the model", async () => {
    const sid = "compaction-e2e-overflow";
    const sent = replay.requestsFor("openai").length;
    const res = await ui.post("api/turns", {
      session_id: sid,
      message_id: `${sid}-m1`,
      payload: {
        session_id: sid,
        message_id: `${sid}-m1`,
        model: MODEL,
        provider: "openai",
        system_prompt: `Rules:${" alpha".repeat(5_200)}`,
        messages: [user("hi")],
      },
    });
    expect(res.status).toBe(200);
    const { view } = await ui.finished(sid, "failed");
    expect(view.error?.message).toMatch(/context overflow: the request needs \d+ tokens even after compaction, the model takes 5000/);
    expect(replay.requestsFor("openai").length).toBe(sent);
  });
});

// The engine Worker's script carries no rank table (src/ranks.ts in context-compaction): the Worker
// reads them from its static assets through ASSETS. Its counts are the same as Node's, which imports
// gpt-tokenizer's own tables, for both encodings.
describe("the Worker counts with the rank tables of its static assets", () => {
  const MIXED = 'fn main() { println!("héllo, 世界 🚀"); } // Привет, γειά σου — ١٢٣';
  const messages: AgentMessage[] = [
    user(`U1: ${MIXED}`),
    {
      role: "assistant",
      content: [{ type: "text", text: `A1: ${MIXED.repeat(3)}` }],
      stop_reason: "end",
      model: "gpt-4o",
      provider: "openai",
      timestamp: 1,
    },
    user("U2: and once more, in plain English please."),
  ];
  const SYSTEM_PROMPT = "You count tokens. Ünïcödé in the system prompt too.";

  it.each([
    ["gpt-4o", "o200k_base"],
    ["gpt-4", "cl100k_base"],
  ])("compact_now's count for %s (%s) is Node's exactly", async (model) => {
    const sid = `compaction-e2e-count-${model}`;
    await iii.trigger({ function_id: "session-tree::ensure", payload: { session_id: sid } });
    await iii.trigger({
      function_id: "session-tree::append_many",
      payload: { session_id: sid, entries: messages.map((message, i) => ({ entry_id: `e${i}`, message })) },
    });
    const r = (await iii.trigger({
      function_id: "context-compaction::compact_now",
      payload: {
        session_id: sid,
        model: { id: model, providerID: "openai", limit: { context: 100_000, output: 1_000 } },
        system_prompt: SYSTEM_PROMPT,
      },
    })) as { status: string; tokens: number };
    const inNode = (await counterFor({ id: model, provider: "openai" })).request({ system: SYSTEM_PROMPT, messages, tools: [] });
    expect(r).toMatchObject({ status: "fits", tokens: inNode });
    expect(inNode).toBeGreaterThan(60);
  });

  it("the tables are not in the Worker script, and not served to the public", async () => {
    const script = readFileSync(path.join(await ensureBundle(), SCRIPT_FILE), "utf8");
    expect(script).toContain("workers/context-compaction/src/ranks.ts"); // the bundle's module markers are there
    expect(script).not.toContain("gpt-tokenizer/esm/bpeRanks/");
    for (const name of ["o200k_base", "cl100k_base"]) {
      expect(existsSync(path.join(repoRoot, "demo-app", "dist", "_iii", "tokenizer", `${name}.json`))).toBe(true);
      const res = await fetch(`${engine.url}/_iii/tokenizer/${name}.json`);
      await res.body?.cancel();
      expect(res.status).toBe(404);
    }
  });
});
