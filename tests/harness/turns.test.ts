// The agent harness end to end: exactly `npm start` (every built-in harness worker inside the
// deployed Worker), the real provider clients talking to a local replay of OpenAI's and
// Anthropic's SSE, the policy from a permissions file, and targets registered by the unmodified
// iii-sdk with no harness registration step. Each scenario drives a turn the way a UI does — over
// the HTTP API — and checks what a user would see: the `agent::events` a UI renders, the turn's
// state, the transcript, and what the model provider was sent.
import { readFileSync } from "node:fs";
import type { AgentEvent, AgentMessage, FunctionResultMessage } from "@iii-edge/protocol/harness";
import { registerWorker as registerEdgeWorker, type EdgeClient } from "@iii-edge/sdk-edge";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, reply, say, startProviderReplay, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { permissionsFile, replayEnv } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { asText, type EventItem, metaOf, openaiMessages, textOf, turnClient, TURN_DEADLINE_MS, types, user } from "./turn-client.ts";

const PERMISSIONS = `version: 1
rules:
  - '!approval::*'
  - rule_id: no-deletes
    function: files::delete
    action: deny
  - 'weather::*'
  - 'slow::*'
  - 'outbox::*'
  - state::get
  - engine::functions::list
# anything else (mail::send) waits for a person
`;

let replay: ReplayServer;
let engine: EngineServer;
let iii: IIIClient;
let apps: IIIClient | undefined;
let strictApps: { iii: IIIClient; edge: EdgeClient } | undefined;
/** What each application function received: the payload and the invocation metadata (who called). */
const ran: { fn: string; args: Record<string, unknown>; meta: Record<string, unknown> }[] = [];
let releaseSlow: (() => void) | undefined;
const slowStarted: string[] = [];

const ranOf = (fn: string) => ran.filter((r) => r.fn === fn);

// ------------------------------------------------------------------ helpers: what a UI does (turn-client.ts)

let ui: ReturnType<typeof turnClient>;
const post = (p: string, body: unknown) => ui.post(p, body);
const startTurn = (sid: string, text: string, extra?: Record<string, unknown>) => ui.startTurn(sid, text, extra);
const turnState = (sid: string) => ui.turnState(sid);
/** The turn's record once it waits for approval. */
const parkedTurn = (sid: string) =>
  until(
    async () => {
      const v = await turnState(sid);
      return v?.state === "function_awaiting_approval" ? v : undefined;
    },
    "the turn parked",
    TURN_DEADLINE_MS,
  );
const allEvents = (sid: string, after?: string) => ui.allEvents(sid, after);
const finished = (sid: string, state?: "stopped" | "failed") => ui.finished(sid, state);
const transcript = (sid: string) => ui.transcript(sid);

// ------------------------------------------------------------------ setup

beforeAll(async () => {
  replay = await startProviderReplay();
  const rules = permissionsFile(PERMISSIONS);
  engine = await startEngine({
    env: {
      ...replayEnv(replay, { anthropic: true }),
      III_PERMISSIONS_PATH: rules,
    },
  });
  iii = registerWorker(engine.wsUrl, { workerName: "harness-e2e-client", otel: { enabled: false } });
  ui = turnClient(engine, () => iii);
  await until(async () => (await fetch(`${engine.url}/api/turns/none`)).status === 404 || undefined, "the harness routes", 30_000, 200);
});

afterAll(async () => {
  await Promise.allSettled([iii?.shutdown(), apps?.shutdown(), strictApps?.iii.shutdown(), strictApps?.edge.shutdown()]);
  await engine?.stop();
  await replay?.close();
});

beforeEach(() => {
  replay.reset();
});

