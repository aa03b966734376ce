// What others may know of a run and how they follow it (src/public.ts), against an in-memory
// stand-in for the engine's state and trigger built-ins: the reads show what the contract says and
// nothing more; a subscription is a record plus an engine binding on the run's record; the relay
// tells the subscriber its record names, never whom a caller claims, and fails when it fails.
import { IIIError } from "@iii-edge/protocol";
import type { TurnStateRecord } from "@iii-edge/protocol/harness";
import type { TriggerRequest } from "@iii-edge/sdk-edge/client";
import { describe, expect, it } from "vitest";
import type { Trigger } from "../src/calls.ts";
import { SCOPE_RUN_REQUEST, SCOPE_SUBSCRIPTIONS, SCOPE_TURN_STATE } from "../src/constants.ts";
import { bindingIdOf, notifySubscriber, NOTIFY_SUBSCRIBER, runRequestView, runStatus, subscribe, unsubscribe } from "../src/public.ts";

function fakeEngine(functions: Record<string, (p: unknown) => unknown> = {}) {
  const state = new Map<string, unknown>();
  const bindings = new Map<string, Record<string, unknown>>();
  const calls: { function_id: string; payload: unknown }[] = [];
  const k = (p: Record<string, unknown>) => `${String(p.scope)}\u0000${String(p.key)}`;
  const trigger = (async (req: TriggerRequest) => {
    const p = (req.payload ?? {}) as Record<string, unknown>;
    calls.push({ function_id: req.function_id, payload: req.payload });
    switch (req.function_id) {
      case "state::get":
        return state.get(k(p));
      case "state::set":
        state.set(k(p), p.value);
        return { new_value: p.value };
      case "state::delete":
        state.delete(k(p));
        return null;
      case "engine::register_trigger":
        bindings.set(String(p.id), p);
        return { id: p.id };
      case "engine::unregister_trigger":
        return { removed: bindings.delete(String(p.id)) };
      default: {
        const fn = functions[req.function_id];
        if (!fn) throw new IIIError("function_not_found", `Function ${req.function_id} not found`);
        return fn(req.payload);
      }
    }
  }) as Trigger;
  return { state, bindings, calls, trigger };
}

const record: TurnStateRecord = {
  session_id: "s1",
  state: "function_awaiting_approval",
  step: 7,
  turn_count: 2,
  max_turns: 8,
  function_results: [],
  turn_end_emitted: false,
  started_at_ms: 1,
  updated_at_ms: 2,
  run_id: "r1",
  stop_requested: true,
  last_assistant: {
    role: "assistant",
    content: [
      { type: "text", text: "Counting " },
      { type: "function_call", id: "c1", name: "files::count", arguments: {} },
      { type: "text", text: "the files." },
    ],
    stop_reason: "function_call",
    model: "m",
    provider: "p",
    timestamp: 0,
  } as TurnStateRecord["last_assistant"],
  work: { prepared: [], executed: {}, calls: { c1: "pending" } },
  awaiting_approval: [{ function_call_id: "c1", function_id: "files::count", args: {} }],
};

describe("run::status and run::request", () => {
  it("a run's status: the client view plus its run id, the stop flag and the last answer's text; never its work", async () => {
    const e = fakeEngine();
    e.state.set(`${SCOPE_TURN_STATE}\u0000s1`, record);
    expect(await runStatus(e.trigger, "s1")).toEqual({
      session_id: "s1",
      state: "function_awaiting_approval",
      turn_count: 2,
      max_turns: 8,
      awaiting_approval: [{ function_call_id: "c1", function_id: "files::count", args: {} }],
      run_id: "r1",
      stop_requested: true,
      final_text: "Counting the files.",
    });
    expect(await runStatus(e.trigger, "none")).toBeNull();
    e.state.set(`${SCOPE_TURN_STATE}\u0000s2`, { ...record, session_id: "s2", last_assistant: null, stop_requested: undefined });
    expect(await runStatus(e.trigger, "s2")).toMatchObject({ final_text: null, stop_requested: false });
  });

  it("a run's request: its settings and parent link; never the system prompt, the schemas or the sandbox", async () => {
    const e = fakeEngine();
    const parent = { session_id: "p", run_id: "pr", function_call_id: "c", depth: 1, root_session_id: "p" };
    e.state.set(`${SCOPE_RUN_REQUEST}\u0000s1`, {
      provider: "openai",
      model: "gpt-4o",
      mode: "agent",
      system_prompt: "secret instructions",
      function_schemas: [{ name: "x", description: "", parameters: {} }],
      max_turns: 6,
      budget_id: "b1",
      sandbox_id: "sbx-1",
      run_id: "r1",
      requested_at_ms: 1,
      parent,
    });
    expect(await runRequestView(e.trigger, "s1")).toEqual({
      provider: "openai",
      model: "gpt-4o",
      mode: "agent",
      max_turns: 6,
      budget_id: "b1",
      parent,
    });
    expect(await runRequestView(e.trigger, "none")).toBeNull();
  });
});

