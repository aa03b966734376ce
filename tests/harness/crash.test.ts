// Crash-safe turns inside the deployed Worker: the engine (`npm start`: wrangler dev, workerd, the
// Engine object and every built-in harness worker) is killed and started again over the same state
// at the three points where a turn can be cut — while the model streams, between a function's
// dispatch and its result, and while a call waits for approval. Each time the turn completes, no
// assistant message is duplicated, and no function runs twice; a call cut mid-execution gets the
// "interrupted" result (at most once, outcome unknown) and the model is told so.
import type { FunctionResultMessage } from "@iii-edge/protocol/harness";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import {
  callAgentTrigger,
  reply,
  replyWith,
  say,
  startProviderReplay,
  type RecordedRequest,
  type ReplayServer,
} from "@iii-edge/test-support/provider-replay";
import { permissionsFile, replayEnv } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { openaiMessages, asText, metaOf, textOf, turnClient, TURN_DEADLINE_MS, types } from "./turn-client.ts";

/** A turn that must first wait for the engine to come back (restart + reconnects) gets this long. */
const AFTER_RESTART_DEADLINE_MS = 60_000;

const PERMISSIONS = `version: 1
rules:
  - 'slow::*'
`;

let replay: ReplayServer;
let engine: EngineServer;
let iii: IIIClient;
let app: IIIClient;
let ui: ReturnType<typeof turnClient>;
const ran: { fn: string; sid: string }[] = [];
const started = new Set<string>();
const releases: (() => void)[] = [];

beforeAll(async () => {
  replay = await startProviderReplay();
  const rules = permissionsFile(PERMISSIONS);
  engine = await startEngine({ env: { ...replayEnv(replay), III_PERMISSIONS_PATH: rules } });
  iii = registerWorker(engine.wsUrl, { workerName: "crash-client", otel: { enabled: false } });
  ui = turnClient(engine, () => iii);
  app = registerWorker(engine.wsUrl, { workerName: "crash-app", otel: { enabled: false } });
  app.registerFunction(
    "slow::wait",
    async (_a: unknown, metadata?: unknown) => {
      const sid = String(metaOf(metadata).session_id);
      ran.push({ fn: "slow::wait", sid });
      started.add(sid);
      await new Promise<void>((r) => releases.push(r));
      return { waited: true };
    },
    { description: "Waits until released." },
  );
  app.registerFunction(
    "mail::send",
    async (a: { to: string }, metadata?: unknown) => {
      ran.push({ fn: "mail::send", sid: String(metaOf(metadata).session_id) });
      return { sent: true, to: a.to };
    },
    { description: "Send an e-mail (needs a person's approval)." },
  );
  await until(
    async () => {
      const r = (await iii.trigger({ function_id: "engine::functions::list", payload: {} })) as { functions: { function_id: string }[] };
      return ["slow::wait", "mail::send", "run::start"].every((id) => r.functions.some((f) => f.function_id === id));
    },
    "the app's functions and the harness",
    30_000,
  );
});

afterAll(async () => {
  releases.splice(0).forEach((r) => r());
  await Promise.allSettled([iii?.shutdown(), app?.shutdown()]);
  await engine?.stop();
  await replay?.close();
});

const ranFor = (fn: string, sid: string) => ran.filter((r) => r.fn === fn && r.sid === sid);

/** The app's functions are back after the restart (iii-sdk reconnected and re-registered). */
async function appBack(): Promise<void> {
  await until(
    async () => {
      const r = (await iii.trigger({ function_id: "engine::functions::list", payload: {} })) as { functions: { function_id: string }[] };
      return ["slow::wait", "mail::send", "run::start"].every((id) => r.functions.some((f) => f.function_id === id));
    },
    "the clients back after the restart",
    AFTER_RESTART_DEADLINE_MS,
    200,
  );
}

/** Each session's opening prompt: its model requests are told apart by it (the replay answers each
 * conversation from its own script, whatever order the three send in after the restart). */
const PROMPTS = { streaming: "tell me something", dispatched: "do the slow thing", parked: "mail ada" } as const;
const SIDS = { streaming: "crash-streaming", dispatched: "crash-dispatched", parked: "crash-parked" } as const;
const ofSession = (which: keyof typeof PROMPTS) => (r: RecordedRequest) =>
  asText(openaiMessages(r).find((m) => m.role === "user")?.content).includes(PROMPTS[which]);