/** The application's functions, registered with the unmodified iii-sdk: no harness step. */
async function registerApps(): Promise<void> {
  if (apps) return;
  apps = registerWorker(engine.wsUrl, { workerName: "weather-app", otel: { enabled: false } });
  const record = (
    fn: string,
    answer: (args: Record<string, unknown>, meta: Record<string, unknown>) => unknown | Promise<unknown>,
    description: string,
    schema?: Record<string, unknown>,
  ) =>
    apps!.registerFunction(
      fn,
      async (args: Record<string, unknown>, metadata?: unknown) => {
        ran.push({ fn, args, meta: metaOf(metadata) });
        return answer(args, metaOf(metadata));
      },
      schema ? { description, request_format: { type: "object", ...schema } } : { description },
    );
  record("weather::forecast", (a) => ({ city: a.city, sky: "clear", high_c: 21 }), "The weather forecast for a city.", {
    properties: { city: { type: "string" } },
    required: ["city"],
  });
  record("files::delete", () => ({ deleted: true }), "Delete a file.");
  record("mail::send", (a) => ({ sent: true, to: a.to }), "Send an e-mail.");
  record(
    "slow::wait",
    async (_a, meta) => {
      slowStarted.push(String(meta.session_id));
      await new Promise<void>((r) => (releaseSlow = r));
      return { waited: true };
    },
    "Waits until released (a long-running call).",
  );
  await until(async () => {
    const r = (await iii.trigger({ function_id: "engine::functions::list", payload: {} })) as { functions: { function_id: string }[] };
    return ["weather::forecast", "files::delete", "mail::send", "slow::wait"].every((id) => r.functions.some((f) => f.function_id === id));
  }, "the app's functions");
}

/** The e-mail a model sends, as a function that accepts nothing else would declare it. */
const EMAIL = { to: "ada@example.com", subject: "Lunch", body: "Noon at the usual place?" };
const strictEmail = z.strictObject({ to: z.string(), subject: z.string(), body: z.string() });

/** Two functions with strict schemas, as a user writes them: `outbox::send` by the unmodified
 * iii-sdk with an `additionalProperties: false` request_format (its handler refuses any other key),
 * `outbox::send_typed` by iii-edge's SDK with a zod `.strict()` input. Each records what it got. */
async function registerStrictApps(): Promise<void> {
  if (strictApps) return;
  const request_format = {
    type: "object" as const,
    properties: { to: { type: "string" }, subject: { type: "string" }, body: { type: "string" } },
    required: ["to", "subject", "body"],
    additionalProperties: false,
  };
  const plain = registerWorker(engine.wsUrl, { workerName: "strict-iii-sdk", otel: { enabled: false } });
  plain.registerFunction(
    "outbox::send",
    async (args: Record<string, unknown>, metadata?: unknown) => {
      ran.push({ fn: "outbox::send", args, meta: metaOf(metadata) });
      const checked = strictEmail.safeParse(args);
      if (!checked.success) throw new Error(`invalid request: ${z.prettifyError(checked.error)}`);
      return { queued: true, to: checked.data.to };
    },
    { description: "Queue an e-mail.", request_format },
  );
  const edge = registerEdgeWorker(engine.wsUrl, { workerName: "strict-sdk-edge" });
  edge.registerFunction(
    "outbox::send_typed",
    (args, metadata) => {
      ran.push({ fn: "outbox::send_typed", args, meta: metaOf(metadata) });
      return { queued: true, to: args.to };
    },
    { description: "Queue an e-mail (typed).", input: strictEmail },
  );
  strictApps = { iii: plain, edge };
  await until(async () => {
    const r = (await iii.trigger({ function_id: "engine::functions::list", payload: {} })) as { functions: { function_id: string }[] };
    return ["outbox::send", "outbox::send_typed"].every((id) => r.functions.some((f) => f.function_id === id));
  }, "the strict functions");
}

// ------------------------------------------------------------------ scenarios

