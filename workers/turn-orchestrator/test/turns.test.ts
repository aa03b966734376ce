// The turn-orchestrator alone against the engine core served in this process
// (tests/support/node-engine.ts; docs/harness-contracts.md §2, §3): the engine's own queue steps,
// state, state triggers and channels over node:sqlite, the real session-storage and policy workers;
// stand-ins register the other workers' function ids (provisioning, the model, the functions the
// model calls). The same workers inside workerd are the harness suites' (tests/harness).
import { AGENT_TRIGGER_FUNCTION, type AgentEvent, type AssistantMessage, type FunctionResultMessage } from "@iii-edge/protocol/harness";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeEngine } from "@iii-edge/test-support/node-engine";
import { until } from "@iii-edge/test-support/wait";
import {
  call,
  events,
  finalEvents,
  gate,
  removePolicy,
  startNodeHarness,
  start,
  stopHarness,
  textOf,
  transcript,
  usePolicyStandIn,
  useRealPolicy,
  view,
  waitState,
  waitView,
  type Harness,
} from "./support/harness.ts";
import {
  callAnswer,
  connect,
  errorAnswer,
  registerProvisioning,
  sessionOf,
  SYSTEM_PROMPT,
  textAnswer,
  type PolicyRule,
} from "./support/stand-ins.ts";

let h: Harness<NodeEngine>;

beforeAll(async () => {
  h = await startNodeHarness();
});
afterAll(async () => {
  await stopHarness(h);
});

const requestsOf = (model: string) => h.provider.requests.filter((r) => r.model === model);
const callsOf = (fn: string, sid?: string) => h.targets.calls.filter((c) => c.fn === fn && (sid === undefined || sessionOf(c) === sid));
const typesOf = (evs: AgentEvent[]) => evs.map((e) => e.type);
const count = (evs: AgentEvent[], type: AgentEvent["type"]) => evs.filter((e) => e.type === type).length;
const resultsOf = async (sid: string) =>
  (await transcript(h, sid)).filter((e) => e.message.role === "function_result").map((e) => e.message as FunctionResultMessage);
const rolesOf = async (sid: string) => (await transcript(h, sid)).map((e) => e.message.role);
const idsOf = async (sid: string) => (await transcript(h, sid)).map((e) => e.entry_id);
const stateGet = (scope: string, key: string) => call(h, "state::get", { scope, key });
const decide = (sid: string, cid: string, decision: "allow" | "deny", reason: string | null = null) =>
  call(h, "state::set", { scope: "approvals", key: `${sid}/${cid}`, value: { decision, reason } });

/** A model that makes `calls` on its first answer and says `text` after. */
function callThenText(model: string, calls: { id: string; fn: string; payload?: Record<string, unknown> }[], text = "all done") {
  h.scripts.set(model, (_req, n) => (n === 0 ? callAnswer(model, calls) : textAnswer(model, text)));
}