const requestsOf = (which: keyof typeof PROMPTS) => replay.requestsFor("openai").filter(ofSession(which));

// One restart cuts three turns, each at its own point: a call parked for approval, a function
// dispatched and running, and a model stream in flight (the restart comes as its first deltas
// arrive). Each case then checks how its own turn came through.
describe("the engine killed and started again mid-turn", () => {
  beforeAll(async () => {
    replay.enqueueFor(
      "openai",
      ofSession("parked"),
      reply(callAgentTrigger("mail::send", { to: "ada@example.com" }, "a-1")),
      reply(say("Sent.")),
    );
    replay.enqueueFor(
      "openai",
      ofSession("dispatched"),
      reply(callAgentTrigger("slow::wait", {}, "c-1")),
      reply(say("I could not confirm that it finished.")),
    );
    // A slow stream (many small pieces, 100 ms apart) for the first try, a quick one for the retry.
    replay.enqueueFor(
      "openai",
      ofSession("streaming"),
      replyWith({ chunkDelayMs: 100, pieceChars: 3 }, say("This answer is streamed slowly enough to be cut in the middle.")),
      reply(say("The answer, in full.")),
    );
    await ui.startTurn(SIDS.parked, PROMPTS.parked);
    await ui.reached(SIDS.parked, "function_awaiting_approval");
    await ui.startTurn(SIDS.dispatched, PROMPTS.dispatched);
    await until(() => started.has(SIDS.dispatched), "the call to be running", TURN_DEADLINE_MS);
    await ui.startTurn(SIDS.streaming, PROMPTS.streaming);
    await until(
      async () => (await ui.allEvents(SIDS.streaming)).some((e) => e.data.type === "message_update"),
      "deltas reaching agent::events",
      TURN_DEADLINE_MS,
    );
    await engine.restart();
    // The worker finishes its call after the engine that asked for it is gone.
    releases.splice(0).forEach((r) => r());
    await appBack();
  }, AFTER_RESTART_DEADLINE_MS + 60_000);

  it("while the model streams: the step runs again, one assistant message, one completion", async () => {
    const sid = SIDS.streaming;
    const { view, events } = await ui.finished(sid, "stopped", AFTER_RESTART_DEADLINE_MS);
    expect(view.turn_count).toBeGreaterThanOrEqual(1);
    const reqs = requestsOf("streaming");
    expect(reqs).toHaveLength(2);
    expect(reqs[0]!.aborted).toBe(true);
    expect(types(events).filter((t) => t === "message_complete")).toHaveLength(1);
    const msgs = await ui.transcript(sid);
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(textOf(msgs[1])).toBe("The answer, in full.");
  });

  it("between a function's dispatch and its result: it ran once, its result says interrupted, the turn ends", async () => {
    const sid = SIDS.dispatched;
    const { view } = await ui.finished(sid, "stopped", AFTER_RESTART_DEADLINE_MS);
    expect(view.turn_count).toBe(2);
    expect(ranFor("slow::wait", sid)).toHaveLength(1);
    const msgs = await ui.transcript(sid);
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant", "function_result", "assistant"]);
    const fr = msgs[2] as FunctionResultMessage;
    expect(fr).toMatchObject({ function_call_id: "c-1", is_error: true });
    expect(textOf(fr)).toMatch(/interrupted/i);
    // The model was told the outcome is unknown, and asked only once more.
    const reqs = requestsOf("dispatched");
    expect(reqs).toHaveLength(2);
    expect(asText(openaiMessages(reqs[1]).find((m) => m.role === "tool")?.content)).toMatch(/interrupted/i);
  });

  it("while a call waits for approval: the decision after the restart runs it once and the turn finishes", async () => {
    const sid = SIDS.parked;
    // Still parked, with the call visible, after the restart.
    expect(await ui.turnState(sid)).toMatchObject({
      state: "function_awaiting_approval",
      awaiting_approval: [expect.objectContaining({ function_call_id: "a-1" })],
    });
    const res = await ui.post("api/approvals", { session_id: sid, function_call_id: "a-1", decision: "allow" });
    expect(res.status).toBe(200);
    await ui.finished(sid, "stopped", AFTER_RESTART_DEADLINE_MS);
    expect(ranFor("mail::send", sid)).toHaveLength(1);
    const msgs = await ui.transcript(sid);
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant", "function_result", "assistant"]);
    expect((msgs[2] as FunctionResultMessage).is_error).toBe(false);
  });
});
