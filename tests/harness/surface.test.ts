// iii's harness surface end to end (docs/harness.md, "iii's harness surface"; "Typed outputs"):
// exactly `npm start` with the real OpenAI and Anthropic clients against the local replay, and an
// unmodified iii-sdk client calling `harness::send|run|stop|status` as a client written for iii's
// harness would. What a user notices:
// - a send starts a turn, its status goes to `completed` with the answer as result, and a worker
//   bound to `harness::turn_started` / `harness::turn_completed` hears each once;
// - two sends at once make one turn; a send while the turn waits on a function is merged into it
//   and the model reads it in that turn;
// - a repeated idempotency_key starts and appends nothing; a bad payload is `invalid_arguments`;
// - `harness::stop` cancels; `harness::run` answers with the terminal status;
// - a typed output is held to its schema on both providers, with a retry after an invalid answer
//   and `result_error` after two.
import type { AgentMessage, HarnessRunResponse, SendResponse, StatusResponse, StopResponse } from "@iii-edge/protocol/harness";
import type { TurnCompletedEvent, TurnStartedEvent } from "@iii-edge/protocol/harness";
import { subAgentSessionId } from "@iii-edge/worker-sub-agents/ids";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { call, callAgentTrigger, permissionsFile, replayEnv, reply, replyWith, say } from "@iii-edge/test-support/provider-replay";
import { startProviderReplay, type RecordedRequest, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { asText, openaiMessages, TURN_DEADLINE_MS, textOf, turnClient } from "./turn-client.ts";

const PERMISSIONS = `version: 1
rules:
  - 'surface-app::*'
  - harness::spawn
  - harness::join
`;
const sessionId = (name: string) => `hs-${name}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;
const SCHEMA = { type: "object", properties: { city: { type: "string" }, temp: { type: "number" } }, required: ["city", "temp"] };
const CLAUDE = { provider: "anthropic", model: "claude-sonnet-4-5" };

/** Everything a request sent to the model says, as text. */
const bodyText = (r: RecordedRequest | undefined) => JSON.stringify(r?.body ?? {});

describe("iii's harness surface on the deployed harness", () => {
  let replay: ReplayServer;
  let engine: EngineServer;
  let iii: IIIClient;
  let listener: IIIClient;
  let ui: ReturnType<typeof turnClient>;
  const started: TurnStartedEvent[] = [];
  const completed: TurnCompletedEvent[] = [];
  /** Calls of surface-app::wait still waiting, released by the test. */
  const waiting: (() => void)[] = [];
  const call_ = <T>(function_id: string, payload: unknown) => iii.trigger({ function_id, payload }) as Promise<T>;
  const send = (payload: Record<string, unknown>) =>
    call_<SendResponse>("harness::send", { model: "gpt-4o", provider: "openai", ...payload });
  const status = (sid: string) => call_<StatusResponse>("harness::status", { session_id: sid });
  const terminal = (sid: string) =>
    until(
      async () => {
        const s = await status(sid);
        return s && ["completed", "cancelled", "failed"].includes(s.status) ? s : undefined;
      },
      `session ${sid} terminal`,
      TURN_DEADLINE_MS,
      100,
    );
  const userTexts = async (sid: string) => (await ui.transcript(sid)).filter((m: AgentMessage) => m.role === "user").map(textOf);

  beforeAll(async () => {
    replay = await startProviderReplay();
    engine = await startEngine({ env: { ...replayEnv(replay, { anthropic: true }), III_PERMISSIONS_PATH: permissionsFile(PERMISSIONS) } });
    iii = registerWorker(engine.wsUrl, { workerName: "surface-e2e-client", otel: { enabled: false } });
    iii.registerFunction(
      "surface-app::wait",
      () =>
        new Promise((resolve) => {
          waiting.push(() => resolve({ waited: true }));
        }),
      { description: "Wait until released." },
    );
    // Another worker binds the two async trigger types the way iii documents it.
    listener = registerWorker(engine.wsUrl, { workerName: "surface-e2e-listener", otel: { enabled: false } });
    listener.registerFunction("surface-listener::started", async (e: TurnStartedEvent) => {
      started.push(e);
      return null;
    });
    listener.registerFunction("surface-listener::completed", async (e: TurnCompletedEvent) => {
      completed.push(e);
      return null;
    });
    listener.registerTrigger({ type: "harness::turn_started", function_id: "surface-listener::started", config: {} });
    listener.registerTrigger({ type: "harness::turn_completed", function_id: "surface-listener::completed", config: {} });
    ui = turnClient(engine, () => iii);
    await until(
      async () => {
        const r = (await iii.trigger({ function_id: "engine::functions::list", payload: {} })) as { functions: { function_id: string }[] };
        const ids = r.functions.map((f) => f.function_id);
        const bound = (await iii.trigger({
          function_id: "engine::registered-triggers::list",
          payload: { trigger_type: "harness::turn_completed" },
        })) as { registered_triggers: unknown[] };
        return (
          ["harness::send", "harness::status", "surface-app::wait", "surface-listener::completed"].every((id) => ids.includes(id)) &&
          bound.registered_triggers.length > 0
        );
      },
      "the harness, the app and the listener",
      30_000,
    );
  });

  afterAll(async () => {
    for (const release of waiting.splice(0)) release();
    await Promise.allSettled([iii?.shutdown(), listener?.shutdown()]);
    await engine?.stop();
    await replay?.close();
  });

  beforeEach(() => replay.reset());

  it("a send starts a turn: status completes with the answer as result, turn_started and turn_completed fire once each", async () => {
    replay.enqueue("openai", reply(say("Hello from the model.")));
    const sent = await send({ message: "hello", session: { title: "greeting" } });
    expect(sent).toMatchObject({ accepted: true, session_id: expect.any(String), turn_id: expect.any(String) });
    expect(sent.merged).toBeUndefined();
    const sid = sent.session_id;

    const done = await terminal(sid);
    expect(done).toMatchObject({
      session_id: sid,
      turn_id: sent.turn_id,
      status: "completed",
      result: "Hello from the model.",
      depth: 0,
      pending_function_calls: [],
      children: [],
    });
    expect(done!.turn_count).toBe(1);
    expect(done!.max_turns).toBeGreaterThan(0);
    // The run is one of ours too: run::status sees the same turn.
    expect(await call_("run::status", { session_id: sid })).toMatchObject({ run_id: sent.turn_id, state: "stopped" });

    const ended = await until(() => completed.find((e) => e.session_id === sid), "turn_completed", TURN_DEADLINE_MS);
    expect(ended).toMatchObject({
      turn_id: sent.turn_id,
      status: "completed",
      result: "Hello from the model.",
      timestamp: expect.any(Number),
    });
    expect(started.filter((e) => e.session_id === sid)).toEqual([
      { session_id: sid, turn_id: sent.turn_id, timestamp: expect.any(Number) },
    ]);
    // Once each: a later turn on another session fires its own, and this one's stay single.
    replay.enqueue("openai", reply(say("Second.")));
    const other = await send({ message: "again" });
    await until(() => completed.find((e) => e.session_id === other.session_id), "the other turn_completed", TURN_DEADLINE_MS);
    expect(completed.filter((e) => e.session_id === sid)).toHaveLength(1);
    expect(started.filter((e) => e.session_id === sid)).toHaveLength(1);
  });

  it("two sends at once on one session make one turn; the model reads both messages in it", async () => {
    const sid = sessionId("race");
    replay.enqueue("openai", reply(say("First answer.")), reply(say("Second answer.")));
    const [a, b] = await Promise.all([send({ session_id: sid, message: "one" }), send({ session_id: sid, message: "two" })]);
    expect(a.turn_id).toBe(b.turn_id);
    expect([a.merged, b.merged].filter(Boolean)).toHaveLength(1);
    const done = await terminal(sid);
    expect(done).toMatchObject({ turn_id: a.turn_id, status: "completed" });
    expect((await userTexts(sid)).sort()).toEqual(["one", "two"]);
    const asked = replay.requestsFor("openai").map(bodyText).join("\n");
    expect(asked).toContain('"one"');
    expect(asked).toContain('"two"');
    expect(started.filter((e) => e.session_id === sid)).toHaveLength(1);
  });

  it("a send while the turn waits on a function is merged: same turn, and the model reads it in that turn", async () => {
    const sid = sessionId("merge");
    replay.enqueue("openai", reply(callAgentTrigger("surface-app::wait", {}, "w1")), reply(say("Done waiting, and I saw your note.")));
    const first = await send({ session_id: sid, message: "wait for it" });
    await until(() => waiting.length > 0, "the function call", TURN_DEADLINE_MS);
    expect((await status(sid))?.status).toBe("awaiting_functions");

    const merged = await send({ session_id: sid, message: "also: be brief" });
    expect(merged).toEqual({ session_id: sid, turn_id: first.turn_id, accepted: true, merged: true });
    waiting.shift()!();

    const done = await terminal(sid);
    expect(done, JSON.stringify(await ui.transcript(sid))).toMatchObject({
      turn_id: first.turn_id,
      status: "completed",
      result: "Done waiting, and I saw your note.",
    });
    const second = openaiMessages(replay.requestsFor("openai")[1]);
    expect(second.map((m) => asText(m.content)).join("\n")).toContain("also: be brief");
    expect(started.filter((e) => e.session_id === sid)).toHaveLength(1);
  });

  it("a send while the model streams its final answer is folded in by the steering watermark: one more round, same turn", async () => {
    const sid = sessionId("watermark");
    // A slow answer (20 pieces, 250 ms apart): the send lands while it streams, after the round read
    // the transcript.
    replay.enqueue("openai", replyWith({ chunkDelayMs: 250, pieceChars: 2 }, say("a slow answer here..")), reply(say("And noted.")));
    const first = await send({ session_id: sid, message: "talk slowly" });
    await until(() => replay.requestsFor("openai").length === 1, "the first model call", TURN_DEADLINE_MS);
    const merged = await send({ session_id: sid, message: "one more thing" });
    expect(merged).toEqual({ session_id: sid, turn_id: first.turn_id, accepted: true, merged: true });

    const done = await terminal(sid);
    expect(done).toMatchObject({ turn_id: first.turn_id, status: "completed", result: "And noted.", turn_count: 2 });
    expect(replay.requestsFor("openai")).toHaveLength(2);
    expect(bodyText(replay.requestsFor("openai")[1])).toContain("one more thing");
    expect(started.filter((e) => e.session_id === sid)).toHaveLength(1);
  });

  it("a repeated idempotency_key answers the first send, deduplicated, and starts and appends nothing", async () => {
    const sid = sessionId("idem");
    const key = `tg-update-${sid}`;
    replay.enqueue("openai", reply(say("Once.")), reply(say("Never.")));
    const first = await send({ session_id: sid, message: "webhook says hi", idempotency_key: key });
    await terminal(sid);
    const again = await send({ session_id: sid, message: "webhook says hi", idempotency_key: key });
    expect(again).toEqual({ session_id: sid, turn_id: first.turn_id, accepted: true, deduplicated: true });
    // Without a session id too: the key names the first send's session.
    expect(await send({ message: "webhook says hi", idempotency_key: key })).toMatchObject({ session_id: sid, deduplicated: true });
    expect(await status(sid)).toMatchObject({ turn_id: first.turn_id, status: "completed" });
    expect(await userTexts(sid)).toEqual(["webhook says hi"]);
    expect(replay.requestsFor("openai")).toHaveLength(1);
  });

  it("a bad payload is refused with invalid_arguments and writes nothing", async () => {
    const sid = sessionId("bad");
    for (const bad of [
      { session_id: sid, message: "hi" }, // no model
      { session_id: sid, message: { role: "assistant", content: [] }, model: "gpt-4o" },
      { session_id: sid, message: "hi", model: "gpt-4o", options: { output: { type: "yaml" } } },
    ]) {
      await expect(iii.trigger({ function_id: "harness::send", payload: bad })).rejects.toMatchObject({ code: "invalid_arguments" });
    }
    expect(await status(sid)).toBeNull();
    expect(replay.requestsFor("openai")).toHaveLength(0);
  });

  it("harness::stop cancels a running turn; turn_completed says cancelled", async () => {
    const sid = sessionId("stop");
    replay.enqueue("openai", reply(callAgentTrigger("surface-app::wait", {}, "w1")));
    const sent = await send({ session_id: sid, message: "wait" });
    await until(() => waiting.length > 0, "the function call", TURN_DEADLINE_MS);
    expect(await call_<StopResponse>("harness::stop", { session_id: sid, turn_id: "not-this-turn" })).toEqual({ stopping: false });
    expect(await call_<StopResponse>("harness::stop", { session_id: sid, turn_id: sent.turn_id })).toEqual({ stopping: true });
    waiting.shift()!();
    expect(await terminal(sid)).toMatchObject({ turn_id: sent.turn_id, status: "cancelled" });
    expect(await until(() => completed.find((e) => e.session_id === sid), "turn_completed", TURN_DEADLINE_MS)).toMatchObject({
      status: "cancelled",
    });
    expect(await call_<StopResponse>("harness::stop", { session_id: sid })).toEqual({ stopping: false });
    expect(await status(sessionId("nobody"))).toBeNull();
  });

  it("harness::run answers with the terminal status and result", async () => {
    replay.enqueue("openai", reply(say("Ran to the end.")));
    const r = await call_<HarnessRunResponse>("harness::run", { message: "run it", model: "gpt-4o", provider: "openai" });
    expect(r).toMatchObject({ status: "completed", result: "Ran to the end.", turn_id: expect.any(String) });
  });

  it("harness::spawn takes iii's shape: the child gets its own typed output and the parent's fallback models, and answers child_turn_id", async () => {
    const sid = sessionId("spawn");
    replay.enqueue("openai", reply(callAgentTrigger("surface-app::wait", {}, "w0")));
    const sent = await send({ session_id: sid, message: "get the weather", options: { fallback_models: ["anthropic:claude-sonnet-4-5"] } });
    await until(() => waiting.length > 0, "the parent's first call", TURN_DEADLINE_MS);
    // The child's id follows from the parent's turn and the spawn's call id, so the model can join it.
    const child = await subAgentSessionId(sid, sent.turn_id, "sp1");
    replay.enqueue(
      "openai",
      reply(
        callAgentTrigger(
          "harness::spawn",
          {
            task: { role: "user", content: "Weather in Oslo, as data." },
            ...CLAUDE,
            options: { output: { type: "json", schema: SCHEMA } },
          },
          "sp1",
        ),
        callAgentTrigger("harness::join", { child_session_id: child }, "j1"),
      ),
      reply(say("Oslo: 3 degrees.")),
    );
    replay.enqueue("anthropic", reply(call("submit_result", { city: "Oslo", temp: 3 }, "s1")));
    waiting.shift()!();

    expect(await terminal(child)).toMatchObject({ status: "completed", depth: 1, result: { city: "Oslo", temp: 3 } });
    expect(await call_("run::request", { session_id: child })).toMatchObject({
      provider: "anthropic",
      fallback_models: ["anthropic:claude-sonnet-4-5"],
    });
    expect(await terminal(sid)).toMatchObject({ status: "completed", result: "Oslo: 3 degrees." });
    // The anthropic child was held to its contract with submit_result; it was asked the task.
    expect(bodyText(replay.requestsFor("anthropic")[0])).toContain("Weather in Oslo, as data.");
    const spawned = (await ui.transcript(sid)).find((m) => m.role === "function_result" && m.function_call_id === "sp1");
    const childRun = (await call_<{ run_id: string }>("run::status", { session_id: child })).run_id;
    expect(spawned && "details" in spawned ? spawned.details : undefined).toMatchObject({
      child_session_id: child,
      child_turn_id: childRun,
    });
    // The join hands the parent the child's validated value, not only its text.
    const joined = (await ui.transcript(sid)).find((m) => m.role === "function_result" && m.function_call_id === "j1");
    expect(joined && "details" in joined ? joined.details : undefined).toMatchObject({
      state: "stopped",
      result: { city: "Oslo", temp: 3 },
    });
    expect(await until(() => started.find((e) => e.session_id === child), "the child's turn_started", TURN_DEADLINE_MS)).toMatchObject({
      turn_id: childRun,
      parent: { session_id: sid, turn_id: sent.turn_id, function_call_id: "sp1" },
    });
  });

  describe("typed outputs", () => {
    const output = { type: "json", schema: SCHEMA };

    it("OpenAI: native response_format; an invalid answer is nudged once, the valid one is the result", async () => {
      const sid = sessionId("json-openai");
      replay.enqueue("openai", reply(say("It is 3 degrees in Oslo.")), reply(say('{"city":"Oslo","temp":3}')));
      await send({ session_id: sid, message: "weather in Oslo?", options: { output } });
      const done = await terminal(sid);
      expect(done).toMatchObject({ status: "completed", result: { city: "Oslo", temp: 3 } });
      expect(done!.result_error).toBeUndefined();
      const [first, second] = replay.requestsFor("openai");
      expect(first!.body?.response_format).toEqual({ type: "json_schema", json_schema: { name: "result", schema: SCHEMA, strict: false } });
      expect(bodyText(second)).toContain("does not match the required output");
      expect(replay.requestsFor("openai")).toHaveLength(2);
      expect(await until(() => completed.find((e) => e.session_id === sid), "turn_completed", TURN_DEADLINE_MS)).toMatchObject({
        result: { city: "Oslo", temp: 3 },
      });
    });

    it("Anthropic: a submit_result tool the harness consumes; an invalid call is answered with the errors, the valid one ends the turn", async () => {
      const sid = sessionId("json-anthropic");
      replay.enqueue(
        "anthropic",
        reply(call("submit_result", { city: "Oslo" }, "s1")),
        reply(call("submit_result", { city: "Oslo", temp: 3 }, "s2")),
      );
      await send({ session_id: sid, message: "weather in Oslo?", ...CLAUDE, options: { output } });
      const done = await terminal(sid);
      expect(done).toMatchObject({ status: "completed", result: { city: "Oslo", temp: 3 } });
      const [first, second] = replay.requestsFor("anthropic");
      expect(first!.body?.tools).toEqual(
        expect.arrayContaining([expect.objectContaining({ name: "submit_result", input_schema: SCHEMA })]),
      );
      expect(first!.body?.response_format).toBeUndefined();
      expect(bodyText(second)).toContain("does not match the required output");
      expect(replay.requestsFor("anthropic")).toHaveLength(2);
    });

    it("after two retries the turn completes with result_error and the raw answer", async () => {
      const sid = sessionId("json-give-up");
      replay.enqueue("openai", reply(say("no")), reply(say("still no")), reply(say("never")));
      await send({ session_id: sid, message: "weather?", options: { output } });
      const done = await terminal(sid);
      expect(done).toMatchObject({
        status: "completed",
        result: "never",
        result_error: expect.stringContaining("no valid result after 2"),
      });
      expect(replay.requestsFor("openai")).toHaveLength(3);
    });

    it("a turn without a contract is not held to one: no response_format, the text is the result", async () => {
      const sid = sessionId("text");
      replay.enqueue("openai", replyWith({}, say("plain")));
      await send({ session_id: sid, message: "hi", options: { output: { type: "text" } } });
      expect(await terminal(sid)).toMatchObject({ result: "plain" });
      expect(replay.requestsFor("openai")[0]!.body?.response_format).toBeUndefined();
    });
  });
});