describe("run::start", () => {
  it("a plain text turn: one user and one assistant entry, one model call, the event plan in order", async () => {
    const sid = "plain";
    h.scripts.set("gpt-plain", () => textAnswer("gpt-plain", "Hello there"));
    expect(await start(h, sid, "gpt-plain")).toEqual({ session_id: sid, started: true });
    expect(await waitState(h, sid, "stopped")).toEqual({ session_id: sid, state: "stopped", turn_count: 1, max_turns: 16 });

    const t = await transcript(h, sid);
    expect(t.map((e) => e.entry_id)).toEqual(["e_m-plain_user_0", "e_m-plain_1_assistant"]);
    expect(textOf(t[1].message)).toBe("Hello there");
    const reqs = requestsOf("gpt-plain");
    expect(reqs).toHaveLength(1);
    expect(reqs[0]).toMatchObject({ system_prompt: SYSTEM_PROMPT, tools: [AGENT_TRIGGER_FUNCTION] });
    expect(reqs[0].messages.map((m) => m.role)).toEqual(["user"]);
    expect(h.provisioning.released).toContain(sid);

    const evs = await finalEvents(h, sid);
    expect(typesOf(evs).slice(0, 3)).toEqual(["agent_start", "message_start", "message_end"]);
    expect(evs.at(-1)?.type).toBe("agent_end");
    const updates = evs.filter((e) => e.type === "message_update");
    expect(updates.map((e) => (e.type === "message_update" ? e.llm_event.type : ""))).toEqual([
      "start",
      "text_start",
      "text_delta",
      "text_delta",
      "text_end",
    ]);
    const completes = evs.filter((e) => e.type === "message_complete");
    expect(completes).toHaveLength(1);
    expect(completes[0]).toMatchObject({ body_streamed: true, message: { stop_reason: "end" } });
    expect(count(evs, "turn_end")).toBe(1);
    const states = evs.flatMap((e) => (e.type === "turn_state_changed" ? [e.new_value.state] : []));
    expect(states).toEqual(["provisioning", "assistant_streaming", "steering_check", "stopped"]);
    const at = (t: AgentEvent["type"]) => typesOf(evs).indexOf(t);
    expect(at("message_update")).toBeLessThan(at("message_complete"));
    expect(at("message_complete")).toBeLessThan(at("turn_end"));
    // The session was announced once (its state:created is the harness's "new session" fan-out).
    expect(await stateGet("session_index", sid)).toMatchObject({ session_id: sid });
  });

  it("a busy session changes nothing and answers session_busy", async () => {
    const sid = "busy";
    const hold = gate();
    h.scripts.set("gpt-busy", () => ({ ...textAnswer("gpt-busy", "slow answer"), holdBeforeTerminal: hold.wait }));
    expect(await start(h, sid, "gpt-busy")).toMatchObject({ started: true });
    await until(() => requestsOf("gpt-busy").length === 1, "the model is answering");
    const record = await stateGet("turn_state", sid);
    const request = await stateGet("run_request", sid);
    const entries = await idsOf(sid);

    const again = await start(h, sid, "gpt-other", { message_id: "m-busy-2", messages: [{ role: "user", content: "second tab" }] });
    expect(again).toEqual({ session_id: sid, started: false, reason: "session_busy" });
    expect(await stateGet("turn_state", sid)).toEqual(record);
    expect(await stateGet("run_request", sid)).toEqual(request);
    expect(await idsOf(sid)).toEqual(entries);

    hold.release();
    await waitState(h, sid, "stopped");
    // The same message again after its run ended starts nothing; a new one starts a new run.
    expect(await start(h, sid, "gpt-busy")).toMatchObject({ started: false, reason: "session_busy" });
    h.scripts.set("gpt-other", () => textAnswer("gpt-other", "second"));
    expect(await start(h, sid, "gpt-other", { message_id: "m-busy-2" })).toMatchObject({ started: true });
    await waitView(h, sid, (v) => v.state === "stopped" && v.turn_count === 1, "the second run ended");
    await until(async () => (await idsOf(sid)).length === 4, "the second run's entries");
    expect(await idsOf(sid)).toEqual(["e_m-busy_user_0", "e_m-busy_1_assistant", "e_m-busy-2_user_0", "e_m-busy-2_1_assistant"]);
  });

  it("refuses bad input with a typed error and writes nothing", async () => {
    await expect(call(h, "run::start", { session_id: "a/b", model: "gpt-x" })).rejects.toMatchObject({ code: "invalid_input" });
    await expect(call(h, "run::start", { session_id: "nomodel" })).rejects.toMatchObject({ code: "invalid_input" });
    await expect(call(h, "run::start", { session_id: "badmsg", model: "gpt-x", messages: [{ role: "robot" }] })).rejects.toMatchObject({
      code: "invalid_input",
    });
    expect((await view(h, "nomodel")) ?? null).toBeNull(); // a null result arrives as no result
    expect((await view(h, "badmsg")) ?? null).toBeNull();
  });

  it("infers the provider from the model name when none is given, and honours an explicit one", async () => {
    h.scripts.set("gpt-infer", () => textAnswer("gpt-infer", "ok"));
    await start(h, "infer", "gpt-infer");
    await waitState(h, "infer", "stopped");
    expect(await stateGet("run_request", "infer")).toMatchObject({
      provider: "openai",
      model: "gpt-infer",
      max_turns: 16,
      system_prompt: SYSTEM_PROMPT,
    });
    // Explicit `anthropic`: nobody registers provider::anthropic::stream here, so the round ends
    // with a synthetic transient error and the run fails, saying which provider failed.
    await start(h, "explicit", "gpt-infer", { provider: "anthropic" });
    const v = await waitState(h, "explicit", "failed");
    expect(v.error).toEqual({ kind: "transient", message: expect.stringContaining("provider anthropic failed: function_not_found") });
  });
});