describe("turn::subscribe", () => {
  const req = { session_id: "s1", function_id: "app::on_run", subscription_id: "app:s1" };

  it("records the subscriber and binds the relay on the run's record, the subscription id in its metadata; unsubscribe removes both", async () => {
    const e = fakeEngine();
    expect(await subscribe(e.trigger, undefined, req)).toEqual({ subscription_id: "app:s1" });
    expect(e.state.get(`${SCOPE_SUBSCRIPTIONS}\u0000app:s1`)).toEqual({ session_id: "s1", function_id: "app::on_run" });
    expect(e.bindings.get(bindingIdOf("app:s1"))).toEqual({
      id: bindingIdOf("app:s1"),
      trigger_type: "state",
      function_id: NOTIFY_SUBSCRIBER,
      config: { scope: SCOPE_TURN_STATE, key: "s1" },
      metadata: { subscription_id: "app:s1" },
    });
    expect(await unsubscribe(e.trigger, undefined, "app:s1")).toEqual({ removed: true });
    expect(e.bindings.size).toBe(0);
    expect(e.state.size).toBe(0);
    expect(await unsubscribe(e.trigger, undefined, "app:s1")).toEqual({ removed: false });
  });

  it("a caller with a principal needs a grant naming the session (owning it is not enough); a refusal changes nothing", async () => {
    const e = fakeEngine();
    await expect(subscribe(e.trigger, { sub: "alice" }, req)).rejects.toMatchObject({ code: "forbidden" });
    expect(e.state.size).toBe(0);
    expect(e.bindings.size).toBe(0);
    await subscribe(e.trigger, { sub: "harness", sessions: ["s*"] }, req);
    expect(e.bindings.size).toBe(1);
    await expect(unsubscribe(e.trigger, { sub: "alice" }, "app:s1")).rejects.toMatchObject({ code: "forbidden" });
    expect(e.bindings.size).toBe(1);
  });
});

describe("the relay", () => {
  const fire = (key: string, event_type = "state:updated") => ({
    type: "state",
    event_type,
    scope: SCOPE_TURN_STATE,
    key,
    old_value: record,
    new_value: record,
  });

  it("tells the subscriber its record names a notice, not the record", async () => {
    const got: unknown[] = [];
    const e = fakeEngine({ "app::on_run": (p) => got.push(p) });
    await subscribe(e.trigger, undefined, { session_id: "s1", function_id: "app::on_run", subscription_id: "app:s1" });
    expect(await notifySubscriber(e.trigger, fire("s1"), { subscription_id: "app:s1" })).toEqual({ ok: true, notified: true });
    expect(got).toEqual([
      { subscription_id: "app:s1", session_id: "s1", event_type: "state:updated", state: "function_awaiting_approval" },
    ]);
    await notifySubscriber(e.trigger, { ...fire("s1", "state:deleted"), new_value: null }, { subscription_id: "app:s1" });
    expect(got[1]).toEqual({ subscription_id: "app:s1", session_id: "s1", event_type: "state:deleted", state: null });
  });

  it("calls nobody for metadata naming no subscription, another session's fire or a malformed one; metadata cannot pick the function", async () => {
    const got: unknown[] = [];
    const e = fakeEngine({ "app::on_run": (p) => got.push(p), "evil::fn": (p) => got.push(p) });
    await subscribe(e.trigger, undefined, { session_id: "s1", function_id: "app::on_run", subscription_id: "app:s1" });
    expect(await notifySubscriber(e.trigger, fire("s1"), { subscription_id: "nobody", function_id: "evil::fn" })).toEqual({
      ok: true,
      notified: false,
    });
    expect(await notifySubscriber(e.trigger, fire("s2"), { subscription_id: "app:s1" })).toEqual({ ok: true, notified: false });
    expect(await notifySubscriber(e.trigger, { nonsense: true }, { subscription_id: "app:s1" })).toEqual({ ok: true, notified: false });
    expect(await notifySubscriber(e.trigger, fire("s1"), { subscription_id: "app:s1", function_id: "evil::fn" })).toEqual({
      ok: true,
      notified: true,
    });
    expect(got).toEqual([
      { subscription_id: "app:s1", session_id: "s1", event_type: "state:updated", state: "function_awaiting_approval" },
    ]);
  });

  it("a subscriber's failure is the relay's (the engine fires again)", async () => {
    const e = fakeEngine({
      "app::on_run": () => {
        throw new IIIError("invocation_failed", "busy");
      },
    });
    await subscribe(e.trigger, undefined, { session_id: "s1", function_id: "app::on_run", subscription_id: "app:s1" });
    await expect(notifySubscriber(e.trigger, fire("s1"), { subscription_id: "app:s1" })).rejects.toMatchObject({ message: "busy" });
  });
});