describe("plain chat", () => {
  it("OpenAI over POST /api/turns: one round, the reply streamed as events, the transcript user → assistant", async () => {
    const sid = "chat-openai";
    replay.enqueue("openai", reply(say("Hello! How can I help?")));
    await startTurn(sid, "hi there");
    const { view, events } = await finished(sid);
    expect(view).toMatchObject({ session_id: sid, state: "stopped", turn_count: 1 });
    const t = types(events);
    expect(t).toContain("message_update");
    expect(t.filter((x) => x === "message_complete")).toHaveLength(1);
    expect(t.at(-1)).toBe("agent_end");
    const complete = events.find((e) => e.data.type === "message_complete")!.data as Extract<AgentEvent, { type: "message_complete" }>;
    expect(textOf(complete.message)).toBe("Hello! How can I help?");
    expect(complete.message.stop_reason).toBe("end");
    const msgs = await transcript(sid);
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(textOf(msgs[1])).toBe("Hello! How can I help?");
    // What the model was sent: the key, the system prompt built by provisioning, the one tool, the user's text.
    const [req] = replay.requestsFor("openai");
    expect(req!.headers.authorization).toBe("Bearer sk-test");
    const sent = openaiMessages(req);
    expect(sent[0]!.role).toBe("system");
    expect(asText(sent[0]!.content)).toContain("agent_trigger");
    expect(asText(sent.at(-1)!.content)).toContain("hi there");
    expect((req!.body!.tools as { function: { name: string } }[]).map((x) => x.function.name)).toEqual(["agent_trigger"]);
  });

  it("Anthropic: the same turn through the Messages API", async () => {
    const sid = "chat-anthropic";
    replay.enqueue("anthropic", reply(say("Bonjour.")));
    const res = await post("api/turns", {
      payload: { session_id: sid, model: "claude-sonnet-4-6", provider: "anthropic", messages: [user("salut")] },
    });
    expect(res.status).toBe(200);
    const { events } = await finished(sid);
    expect(textOf((events.find((e) => e.data.type === "message_complete")!.data as { message: AgentMessage }).message)).toBe("Bonjour.");
    expect((await transcript(sid)).map((m) => m.role)).toEqual(["user", "assistant"]);
    const [req] = replay.requestsFor("anthropic");
    expect(req!.headers["x-api-key"]).toBe("sk-ant-test");
    expect(JSON.stringify(req!.body!.system)).toContain("agent_trigger");
    expect(JSON.stringify(req!.body!.messages)).toContain("salut");
  });

  it("a second start while the turn runs is 409 session_busy", async () => {
    await registerApps();
    const sid = "busy";
    replay.enqueue("openai", reply(callAgentTrigger("slow::wait", {}, "busy-1")), reply(say("done")));
    await startTurn(sid, "wait a bit");
    await until(() => slowStarted.includes(sid), "the slow call to start", TURN_DEADLINE_MS);
    const again = await post("api/turns", { payload: { session_id: sid, model: "gpt-4o", messages: [user("again")] } });
    expect(again.status).toBe(409);
    expect(await again.json()).toEqual({ session_id: sid, started: false, reason: "session_busy" });
    releaseSlow!();
    await finished(sid);
  });
});