describe("the turn loop", () => {
  it("an allowed function call runs exactly once, with the model's arguments as data and the caller as metadata, and its result goes back to the model", async () => {
    const sid = "allow";
    callThenText("gpt-allow", [{ id: "c1", fn: "test::echo", payload: { x: 1 } }], "echo done");
    await start(h, sid, "gpt-allow");
    await waitState(h, sid, "stopped");

    expect(callsOf("test::echo", sid)).toEqual([
      { fn: "test::echo", data: { x: 1 }, metadata: { session_id: sid, function_call_id: "c1", function_id: "test::echo" } },
    ]);
    const t = await transcript(h, sid);
    expect(t.map((e) => e.message.role)).toEqual(["user", "assistant", "function_result", "assistant"]);
    expect(t[2].entry_id).toBe("e_m-allow_c1");
    expect(t[2].message).toMatchObject({
      function_call_id: "c1",
      function_id: "test::echo",
      is_error: false,
      content: [{ type: "text", text: "test::echo ran" }],
    });
    // The model's own call is unchanged on the transcript (the envelope is only what the target got).
    expect((t[1].message as AssistantMessage).content[0]).toMatchObject({
      type: "function_call",
      arguments: { function: "test::echo", payload: { x: 1 } },
    });
    const reqs = requestsOf("gpt-allow");
    expect(reqs).toHaveLength(2);
    expect(reqs[1].messages.map((m) => m.role)).toEqual(["user", "assistant", "function_result"]);

    const evs = await finalEvents(h, sid);
    const fx = evs.filter((e) => e.type === "function_execution_start" || e.type === "function_execution_end");
    expect(fx).toMatchObject([
      { type: "function_execution_start", function_call_id: "c1", function_id: "test::echo", args: { x: 1 } },
      { type: "function_execution_end", function_call_id: "c1", is_error: false },
    ]);
    expect(count(evs, "turn_end")).toBe(2);
    expect(evs.find((e) => e.type === "turn_end")).toMatchObject({ function_results: [{ function_call_id: "c1" }] });
    const ends = await call<unknown[]>(h, "stream::list", { stream_name: "agent::turn_end", group_id: sid });
    expect(ends).toHaveLength(2);
  });

  it("a call the policy denies is never run; the model reads the denial", async () => {
    const sid = "denied";
    callThenText("gpt-denied", [{ id: "d1", fn: "test::danger", payload: { path: "/", api_key: "sk-123" } }]);
    await start(h, sid, "gpt-denied");
    await waitState(h, sid, "stopped");
    expect(callsOf("test::danger")).toHaveLength(0);
    const [r] = await resultsOf(sid);
    expect(r).toMatchObject({
      function_call_id: "d1",
      is_error: true,
      details: { status: "denied", denied_by: "permissions", rule_id: "no-danger", args_excerpt: { path: "/", api_key: "<redacted>" } },
    });
    expect(textOf(r)).toContain("no-danger");
    expect(requestsOf("gpt-denied")).toHaveLength(2);
  });

  it("a batch whose every result asks to terminate ends the run after the batch", async () => {
    const sid = "terminate";
    callThenText("gpt-term", [{ id: "t1", fn: "test::terminate" }]);
    await start(h, sid, "gpt-term");
    await waitState(h, sid, "stopped");
    expect(requestsOf("gpt-term")).toHaveLength(1);
    expect(await rolesOf(sid)).toEqual(["user", "assistant", "function_result"]);
  });

  it("steering pushed mid-turn joins the transcript and gets its own round", async () => {
    const sid = "steer";
    const hold = gate();
    h.scripts.set("gpt-steer", (_r, n) =>
      n === 0 ? { ...textAnswer("gpt-steer", "first"), holdBeforeTerminal: hold.wait } : textAnswer("gpt-steer", "second"),
    );
    await start(h, sid, "gpt-steer");
    await until(() => requestsOf("gpt-steer").length === 1, "the first round is streaming");
    expect(await call(h, "run::steer", { session_id: sid, message: "also this" })).toEqual({ ok: true });
    hold.release();
    await waitState(h, sid, "stopped");
    expect((await transcript(h, sid)).map((e) => [e.entry_id, textOf(e.message)])).toEqual([
      ["e_m-steer_user_0", "hi"],
      ["e_m-steer_1_assistant", "first"],
      ["e_m-steer_steer_1_0", "also this"],
      ["e_m-steer_2_assistant", "second"],
    ]);
    expect(requestsOf("gpt-steer")[1].messages.map(textOf)).toEqual(["hi", "first", "also this"]);
    const evs = await finalEvents(h, sid);
    expect(count(evs, "turn_end")).toBe(2);
    expect(evs.some((e) => e.type === "message_start" && textOf(e.message) === "also this")).toBe(true);
    expect(await call(h, "session-inbox::peek", { name: "steering", session_id: sid })).toEqual({ items: [] });
  });

  it("max_turns ends the loop inline with the notice, one message_complete for it and one turn_end", async () => {
    const sid = "maxturns";
    h.scripts.set("gpt-max", (_r, n) => callAnswer("gpt-max", [{ id: `x${n}`, fn: "test::echo" }]));
    await start(h, sid, "gpt-max", { max_turns: 1 });
    expect(await waitState(h, sid, "stopped")).toMatchObject({ turn_count: 1, max_turns: 1 });
    expect(requestsOf("gpt-max")).toHaveLength(1);
    const last = (await transcript(h, sid)).at(-1)!;
    expect(last.message).toMatchObject({ role: "assistant", stop_reason: "end" });
    expect(textOf(last.message)).toBe("loop stopped: max_turns (1) reached");
    const evs = await finalEvents(h, sid);
    expect(count(evs, "turn_end")).toBe(1);
    expect(evs.filter((e) => e.type === "message_complete").map((e) => (e.type === "message_complete" ? textOf(e.message) : ""))).toContain(
      "loop stopped: max_turns (1) reached",
    );
  });

  it("a provider error ends the run failed, with stop_reason error shown and no assistant entry", async () => {
    const sid = "provider-error";
    h.scripts.set("gpt-err", () => errorAnswer("gpt-err", "permanent", "400 bad request: unknown parameter"));
    await start(h, sid, "gpt-err");
    const v = await waitState(h, sid, "failed");
    expect(v.error).toEqual({ kind: "permanent", message: "400 bad request: unknown parameter" });
    expect(await rolesOf(sid)).toEqual(["user"]);
    const evs = await finalEvents(h, sid);
    expect(evs.find((e) => e.type === "message_complete")).toMatchObject({ message: { stop_reason: "error", error_kind: "permanent" } });
    expect(evs.at(-1)?.type).toBe("agent_end");
    expect(h.provisioning.released).toContain(sid);
  });
});

describe("approvals", () => {
  it("needs_approval parks the turn; an allow decision resumes it, runs the call once and deletes the decision", async () => {
    const sid = "approve";
    callThenText("gpt-approve", [{ id: "a1", fn: "test::other", payload: { n: 7 } }]);
    await start(h, sid, "gpt-approve");
    const parked = await waitState(h, sid, "function_awaiting_approval");
    expect(parked.awaiting_approval).toEqual([
      {
        function_call_id: "a1",
        function_id: "test::other",
        args: { n: 7 },
        pending_at: expect.any(Number),
        // What a decision is bound to (docs/harness.md, approvals): the arguments' hash after hooks,
        // the policy's version, and when the request expires.
        args_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
        policy_version: expect.any(String),
        expires_at: expect.any(Number),
      },
    ]);
    expect(callsOf("test::other", sid)).toHaveLength(0);

    // Stale steps change nothing: the wrong state, or the right state with an old step.
    const raw = (await stateGet("turn_state", sid)) as { step: number };
    expect(await call(h, "turn::function_execute", { session_id: sid, step: raw.step })).toEqual({
      ok: true,
      skipped: true,
      reason: "stale",
    });
    expect(await call(h, "turn::function_awaiting_approval", { session_id: sid, step: raw.step - 1 })).toEqual({
      ok: true,
      skipped: true,
      reason: "stale",
    });
    expect(await stateGet("turn_state", sid)).toEqual(raw);
    // A wake with no decision keeps it parked.
    expect(await call(h, "turn::function_awaiting_approval", { session_id: sid, step: raw.step })).toMatchObject({
      ok: true,
      to_state: "function_awaiting_approval",
    });

    await decide(sid, "a1", "allow");
    await waitState(h, sid, "stopped");
    expect(callsOf("test::other", sid)).toEqual([
      { fn: "test::other", data: { n: 7 }, metadata: { session_id: sid, function_call_id: "a1", function_id: "test::other" } },
    ]);
    expect(await stateGet("approvals", `${sid}/a1`)).toBeUndefined();
    expect(await resultsOf(sid)).toMatchObject([{ function_call_id: "a1", is_error: false }]);
    const evs = await finalEvents(h, sid);
    const parkedView = evs.find((e) => e.type === "turn_state_changed" && e.new_value.state === "function_awaiting_approval");
    expect(parkedView).toMatchObject({ new_value: { awaiting_approval: [{ function_call_id: "a1" }] } });
    // A late, repeated decision for a session that moved on wakes nothing and changes nothing.
    const done = await stateGet("turn_state", sid);
    await decide(sid, "a1", "allow");
    expect(
      await call(h, "turn::on_approval", {
        type: "state",
        event_type: "state:updated",
        scope: "approvals",
        key: `${sid}/a1`,
        new_value: { decision: "allow" },
      }),
    ).toEqual({ ok: true, woke: false });
    expect(await stateGet("turn_state", sid)).toEqual(done);
  });

  it("a person's deny becomes a denial result the model reads; the call never runs", async () => {
    const sid = "human-deny";
    callThenText("gpt-hdeny", [{ id: "h1", fn: "test::other", payload: {} }]);
    await start(h, sid, "gpt-hdeny");
    await waitState(h, sid, "function_awaiting_approval");
    await decide(sid, "h1", "deny", "not today");
    await waitState(h, sid, "stopped");
    expect(callsOf("test::other", sid)).toHaveLength(0);
    const [r] = await resultsOf(sid);
    expect(textOf(r)).toBe("Permission denied by user: not today");
    expect(r).toMatchObject({ is_error: true, details: { status: "denied", denied_by: "user", approval_denied: true, decision: "deny" } });
    expect(await stateGet("approvals", `${sid}/h1`)).toBeUndefined();
    expect(requestsOf("gpt-hdeny")).toHaveLength(2);
  });

  it("in a batch, a call waiting for approval does not hold up its siblings; results keep the call order", async () => {
    const sid = "batch";
    callThenText("gpt-batch", [
      { id: "p1", fn: "test::echo", payload: { i: 1 } },
      { id: "p2", fn: "test::other", payload: { i: 2 } },
      { id: "p3", fn: "test::echo", payload: { i: 3 } },
    ]);
    await start(h, sid, "gpt-batch");
    const parked = await waitState(h, sid, "function_awaiting_approval");
    expect(parked.awaiting_approval?.map((a) => a.function_call_id)).toEqual(["p2"]);
    expect(callsOf("test::echo", sid).map((c) => c.data.i)).toEqual([1, 3]);

    await decide(sid, "p2", "allow");
    await waitState(h, sid, "stopped");
    expect((await resultsOf(sid)).map((r) => r.function_call_id)).toEqual(["p1", "p2", "p3"]);
    expect(await idsOf(sid)).toEqual([
      "e_m-batch_user_0",
      "e_m-batch_1_assistant",
      "e_m-batch_p1",
      "e_m-batch_p2",
      "e_m-batch_p3",
      "e_m-batch_2_assistant",
    ]);
    const evs = await finalEvents(h, sid);
    expect(evs.flatMap((e) => (e.type === "function_execution_end" ? [e.function_call_id] : []))).toEqual(["p1", "p3", "p2"]);
  });
});