describe("function calls through the policy", () => {
  it("allowed: a function an iii-sdk worker registered a moment ago is in the prompt, runs once, and its result reaches the model", async () => {
    await registerApps();
    const sid = "call-allowed";
    replay.enqueue("openai", reply(callAgentTrigger("weather::forecast", { city: "Lyon" }, "w-1")), reply(say("Clear skies in Lyon.")));
    await startTurn(sid, "weather in Lyon?");
    const { view, events } = await finished(sid);
    expect(view.turn_count).toBe(2);
    expect(ranOf("weather::forecast").filter((r) => r.meta.session_id === sid)).toHaveLength(1);
    const forecast = ranOf("weather::forecast").find((r) => r.meta.session_id === sid)!;
    expect(forecast.args).toMatchObject({ city: "Lyon" });
    expect(forecast.meta).toMatchObject({ function_call_id: "w-1" });
    const end = events.find((e) => e.data.type === "function_execution_end")!.data as Extract<
      AgentEvent,
      { type: "function_execution_end" }
    >;
    expect(end).toMatchObject({ function_call_id: "w-1", function_id: "weather::forecast", is_error: false });
    expect(types(events).indexOf("function_execution_start")).toBeLessThan(types(events).indexOf("function_execution_end"));
    const msgs = await transcript(sid);
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant", "function_result", "assistant"]);
    expect((msgs[2] as FunctionResultMessage).is_error).toBe(false);
    const [first, second] = replay.requestsFor("openai");
    // The live catalog: the schema the app registered, in the system prompt of this very run.
    expect(asText(openaiMessages(first)[0]!.content)).toContain("`weather::forecast` — The weather forecast for a city.");
    expect(asText(openaiMessages(first)[0]!.content)).toContain('"required":["city"]');
    const tool = openaiMessages(second).find((m) => m.role === "tool");
    expect(tool?.tool_call_id).toBe("w-1");
    expect(asText(tool?.content)).toContain("clear");
  });

  it("denied by a rule: the call never runs; the model reads why", async () => {
    await registerApps();
    const sid = "call-denied";
    const before = ranOf("files::delete").length;
    replay.enqueue(
      "openai",
      reply(callAgentTrigger("files::delete", { path: "/etc/passwd" }, "d-1")),
      reply(say("I am not allowed to delete that.")),
    );
    await startTurn(sid, "delete /etc/passwd");
    const { view, events } = await finished(sid);
    expect(view.turn_count).toBe(2);
    expect(ranOf("files::delete").length).toBe(before);
    expect(events.find((e) => e.data.type === "function_execution_end")!.data).toMatchObject({
      function_call_id: "d-1",
      is_error: true,
      result: { details: { denied_by: "permissions" } },
    });
    const fr = (await transcript(sid)).find((m) => m.role === "function_result") as FunctionResultMessage;
    expect(fr.is_error).toBe(true);
    expect(fr.details).toMatchObject({ status: "denied", denied_by: "permissions", rule_id: "no-deletes", function_id: "files::delete" });
    const tool = openaiMessages(replay.requestsFor("openai")[1]).find((m) => m.role === "tool");
    expect(asText(tool?.content)).toContain("no-deletes");
  });

  it("a function with a strict schema gets exactly the model's arguments; who called is its metadata", async () => {
    await registerStrictApps();
    const sid = "call-strict";
    replay.enqueue(
      "openai",
      reply(callAgentTrigger("outbox::send", EMAIL, "s-1"), callAgentTrigger("outbox::send_typed", EMAIL, "s-2")),
      reply(say("Both queued.")),
    );
    await startTurn(sid, "mail ada about lunch");
    const { events } = await finished(sid);
    const ends = events
      .map((e) => e.data)
      .filter((d): d is Extract<AgentEvent, { type: "function_execution_end" }> => d.type === "function_execution_end");
    expect(ends.map((e) => [e.function_call_id, e.is_error])).toEqual([
      ["s-1", false],
      ["s-2", false],
    ]);
    const got = ran.filter((r) => r.meta.session_id === sid);
    expect(got).toEqual([
      { fn: "outbox::send", args: EMAIL, meta: { session_id: sid, function_call_id: "s-1", function_id: "outbox::send" } },
      { fn: "outbox::send_typed", args: EMAIL, meta: { session_id: sid, function_call_id: "s-2", function_id: "outbox::send_typed" } },
    ]);
    const results = (await transcript(sid)).filter((m): m is FunctionResultMessage => m.role === "function_result");
    expect(results.map((r) => r.details)).toEqual([
      { queued: true, to: EMAIL.to },
      { queued: true, to: EMAIL.to },
    ]);
  });

  it("needs approval: the turn parks with the call visible; POST /api/approvals allow runs it once and the turn finishes", async () => {
    await registerApps();
    const sid = "call-approved";
    replay.enqueue("openai", reply(callAgentTrigger("mail::send", { to: "ada@example.com" }, "m-1")), reply(say("Sent.")));
    await startTurn(sid, "mail ada");
    const parked = await parkedTurn(sid);
    expect(parked.awaiting_approval).toEqual([
      expect.objectContaining({ function_call_id: "m-1", function_id: "mail::send", args: { to: "ada@example.com" } }),
    ]);
    expect(ranOf("mail::send").filter((r) => r.meta.session_id === sid)).toHaveLength(0);
    const changed = (await allEvents(sid))
      .filter((e) => e.data.type === "turn_state_changed")
      .map((e) => (e.data as Extract<AgentEvent, { type: "turn_state_changed" }>).new_value);
    expect(changed.at(-1)).toMatchObject({
      state: "function_awaiting_approval",
      awaiting_approval: [expect.objectContaining({ function_call_id: "m-1" })],
    });

    const res = await post("api/approvals", { session_id: sid, function_call_id: "m-1", decision: "allow" });
    expect(res.status).toBe(200);
    await finished(sid);
    expect(ranOf("mail::send").filter((r) => r.meta.session_id === sid)).toHaveLength(1);
    const fr = (await transcript(sid)).find((m) => m.role === "function_result") as FunctionResultMessage;
    expect(fr).toMatchObject({ function_call_id: "m-1", is_error: false });
    expect(replay.requestsFor("openai")).toHaveLength(2);
  });

  it("denied by a person: the call never runs; the model reads the operator's reason", async () => {
    await registerApps();
    const sid = "call-human-deny";
    replay.enqueue(
      "openai",
      reply(callAgentTrigger("mail::send", { to: "all@example.com" }, "h-1")),
      reply(say("Understood, not sending.")),
    );
    await startTurn(sid, "mail everyone");
    await until(async () => (await turnState(sid))?.state === "function_awaiting_approval", "the turn parked", TURN_DEADLINE_MS);
    const res = await post("api/approvals", { session_id: sid, function_call_id: "h-1", decision: "deny", reason: "not to everyone" });
    expect(res.status).toBe(200);
    const { events } = await finished(sid);
    expect(events.find((e) => e.data.type === "function_execution_end")!.data).toMatchObject({
      function_call_id: "h-1",
      is_error: true,
      result: { details: { approval_denied: true, decision: "deny" } },
    });
    expect(ranOf("mail::send").filter((r) => r.meta.session_id === sid)).toHaveLength(0);
    const fr = (await transcript(sid)).find((m) => m.role === "function_result") as FunctionResultMessage;
    expect(fr.is_error).toBe(true);
    expect(textOf(fr)).toContain("not to everyone");
    expect(asText(openaiMessages(replay.requestsFor("openai")[1]).find((m) => m.role === "tool")?.content)).toContain("not to everyone");
  });

  it("parallel calls: the one waiting for approval holds up none of its siblings; results keep the call order", async () => {
    await registerApps();
    const sid = "call-parallel";
    replay.enqueue(
      "openai",
      reply(
        callAgentTrigger("mail::send", { to: "bob@example.com" }, "p-mail"),
        callAgentTrigger("weather::forecast", { city: "Oslo" }, "p-w1"),
        callAgentTrigger("weather::forecast", { city: "Rome" }, "p-w2"),
      ),
      reply(say("Mailed Bob; Oslo and Rome are clear.")),
    );
    await startTurn(sid, "mail bob and check two cities");
    const parked = await parkedTurn(sid);
    expect(parked.awaiting_approval!.map((a) => a.function_call_id)).toEqual(["p-mail"]);
    // While parked, both forecasts already ran and their results are out.
    const ends = (await allEvents(sid))
      .filter((e) => e.data.type === "function_execution_end")
      .map((e) => (e.data as { function_call_id: string }).function_call_id);
    expect(ends.sort()).toEqual(["p-w1", "p-w2"]);
    expect(
      ranOf("weather::forecast")
        .filter((r) => r.meta.session_id === sid)
        .map((r) => r.args.city),
    ).toEqual(["Oslo", "Rome"]);

    expect((await post("api/approvals", { session_id: sid, function_call_id: "p-mail", decision: "allow" })).status).toBe(200);
    await finished(sid);
    const results = (await transcript(sid)).filter((m): m is FunctionResultMessage => m.role === "function_result");
    expect(results.map((r) => r.function_call_id)).toEqual(["p-mail", "p-w1", "p-w2"]);
    expect(results.every((r) => !r.is_error)).toBe(true);
    const tools = openaiMessages(replay.requestsFor("openai")[1])
      .filter((m) => m.role === "tool")
      .map((m) => m.tool_call_id);
    expect(tools).toEqual(["p-mail", "p-w1", "p-w2"]);
  });
});