describe("turn::stop", () => {
  it("while the model streams: the round ends, the batch it asked for never runs, the run stops", async () => {
    const sid = "stop-streaming";
    const hold = gate();
    h.scripts.set("gpt-stop", (_r, n) =>
      n === 0
        ? { ...callAnswer("gpt-stop", [{ id: "s1", fn: "test::echo", payload: { stop: true } }]), holdBeforeTerminal: hold.wait }
        : textAnswer("gpt-stop", "should not happen"),
    );
    await start(h, sid, "gpt-stop");
    await until(() => requestsOf("gpt-stop").length === 1, "the round is streaming");
    expect(await call(h, "turn::stop", { session_id: sid })).toEqual({ session_id: sid, stopping: true, state: "assistant_streaming" });
    hold.release();
    await waitState(h, sid, "stopped");
    expect(callsOf("test::echo", sid)).toHaveLength(0);
    expect(requestsOf("gpt-stop")).toHaveLength(1);
    // No dangling call: the batch got an aborted result.
    expect(await resultsOf(sid)).toMatchObject([{ function_call_id: "s1", is_error: true }]);
    const evs = await finalEvents(h, sid);
    expect(
      evs.some((e) => e.type === "message_complete" && e.message.stop_reason === "aborted" && textOf(e.message) === "run stopped by user"),
    ).toBe(true);
    expect(await call(h, "turn::stop", { session_id: sid })).toEqual({ session_id: sid, stopping: false, state: "stopped" });
  });

  it("while parked: the waiting calls are aborted through the approval wake and their decisions deleted", async () => {
    const sid = "stop-parked";
    callThenText("gpt-stop-parked", [{ id: "w1", fn: "test::other" }]);
    await start(h, sid, "gpt-stop-parked");
    await waitState(h, sid, "function_awaiting_approval");
    expect(await call(h, "turn::stop", { session_id: sid })).toEqual({
      session_id: sid,
      stopping: true,
      state: "function_awaiting_approval",
    });
    await waitState(h, sid, "stopped");
    const [r] = await resultsOf(sid);
    expect(r).toMatchObject({ function_call_id: "w1", is_error: true });
    expect(textOf(r)).toContain("Function call aborted");
    expect(await stateGet("approvals", `${sid}/w1`)).toBeUndefined();
    expect(requestsOf("gpt-stop-parked")).toHaveLength(1);
    expect(callsOf("test::other", sid)).toHaveLength(0);
  });

  it("an unknown session is not stopping", async () => {
    expect(await call(h, "turn::stop", { session_id: "nobody-here" })).toEqual({ session_id: "nobody-here", stopping: false, state: null });
    expect((await view(h, "nobody-here")) ?? null).toBeNull();
  });
});

describe("run::events", () => {
  it("pages a session's events in order from a cursor, losslessly", async () => {
    const sid = "plain";
    const all = await events(h, sid);
    expect(all.length).toBeGreaterThan(8);
    const ids = all.map((e) => e.item_id);
    expect([...ids].sort()).toEqual(ids);
    const page1: { events: { item_id: string }[]; next: string } = await call(h, "run::events", { session_id: sid, limit: 3 });
    expect(page1.events.map((e) => e.item_id)).toEqual(ids.slice(0, 3));
    const page2: { events: { item_id: string }[]; next: string } = await call(h, "run::events", {
      session_id: sid,
      after: page1.next,
      limit: 3,
    });
    expect(page2.events.map((e) => e.item_id)).toEqual(ids.slice(3, 6));
    const tail: { events: unknown[]; next: string } = await call(h, "run::events", { session_id: sid, after: ids.at(-1) });
    expect(tail).toEqual({ events: [], next: ids.at(-1) });
    await expect(call(h, "run::events", { session_id: sid, after: "other-00000001" })).rejects.toMatchObject({ code: "invalid_input" });
  });

  it("a cursor of another shape, or one the session never had, is refused with a clear error (never an empty page)", async () => {
    const sid = "plain";
    const ids = (await events(h, sid)).map((e) => e.item_id);
    // An id in an older, shorter zero-padding (what the README once showed) would sort after every event.
    const short = `${sid}-${ids[2]!
      .slice(sid.length + 1)
      .replace(/^0+/, "")
      .padStart(8, "0")}`;
    await expect(call(h, "run::events", { session_id: sid, after: short })).rejects.toMatchObject({
      code: "invalid_input",
      message: expect.stringContaining("not an event id"),
    });
    // Well formed, but no event of this session has it.
    const unknown = `${sid}-999999999999`;
    expect(ids).not.toContain(unknown);
    await expect(call(h, "run::events", { session_id: sid, after: unknown })).rejects.toMatchObject({
      code: "invalid_input",
      message: expect.stringContaining("has no event"),
    });
  });
});