describe("steering, limits and failures", () => {
  it("a steering message sent mid-turn joins the transcript and the next round's request", async () => {
    await registerApps();
    const sid = "steered";
    replay.enqueue("openai", reply(callAgentTrigger("slow::wait", {}, "s-1")), reply(say("Including Paris as well.")));
    await startTurn(sid, "check the weather");
    await until(() => slowStarted.includes(sid), "the slow call to start", TURN_DEADLINE_MS);
    const steer = await post(`api/turns/${sid}/steer`, { message: "also check Paris" });
    expect(steer.status).toBe(200);
    releaseSlow!();
    const { view, events } = await finished(sid);
    expect(view.turn_count).toBe(2);
    expect(types(events).filter((t) => t === "message_complete")).toHaveLength(2);
    const msgs = await transcript(sid);
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant", "function_result", "user", "assistant"]);
    expect(textOf(msgs[3])).toBe("also check Paris");
    const second = openaiMessages(replay.requestsFor("openai")[1]);
    expect(second.at(-1)!.role).toBe("user");
    expect(asText(second.at(-1)!.content)).toContain("also check Paris");
  });

  it("max_turns: the loop ends after the limit with the notice, one model call, stopped", async () => {
    await registerApps();
    const sid = "max-turns";
    replay.enqueue("openai", reply(callAgentTrigger("weather::forecast", { city: "Nice" }, "x-1")));
    await startTurn(sid, "loop forever", { max_turns: 1 });
    const { view, events } = await finished(sid);
    expect(view).toMatchObject({ state: "stopped", turn_count: 1, max_turns: 1 });
    expect(replay.requestsFor("openai")).toHaveLength(1);
    const last = (await transcript(sid)).at(-1)!;
    expect(last).toMatchObject({ role: "assistant", stop_reason: "end" });
    expect(textOf(last)).toBe("loop stopped: max_turns (1) reached");
    expect(types(events).filter((t) => t === "turn_end")).toHaveLength(1);
  });

  it("POST …/stop while a call waits for approval: the call is aborted, never runs, and the run stops", async () => {
    await registerApps();
    const sid = "stopped-parked";
    replay.enqueue("openai", reply(callAgentTrigger("mail::send", { to: "eve@example.com" }, "k-1")));
    await startTurn(sid, "mail eve");
    await until(async () => (await turnState(sid))?.state === "function_awaiting_approval", "the turn parked", TURN_DEADLINE_MS);
    const res = await post(`api/turns/${sid}/stop`, {});
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ session_id: sid, stopping: true, state: "function_awaiting_approval" });
    const { view } = await finished(sid);
    expect(view.awaiting_approval ?? []).toEqual([]);
    expect(ranOf("mail::send").filter((r) => r.meta.session_id === sid)).toHaveLength(0);
    expect(replay.requestsFor("openai")).toHaveLength(1);
    // The parked call is closed with an aborted result, so no function_call is left dangling.
    const fr = (await transcript(sid)).find((m) => m.role === "function_result") as FunctionResultMessage;
    expect(fr).toMatchObject({ function_call_id: "k-1", is_error: true, details: { decision: "aborted" } });
  });

  it("a provider error: the run fails with stop_reason error shown to the UI, and no assistant entry", async () => {
    const sid = "provider-error";
    replay.enqueue("openai", {
      kind: "http",
      status: 400,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        error: { message: "Unrecognized request argument supplied: frobnicate", type: "invalid_request_error", param: null, code: null },
      }),
    });
    await startTurn(sid, "hello");
    const { view, events } = await finished(sid, "failed");
    expect(view.error?.kind).toBe("permanent");
    expect(view.error?.message).toContain("frobnicate");
    const complete = events.find((e) => e.data.type === "message_complete")!.data as Extract<AgentEvent, { type: "message_complete" }>;
    expect(complete.message).toMatchObject({ stop_reason: "error", error_kind: "permanent" });
    expect((await transcript(sid)).map((m) => m.role)).toEqual(["user"]);
    expect(replay.requestsFor("openai")).toHaveLength(1);
  });
});