describe("agent::events writes", () => {
  /** Run `run` with `tap` told of each call of the built-ins `ids` the engine serves (in the order it
   * serves them); their handlers are put back after. */
  async function tapping(ids: string[], tap: (id: string, input: unknown) => void, run: () => Promise<void>): Promise<void> {
    const restore = ids.map((id) => {
      const fn = h.engine.core.builtins.get(id);
      if (!fn) return () => undefined;
      const handler = fn.handler;
      fn.handler = (input, ctx) => {
        tap(id, input);
        return handler(input, ctx);
      };
      return () => void (fn.handler = handler);
    });
    try {
      await run();
    } finally {
      for (const r of restore) r();
    }
  }

  /** The stream writes the engine serves for session `sid` while `run` runs, in the order it served them. */
  async function streamWrites(sid: string, run: () => Promise<void>): Promise<{ fn: string; stream: string; ids: string[] }[]> {
    const writes: { fn: string; stream: string; ids: string[] }[] = [];
    await tapping(
      ["stream::set", "stream::set_many"],
      (fn, input) => {
        const q = input as { stream_name: string; group_id: string; item_id?: string; items?: { item_id: string }[] };
        if (q.group_id === sid) writes.push({ fn, stream: q.stream_name, ids: q.items?.map((i) => i.item_id) ?? [q.item_id!] });
      },
      run,
    );
    return writes;
  }

  /** One function-call round and the closing answer, to its last event. */
  const round = (sid: string) => async () => {
    callThenText(`gpt-${sid}`, [{ id: `${sid}-c1`, fn: "test::echo", payload: { x: 1 } }]);
    await start(h, sid, `gpt-${sid}`);
    await waitState(h, sid, "stopped");
    await finalEvents(h, sid);
  };

  it("a step's events go in one stream::set_many after its save; a follower reads every one, in order", async () => {
    const sid = "batched";
    const writes = await streamWrites(sid, round(sid));
    const ids = (await events(h, sid)).map((e) => e.item_id);
    const onEvents = writes.filter((w) => w.stream === "agent::events");
    expect(onEvents.every((w) => w.fn === "stream::set_many")).toBe(true);
    // Every event was written once, in id order, and is what a follower of run::events reads.
    expect(onEvents.flatMap((w) => w.ids)).toEqual(ids);
    expect([...ids].sort()).toEqual(ids);
    // Far fewer calls than events: the function step's events after its save went in one batch.
    // What a step emits in a row after its save goes in one call: run::start's three, each round's
    // end with its state change, the last one with agent_end too.
    const evs = (await events(h, sid)).map((e) => e.data);
    const batchOf = (i: number) => onEvents.findIndex((w) => w.ids.includes(ids[i]!));
    expect(typesOf(evs.slice(0, 3))).toEqual(["agent_start", "message_start", "message_end"]);
    expect([batchOf(1), batchOf(2)]).toEqual([batchOf(0), batchOf(0)]);
    const turnEnds = evs.flatMap((e, i) => (e.type === "turn_end" ? [i] : []));
    expect(turnEnds).toHaveLength(2);
    for (const i of turnEnds) {
      expect(evs[i + 1]?.type).toBe("turn_state_changed");
      expect(batchOf(i + 1)).toBe(batchOf(i));
    }
    expect(evs.at(-1)?.type).toBe("agent_end");
    expect(batchOf(evs.length - 1)).toBe(batchOf(turnEnds[1]!));
    expect(onEvents.length).toBeLessThan(ids.length);
    // The turn_end copies, same item ids, one batch each.
    const ends = writes.filter((w) => w.stream === "agent::turn_end");
    expect(ends.every((w) => w.fn === "stream::set_many")).toBe(true);
    expect(ends.flatMap((w) => w.ids)).toEqual(ids.filter((_, i) => evs[i]?.type === "turn_end"));
  });

  it("a round takes its block of event ids before the model is asked, so its first delta waits for no counter write", async () => {
    const sid = "reserved";
    // In arrival order: this session's event-counter writes and event batches at the engine, and
    // each request reaching the model.
    const order: string[] = [];
    const requests = h.provider.requests;
    const push = requests.push;
    requests.push = (...items) => {
      for (const r of items) if (r.model === `gpt-${sid}`) order.push("model");
      return push.apply(requests, items);
    };
    try {
      await tapping(
        ["state::update", "stream::set_many"],
        (id, input) => {
          const q = input as { scope?: string; key?: string; stream_name?: string; group_id?: string };
          if (id === "state::update" && q.scope === "event_counter" && q.key === sid) order.push("counter");
          if (id === "stream::set_many" && q.stream_name === "agent::events" && q.group_id === sid) order.push("events");
        },
        round(sid),
      );
    } finally {
      requests.push = push;
    }
    // Two rounds; what reaches the engine next after each request is the round's streamed events,
    // not a counter write taking their ids.
    const asked = order.flatMap((o, i) => (o === "model" ? [i] : []));
    expect(asked).toHaveLength(2);
    for (const i of asked) expect(order[i + 1]).toBe("events");
  });

  it("an engine without stream::set_many gets one stream::set per event, every event, in order", async () => {
    const sid = "per-item";
    const { builtins } = h.engine.core;
    const setMany = builtins.get("stream::set_many")!;
    builtins.delete("stream::set_many");
    let writes: { fn: string; stream: string; ids: string[] }[];
    try {
      writes = await streamWrites(sid, round(sid));
    } finally {
      builtins.set("stream::set_many", setMany);
    }
    const all = await events(h, sid);
    const onEvents = writes.filter((w) => w.stream === "agent::events");
    expect(onEvents.every((w) => w.fn === "stream::set")).toBe(true);
    expect(onEvents.flatMap((w) => w.ids)).toEqual(all.map((e) => e.item_id));
    expect(all.map((e) => e.data.type)).toContain("agent_end");
    expect(writes.filter((w) => w.stream === "agent::turn_end").map((w) => w.ids[0])).toEqual(
      all.filter((e) => e.data.type === "turn_end").map((e) => e.item_id),
    );
  });
});

describe("with a policy stand-in: what the real policy never does", () => {
  let rules: Map<string, PolicyRule>;
  let policyCalls: string[];
  let policyCalledAt: number[];
  beforeAll(async () => {
    ({ rules, calls: policyCalls, calledAt: policyCalledAt } = await usePolicyStandIn(h));
  });
  afterAll(async () => {
    await useRealPolicy(h);
  });

  it("calls that are not agent_trigger, or name no function, get missing_function without any policy call", async () => {
    const sid = "missing";
    h.scripts.set("gpt-missing", (_r, n) =>
      n === 0
        ? callAnswer(
            "gpt-missing",
            [],
            [
              { type: "function_call", id: "m1", function_id: "shell_exec", arguments: { cmd: "ls" } },
              { type: "function_call", id: "m2", function_id: "agent_trigger", arguments: { payload: {} } },
            ],
          )
        : textAnswer("gpt-missing", "ok"),
    );
    await start(h, sid, "gpt-missing");
    await waitState(h, sid, "stopped");
    expect((await resultsOf(sid)).map((r) => [r.function_call_id, r.is_error, (r.details as { error?: string }).error])).toEqual([
      ["m1", true, "missing_function"],
      ["m2", true, "missing_function"],
    ]);
    expect(policyCalls).toEqual([]);
  });

  it("a call a person allowed runs without a second policy call", async () => {
    const sid = "approve-once";
    callThenText("gpt-approve-once", [{ id: "o1", fn: "test::other" }]);
    await start(h, sid, "gpt-approve-once");
    await waitState(h, sid, "function_awaiting_approval");
    expect(policyCalls).toEqual(["test::other"]);
    await decide(sid, "o1", "allow");
    await waitState(h, sid, "stopped");
    expect(callsOf("test::other", sid)).toHaveLength(1);
    expect(policyCalls).toEqual(["test::other"]);
  });

  it("an unreadable policy answer asks a person (needs_approval)", async () => {
    const sid = "garbage";
    rules.set("test::danger", "garbage");
    callThenText("gpt-garbage", [{ id: "g1", fn: "test::danger" }]);
    await start(h, sid, "gpt-garbage");
    const v = await waitState(h, sid, "function_awaiting_approval");
    expect(v.awaiting_approval?.[0].function_call_id).toBe("g1");
    await call(h, "turn::stop", { session_id: sid });
    await waitState(h, sid, "stopped");
    expect(callsOf("test::danger")).toHaveLength(0);
  });

  it("a slow policy: the call is denied gate_unavailable after about 5 s, fail closed", async () => {
    const sid = "slow-policy";
    rules.set("test::echo", { slowMs: 8_000 });
    callThenText("gpt-slowgate", [{ id: "sg1", fn: "test::echo" }]);
    await start(h, sid, "gpt-slowgate");
    await waitState(h, sid, "stopped");
    // Timed from the policy call, which the gate's deadline bounds: the queue steps before it are
    // not part of it and took seconds on a loaded machine.
    const elapsed = Date.now() - policyCalledAt[policyCalls.lastIndexOf("test::echo")];
    expect(elapsed).toBeGreaterThan(4_500);
    expect(elapsed).toBeLessThan(7_500);
    expect(callsOf("test::echo", sid)).toHaveLength(0);
    const [r] = await resultsOf(sid);
    expect(r).toMatchObject({ is_error: true, details: { status: "denied", denied_by: "gate_unavailable" } });
    expect(textOf(r)).toContain("timeout");
  });

  it("no policy registered: denied gate_unavailable at once", async () => {
    await removePolicy(h);
    const sid = "no-policy";
    callThenText("gpt-nopolicy", [{ id: "np1", fn: "test::echo" }]);
    const t0 = Date.now();
    await start(h, sid, "gpt-nopolicy");
    await waitState(h, sid, "stopped");
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(callsOf("test::echo", sid)).toHaveLength(0);
    const [r] = await resultsOf(sid);
    expect(r).toMatchObject({ is_error: true, details: { denied_by: "gate_unavailable" } });
    expect(textOf(r)).toContain("function_not_found");
  });
});

describe("when provisioning is missing", () => {
  it("provisioning::prepare not registered: the run fails with a clear error", async () => {
    await h.provisioning.conn.shutdown();
    try {
      const sid = "no-provisioning";
      await start(h, sid, "gpt-plain");
      const v = await waitState(h, sid, "failed");
      expect(v.error).toEqual({ kind: "transition_error", message: expect.stringContaining("provisioning::prepare is not registered") });
      const evs = await finalEvents(h, sid);
      expect(evs.find((e) => e.type === "message_complete")).toMatchObject({ message: { stop_reason: "error" } });
    } finally {
      const conn = connect(h.engine.wsUrl, "provisioning-stand-in-2");
      h.provisioning = { conn, ...registerProvisioning(conn.client) };
      h.conns.push(conn);
    }
  });
});