describe("following a turn", () => {
  it("live from a stream-trigger worker, and from a browser socket that drops mid-turn and resumes losslessly with run::events {after}", async () => {
    await registerApps();
    const sid = "followed";
    const viaTrigger: { id: string; type: string }[] = [];
    const follower = registerWorker(engine.wsUrl, { workerName: "turn-follower", otel: { enabled: false } });
    try {
      follower.registerFunction("console::on_agent_event", async (p: { id: string | null; event: { type: string; data: AgentEvent } }) => {
        if (p.event.type === "create" && p.id) viaTrigger.push({ id: p.id, type: p.event.data.type });
        return null;
      });
      follower.registerTrigger({
        type: "stream",
        function_id: "console::on_agent_event",
        config: { stream_name: "agent::events", group_id: sid },
      });
      await until(async () => {
        const r = (await iii.trigger({
          function_id: "engine::registered-triggers::list",
          payload: { function_id: "console::on_agent_event" },
        })) as { registered_triggers: { status: string }[] };
        return r.registered_triggers.some((t) => t.status === "active") || r.registered_triggers.length > 0;
      }, "the follower's stream trigger");

      // The browser joins before the turn starts, sees events live, then drops mid-turn.
      const ws = new WebSocket(`${engine.wsUrl}/_iii/streams`);
      const live: { id: string; type: string }[] = [];
      ws.onmessage = (m) => {
        const p = JSON.parse(String(m.data)) as { id: string | null; event: { type: string; data: AgentEvent } };
        if (p.event.type === "create" && p.id) live.push({ id: p.id, type: p.event.data.type });
      };
      await new Promise((resolve, reject) => ((ws.onopen = resolve), (ws.onerror = reject)));
      ws.send(JSON.stringify({ type: "join", data: { subscriptionId: "ui", streamName: "agent::events", groupId: sid } }));

      replay.enqueue("openai", reply(callAgentTrigger("slow::wait", {}, "f-1")), reply(say("All done.")));
      await startTurn(sid, "take your time");
      await until(() => live.some((e) => e.type === "function_execution_start"), "the browser to see the call start", TURN_DEADLINE_MS);
      ws.close();
      const seen = live.slice();
      // The event comes before the dispatch: release this call, not the previous test's.
      await until(() => slowStarted.includes(sid), "the slow call to start", TURN_DEADLINE_MS);
      releaseSlow!();
      const { events } = await finished(sid);

      // Resume from the last item the browser saw: nothing lost, nothing twice.
      const rest = await allEvents(sid, seen.at(-1)!.id);
      expect([...seen.map((e) => e.id), ...rest.map((e) => e.item_id)]).toEqual(events.map((e) => e.item_id));
      expect(rest.at(-1)!.data.type).toBe("agent_end");
      // The stream trigger saw every event, in order.
      await until(() => viaTrigger.length === events.length, "the follower to see every event", TURN_DEADLINE_MS);
      expect(viaTrigger.map((e) => e.id)).toEqual(events.map((e) => e.item_id));
      expect(viaTrigger.at(-1)!.type).toBe("agent_end");
    } finally {
      await follower.shutdown();
    }
  });

  it("docs/harness.md's curl session, run as written: each command's answer is the one the page shows", async () => {
    await registerApps();
    // The page's session is `s1` and its model's call is `call_1`; a fresh id keeps this engine's
    // other sessions apart, and is put back wherever the page names `s1`.
    const sid = `docs-${crypto.randomUUID().slice(0, 8)}`;
    const ours = (text: string) => text.replace(/\bs1\b/g, sid);
    replay.enqueue("openai", reply(callAgentTrigger("mail::send", { to: "ada@example.com" }, "call_1")), reply(say("Sent.")));
    const steps = curlSession(readFileSync(new URL("../../docs/harness.md", import.meta.url), "utf8"), "## Following a turn");
    expect(steps.map((s) => `${s.method} ${s.path}`)).toEqual([
      "POST /api/turns",
      "GET /api/turns/s1",
      "GET /api/turns/s1/events?limit=3",
      "POST /api/approvals",
      "GET /api/turns/s1/events?after=s1-000000000003&limit=200",
      "GET /api/turns/s1",
    ]);
    const run = async (i: number) => {
      const { method, path, body } = steps[i]!;
      const res = await fetch(`${engine.url}${ours(path)}`, {
        method,
        ...(body === undefined ? {} : { body: ours(body), headers: { "content-type": "application/json" } }),
      });
      expect(res.status, `${method} ${path}`).toBe(200);
      return (await res.json()) as Record<string, unknown>;
    };
    const shown = (i: number) => JSON.parse(ours(steps[i]!.output)) as Record<string, unknown>;

    expect(await run(0)).toEqual(shown(0));
    await parkedTurn(sid); // the page's reader runs the next command once the model has asked
    // What differs from run to run: the times, the rules' version, and the arguments' hash (it covers the call).
    const waiting = (shown(1).awaiting_approval as Record<string, unknown>[])[0];
    const varying = {
      args_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      policy_version: expect.any(String),
      pending_at: expect.any(Number),
      expires_at: expect.any(Number),
    };
    expect(await run(1)).toEqual({ ...shown(1), awaiting_approval: [{ ...waiting, ...varying }] });
    const first = await run(2);
    // The page elides the messages ("…"): its ids, cursor and event types are what it promises.
    const firstShown = steps[2]!.output;
    const items = first.events as EventItem[];
    expect(items.map((e) => e.item_id)).toEqual([...firstShown.matchAll(/"item_id":"([^"]+)"/g)].map((m) => ours(m[1]!)));
    expect(items.map((e) => e.data.type)).toEqual([...firstShown.matchAll(/"type":"([a-z_]+)"/g)].map((m) => m[1]));
    expect(first.next).toBe(ours(/"next":"([^"]+)"/.exec(firstShown)![1]!));
    expect(await run(3)).toEqual(shown(3));
    await finished(sid); // likewise: the rest is read once the turn has ended
    const rest = await run(4);
    // Every event type the page lists appears, in its order; the cursor has the ids' shape.
    const listed = [...steps[4]!.output.matchAll(/"([a-z_]+)"/g)].map((m) => m[1]).filter((t) => t !== "events" && t !== "next");
    const got = (rest.events as EventItem[]).map((e) => e.data.type as string);
    let at = 0;
    for (const t of listed) {
      at = got.indexOf(t, at);
      expect(at, `${t} after the events before it, in ${got.join(",")}`).toBeGreaterThanOrEqual(0);
      at += 1;
    }
    expect(rest.next).toMatch(new RegExp(`^${sid}-\\d{12}$`));
    expect(await run(5)).toEqual(shown(5));
    expect(ranOf("mail::send").filter((r) => r.meta.session_id === sid)).toHaveLength(1);
  });

  it("a console joined to agent::sessions sees the sessions as they are created", async () => {
    const sessions = (await iii.trigger({ function_id: "stream::list", payload: { stream_name: "agent::sessions", group_id: "all" } })) as {
      added: string[];
    }[];
    const ids = sessions.flatMap((s) => s.added);
    expect(ids).toEqual(expect.arrayContaining(["chat-openai", "chat-anthropic", "call-allowed", "followed"]));
  });
});

describe("credentials stay with the providers", () => {
  const SESSIONS = [
    "chat-openai",
    "chat-anthropic",
    "call-allowed",
    "call-approved",
    "call-parallel",
    "steered",
    "provider-error",
    "followed",
  ];
  const KEYS = ["sk-test", "sk-ant-test"];
  const leaks = (what: string, text: string) => KEYS.filter((k) => text.includes(k)).map((k) => `${what} contains ${k}`);

  it("no key in any event, turn state, transcript, run request, the catalog, the engine's log — and a browser cannot ask for one", async () => {
    const found: string[] = [];
    for (const sid of SESSIONS) {
      found.push(...leaks(`agent::events of ${sid}`, JSON.stringify(await allEvents(sid))));
      found.push(...leaks(`turn state of ${sid}`, JSON.stringify(await turnState(sid))));
      found.push(...leaks(`transcript of ${sid}`, JSON.stringify(await transcript(sid))));
    }
    for (const scope of ["run_request", "turn_state", "auth_credentials", "models"]) {
      found.push(...leaks(`state scope ${scope}`, JSON.stringify(await iii.trigger({ function_id: "state::list", payload: { scope } }))));
    }
    found.push(
      ...leaks("engine::functions::list", JSON.stringify(await iii.trigger({ function_id: "engine::functions::list", payload: {} }))),
    );
    found.push(...leaks("the engine's output", engine.output()));
    expect(found).toEqual([]);

    // Status says a key is configured, never which.
    const status = (await iii.trigger({ function_id: "auth::status", payload: { provider: "openai" } })) as {
      configured: boolean;
      label?: string;
    };
    expect(status.configured).toBe(true);
    expect(leaks("auth::status", JSON.stringify(status))).toEqual([]);
    // What a page can do — POST /_iii/invoke, no proof — gets a refusal, not the credential.
    const res = await fetch(`${engine.url}/_iii/invoke`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ function_id: "auth::get_token", payload: { provider: "openai" } }),
    });
    const body = await res.text();
    expect(body).toMatch(/forbidden/);
    expect(leaks("auth::get_token over HTTP", body)).toEqual([]);
  });
});

/** The `$ curl …` commands of a page's first sh block after `heading`, each with what the page shows it answer. */
function curlSession(page: string, heading: string): { method: string; path: string; body?: string; output: string }[] {
  const block = page.slice(page.indexOf(heading)).split("```sh\n")[1]!.split("\n```")[0]!;
  const out: { method: string; path: string; body?: string; output: string }[] = [];
  for (const chunk of block.split(/^\$ /m).slice(1)) {
    const lines = chunk.split("\n");
    let command = "";
    while (lines.length > 0) {
      const line = lines.shift()!;
      command += line.replace(/\\$/, "");
      if (!line.endsWith("\\")) break;
    }
    command = command.replace(/\s+#.*$/, "");
    const words = [...command.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]!);
    const url = words.find((w) => w.startsWith("localhost:8787"))!;
    const data = words[words.indexOf("-d") + 1];
    out.push({
      method: words.includes("-X") ? words[words.indexOf("-X") + 1]! : "GET",
      path: url.slice("localhost:8787".length),
      ...(words.includes("-d") ? { body: data } : {}),
      output: lines.join("\n").trim(),
    });
  }
  return out;
}
