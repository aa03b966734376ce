// The orchestrator's core rules at the layer that owns them, against an in-memory engine stand-in
// (state with compare-and-set and `enqueue`, streams): saving is the wake, the stale guard, the
// error model of runTransition, the stop-flag merge, and the pure planning/gate functions.
import { IIIError } from "@iii-edge/protocol";
import { AGENT_TRIGGER, type AgentEvent, type AssistantMessage, type TurnStateRecord } from "@iii-edge/protocol/harness";
import type { TriggerRequest } from "@iii-edge/sdk-edge/client";
import { describe, expect, it, onTestFinished, vi } from "vitest";
import { TransientError, type Trigger } from "../src/calls.ts";
import { callMetadata, consultBefore, invokeTarget, normaliseResult, planBatch, targetErrorResult } from "../src/gate.ts";
import { EVENT_ID_BLOCK, SCOPE_EVENT_COUNTER } from "../src/constants.ts";
import { EventLog, SET_MANY_RECHECK_MS } from "../src/events.ts";
import { canonicalJson } from "../src/record.ts";
import { Tx, loadRecord } from "../src/store.ts";
import { inferProvider } from "../src/streaming.ts";
import { INLINE_WINDOW_MS, runSteps, runTransition, type StepChain, type StepHandler } from "../src/transition.ts";

interface Enqueued {
  function_id: string;
  payload: unknown;
  queue: string;
  idempotency_key?: string;
  via: "write" | "action";
}

/** state::* and stream::set in memory, as the engine answers them (CAS, enqueue with the write). */
function fakeEngine(opts: { enqueueWithWrite?: boolean; extra?: Record<string, (p: Record<string, unknown>) => unknown> } = {}) {
  const state = new Map<string, unknown>();
  const streams: { item_id: string; data: AgentEvent }[] = [];
  const enqueued: Enqueued[] = [];
  const k = (p: Record<string, unknown>) => `${String(p.scope)}\u0000${String(p.key)}`;
  const trigger = (async (req: TriggerRequest) => {
    const p = (req.payload ?? {}) as Record<string, unknown>;
    if (req.action?.type === "enqueue") {
      enqueued.push({
        function_id: req.function_id,
        payload: p,
        queue: req.action.queue,
        idempotency_key: req.action.idempotency_key,
        via: "action",
      });
      return { messageReceiptId: `r${enqueued.length}` };
    }
    switch (req.function_id) {
      case "state::get":
        return state.get(k(p));
      case "state::set": {
        const old = state.get(k(p));
        state.set(k(p), p.value);
        return { old_value: old ?? null, new_value: p.value };
      }
      case "state::delete": {
        const old = state.get(k(p));
        state.delete(k(p));
        return old;
      }
      case "state::update": {
        const old = state.get(k(p));
        if ("expected" in p && canonicalJson(old ?? null) !== canonicalJson(p.expected ?? null))
          throw new IIIError("state_conflict", "not the expected value");
        let v: unknown = old ?? {};
        for (const op of p.ops as { type: string; path: string; value?: unknown; by?: number }[]) {
          if (op.type === "set" && op.path === "") v = op.value;
          else if (op.type === "increment") {
            const o = { ...(v as Record<string, number>) };
            o[op.path] = (o[op.path] ?? 0) + (op.by ?? 1);
            v = o;
          }
        }
        state.set(k(p), v);
        const out: Record<string, unknown> = { old_value: old ?? null, new_value: v };
        if (p.enqueue && opts.enqueueWithWrite !== false) {
          const e = p.enqueue as Omit<Enqueued, "via">;
          enqueued.push({ ...e, via: "write" });
          out.messageReceiptId = `r${enqueued.length}`;
        }
        return out;
      }
      case "stream::set":
        streams.push({ item_id: String(p.item_id), data: p.data as AgentEvent });
        return { old_value: null, new_value: p.data };
      case "provisioning::release":
        return { ok: true };
      default: {
        const fn = opts.extra?.[req.function_id];
        if (fn) return fn(p);
        throw new IIIError("function_not_found", `Function ${req.function_id} not found`);
      }
    }
  }) as Trigger;
  return { state, streams, enqueued, trigger };
}

function record(state: TurnStateRecord["state"], extra: Partial<TurnStateRecord> = {}): TurnStateRecord {
  return {
    session_id: "s1",
    state,
    step: 3,
    turn_count: 1,
    function_results: [],
    turn_end_emitted: false,
    started_at_ms: 1,
    updated_at_ms: 1,
    run_id: "r1",
    ...extra,
  };
}
const put = (e: ReturnType<typeof fakeEngine>, rec: TurnStateRecord) =>
  e.state.set(`turn_state\u0000${rec.session_id}`, structuredClone(rec));
const stored = (e: ReturnType<typeof fakeEngine>, sid = "s1") => e.state.get(`turn_state\u0000${sid}`) as TurnStateRecord | undefined;

describe("saving is the wake", () => {
  it("a changed, stepable state bumps the step and enqueues exactly turn::<state> with the write", async () => {
    const e = fakeEngine();
    put(e, record("provisioning"));
    const tx = new Tx(e.trigger, "s1", await loadRecord(e.trigger, "s1"));
    tx.rec.state = "assistant_streaming";
    await tx.save();
    expect(stored(e)).toMatchObject({ state: "assistant_streaming", step: 4 });
    expect(e.enqueued).toEqual([
      {
        function_id: "turn::assistant_streaming",
        payload: { session_id: "s1", step: 4, queued: true },
        queue: "turn-step",
        idempotency_key: "s1:4",
        via: "write",
      },
    ]);
  });

  it("an unchanged state, a parked state and a terminal state enqueue nothing", async () => {
    const e = fakeEngine();
    put(e, record("function_execute"));
    const tx = new Tx(e.trigger, "s1", await loadRecord(e.trigger, "s1"));
    await tx.checkpoint();
    await tx.save();
    tx.rec.state = "function_awaiting_approval";
    await tx.save();
    tx.rec.state = "stopped";
    await tx.save();
    expect(e.enqueued).toEqual([]);
    expect(stored(e)?.step).toBe(5);
  });

  it("an engine that drops the write's enqueue is refused: no record left stepable with no step queued", async () => {
    const e = fakeEngine({ enqueueWithWrite: false });
    put(e, record("provisioning"));
    const tx = new Tx(e.trigger, "s1", await loadRecord(e.trigger, "s1"));
    tx.rec.state = "assistant_streaming";
    await expect(tx.save()).rejects.toThrow(/did not enqueue the step/);
    expect(e.enqueued).toEqual([]);
  });

  it("turn_state_changed goes out after the write, only when the client view changed", async () => {
    const e = fakeEngine();
    put(e, record("function_execute", { work: { prepared: [], executed: {}, calls: {} } }));
    const tx = new Tx(e.trigger, "s1", await loadRecord(e.trigger, "s1"));
    tx.rec.work!.calls.x = "triggered"; // not in the view
    await tx.checkpoint();
    tx.rec.state = "steering_check";
    await tx.save();
    await tx.events.flush();
    expect(e.streams.map((s) => s.data.type)).toEqual(["turn_state_changed"]);
    expect(e.streams[0]).toMatchObject({
      item_id: "s1-000000000001",
      data: { event_type: "state:updated", old_value: { state: "function_execute" }, new_value: { state: "steering_check" } },
    });
  });

  it("a concurrent turn::stop flag is merged into the step's write; any other change is a conflict", async () => {
    const e = fakeEngine();
    put(e, record("steering_check"));
    const tx = new Tx(e.trigger, "s1", await loadRecord(e.trigger, "s1"));
    e.state.set("turn_state\u0000s1", { ...stored(e)!, stop_requested: true });
    tx.rec.state = "assistant_streaming";
    await tx.save();
    expect(stored(e)).toMatchObject({ state: "assistant_streaming", stop_requested: true });

    const tx2 = new Tx(e.trigger, "s1", await loadRecord(e.trigger, "s1"));
    e.state.set("turn_state\u0000s1", { ...stored(e)!, turn_count: 9 });
    tx2.rec.state = "function_execute";
    await expect(tx2.save()).rejects.toMatchObject({ name: "StateConflict" });
    expect(stored(e)).toMatchObject({ state: "assistant_streaming", turn_count: 9 });
  });
});

describe("runSteps: a delivered step runs the steps its saves queue", () => {
  // provisioning → assistant_streaming → steering_check → stopped, each handler one save.
  const moves = (ran: string[], fail?: { state: string; error: Error }): Partial<Record<TurnStateRecord["state"], StepHandler>> => {
    const to = { provisioning: "assistant_streaming", assistant_streaming: "steering_check", steering_check: "stopped" } as const;
    return Object.fromEntries(
      Object.entries(to).map(([from, next]) => [
        from,
        async (tx: Tx) => {
          ran.push(from);
          if (fail?.state === from) throw fail.error;
          tx.rec.state = next;
          await tx.save();
        },
      ]),
    );
  };

  it("a queued delivery runs the whole chain in one invocation; the messages its saves queued are then stale", async () => {
    const e = fakeEngine();
    put(e, record("provisioning"));
    const ran: string[] = [];
    const handlers = moves(ran);
    expect(await runSteps(e.trigger, "provisioning", { session_id: "s1", step: 3, queued: true }, { handlers })).toEqual({
      ok: true,
      from_state: "provisioning",
      to_state: "assistant_streaming",
    });
    expect(ran).toEqual(["provisioning", "assistant_streaming", "steering_check"]);
    expect(stored(e)).toMatchObject({ state: "stopped", step: 6 });
    // One event log for the chain: the steps' events come from one block of ids, in order.
    expect(e.streams.map((s) => (s.data as { new_value?: { state?: string } }).new_value?.state)).toEqual([
      "assistant_streaming",
      "steering_check",
      "stopped",
    ]);
    const ids = e.streams.map((s) => s.item_id);
    expect(ids).toEqual(["s1-000000000001", "s1-000000000002", "s1-000000000003"]);
    expect(e.state.get(`${SCOPE_EVENT_COUNTER}\u0000s1`)).toEqual({ seq: EVENT_ID_BLOCK });
    // Saving is still the wake: every stepable save queued its message, with the write.
    expect(e.enqueued.map((m) => [m.function_id, (m.payload as { step: number }).step, m.via])).toEqual([
      ["turn::assistant_streaming", 4, "write"],
      ["turn::steering_check", 5, "write"],
    ]);
    // Delivered once this invocation answered (the fifo group held them back), they find their step run.
    for (const m of e.enqueued) {
      const state = m.function_id.slice("turn::".length) as TurnStateRecord["state"];
      expect(await runSteps(e.trigger, state, m.payload as { session_id: string }, { handlers })).toEqual({
        ok: true,
        skipped: true,
        reason: "stale",
      });
    }
    expect(ran).toHaveLength(3);
  });

  it("a direct call (not a queued delivery) runs its own step only", async () => {
    const e = fakeEngine();
    put(e, record("provisioning"));
    const ran: string[] = [];
    await runSteps(e.trigger, "provisioning", { session_id: "s1", step: 3 }, { handlers: moves(ran) });
    expect(ran).toEqual(["provisioning"]);
    expect(stored(e)).toMatchObject({ state: "assistant_streaming", step: 4 });
  });

  /** The chain with `meanwhile` happening while provisioning runs; only provisioning may run. */
  async function onlyTheDeliveredStep(meanwhile: () => void, chain: Omit<StepChain, "handlers">): Promise<void> {
    const e = fakeEngine();
    put(e, record("provisioning"));
    const ran: string[] = [];
    const handlers = moves(ran);
    const provisioning = handlers.provisioning!;
    handlers.provisioning = async (tx) => {
      meanwhile();
      await provisioning(tx);
    };
    await runSteps(e.trigger, "provisioning", { session_id: "s1", step: 3, queued: true }, { ...chain, handlers });
    expect(ran).toEqual(["provisioning"]);
    expect(stored(e)).toMatchObject({ state: "assistant_streaming", step: 4 });
    // The next step's message is queued: it runs it.
    expect(e.enqueued.map((m) => m.function_id)).toEqual(["turn::assistant_streaming"]);
  }

  it("past the window the next step is left to its queued message", async () => {
    let t = 1_000;
    // The step took the whole window.
    await onlyTheDeliveredStep(() => (t += INLINE_WINDOW_MS), { now: () => t });
  });

  it("after the connection the delivery came on dropped, no further step starts: its queued message runs it", async () => {
    let drops = 0;
    // The engine restarted while the step ran: it may deliver step 4 again now.
    await onlyTheDeliveredStep(() => drops++, { connectionEpoch: () => drops });
  });

  it("a chained step that throws ends the chain, the delivery answers its own step, and the step's queued message runs it again", async () => {
    const e = fakeEngine();
    put(e, record("provisioning"));
    const ran: string[] = [];
    const handlers = moves(ran, { state: "assistant_streaming", error: new TransientError("provider not registered yet") });
    expect(await runSteps(e.trigger, "provisioning", { session_id: "s1", step: 3, queued: true }, { handlers })).toMatchObject({
      ok: true,
      to_state: "assistant_streaming",
    });
    expect(ran).toEqual(["provisioning", "assistant_streaming"]);
    expect(stored(e)).toMatchObject({ state: "assistant_streaming", step: 4 });
    // The retry: the message the provisioning save queued, delivered now.
    const retry = e.enqueued[0];
    const ran2: string[] = [];
    await runSteps(e.trigger, "assistant_streaming", retry.payload as { session_id: string }, { handlers: moves(ran2) });
    expect(ran2).toEqual(["assistant_streaming", "steering_check"]);
    expect(stored(e)).toMatchObject({ state: "stopped" });
  });
});

describe("EventLog", () => {
  it("cut(): the next write ends with what was pending; what is emitted after goes in the write after", async () => {
    const batches: string[][] = [];
    const trigger = (async (req: TriggerRequest) => {
      const p = req.payload as { ops?: unknown; items?: { data: AgentEvent }[] };
      if (req.function_id === "state::update") return { new_value: { seq: EVENT_ID_BLOCK } };
      if (req.function_id === "stream::set_many") return void batches.push(p.items!.map((i) => (i.data as { note?: string }).note!));
      throw new IIIError("function_not_found", req.function_id);
    }) as Trigger;
    // Earlier tests' engine has no stream::set_many, which the process remembers for a while.
    const later = Date.now() + SET_MANY_RECHECK_MS + 1;
    const clock = vi.spyOn(Date, "now").mockImplementation(() => later);
    onTestFinished(() => clock.mockRestore());
    const log = new EventLog(trigger, "s1");
    const ev = (note: string) =>
      ({ type: "turn_state_changed", event_type: "state:updated", new_value: {}, note }) as unknown as AgentEvent;
    log.emit(ev("start"));
    log.emit(ev("first delta"));
    log.cut();
    for (const n of ["delta 2", "delta 3", "complete"]) log.emit(ev(n));
    await log.flush();
    expect(batches).toEqual([
      ["start", "first delta"],
      ["delta 2", "delta 3", "complete"],
    ]);
    // Without a cut, what is pending at once goes in one write.
    batches.length = 0;
    for (const n of ["a", "b", "c"]) log.emit(ev(n));
    await log.flush();
    expect(batches).toEqual([["a", "b", "c"]]);
  });
});

describe("runTransition", () => {
  it("a missing record is an error, and the handler does not run", async () => {
    const e = fakeEngine();
    let ran = false;
    await expect(runTransition(e.trigger, "provisioning", { session_id: "s1" }, async () => void (ran = true))).rejects.toMatchObject({
      code: "not_found",
    });
    expect(ran).toBe(false);
  });

  it("the wrong state or an old step is skipped as stale, with no write", async () => {
    const e = fakeEngine();
    put(e, record("steering_check"));
    const before = structuredClone(stored(e));
    let ran = false;
    const h = async () => void (ran = true);
    expect(await runTransition(e.trigger, "provisioning", { session_id: "s1", step: 3 }, h)).toEqual({
      ok: true,
      skipped: true,
      reason: "stale",
    });
    expect(await runTransition(e.trigger, "steering_check", { session_id: "s1", step: 2 }, h)).toEqual({
      ok: true,
      skipped: true,
      reason: "stale",
    });
    expect(ran).toBe(false);
    expect(stored(e)).toEqual(before);
  });

  it("the handler works on a deep copy: its mutations never reach the persisted snapshot", async () => {
    const e = fakeEngine();
    put(e, record("steering_check", { function_results: [] }));
    await runTransition(e.trigger, "steering_check", { session_id: "s1", step: 3 }, async (tx) => {
      tx.rec.function_results.push({
        role: "function_result",
        function_call_id: "c",
        function_id: "f",
        content: [],
        details: null,
        is_error: false,
        timestamp: 1,
      });
      expect(tx.persisted()?.function_results).toEqual([]);
      tx.rec.state = "assistant_streaming";
      await tx.save();
    });
    expect(stored(e)?.function_results).toHaveLength(1);
  });

  it("an ordinary throw fails the run visibly (message_complete error + agent_end) and is not rethrown", async () => {
    const e = fakeEngine();
    put(e, record("steering_check"));
    const r = await runTransition(e.trigger, "steering_check", { session_id: "s1", step: 3 }, async (tx) => {
      tx.rec.turn_count = 99; // a half-done change that must not be saved
      throw new Error("boom");
    });
    expect(r).toEqual({ ok: false, from_state: "steering_check", to_state: "failed", error: "from steering_check: boom" });
    expect(stored(e)).toMatchObject({
      state: "failed",
      turn_count: 1,
      error: { kind: "transition_error", message: "from steering_check: boom" },
    });
    const types = e.streams.map((s) => s.data.type);
    expect(types).toEqual(["message_complete", "turn_state_changed", "agent_end"]);
    expect(e.streams[0].data).toMatchObject({ message: { stop_reason: "error", error_kind: "transient" } });
    expect(e.enqueued).toEqual([]);
  });

  it("a TransientError is rethrown (the queue retries) and the session is not failed", async () => {
    const e = fakeEngine();
    put(e, record("steering_check"));
    class LeaseBusy extends TransientError {}
    await expect(
      runTransition(e.trigger, "steering_check", { session_id: "s1", step: 3 }, async () =>
        Promise.reject(new LeaseBusy("compaction lease held")),
      ),
    ).rejects.toBeInstanceOf(TransientError);
    expect(stored(e)?.state).toBe("steering_check");
  });
});

describe("the chokepoint", () => {
  const assistant = (content: AssistantMessage["content"]): AssistantMessage => ({
    role: "assistant",
    content,
    stop_reason: "function_call",
    model: "m",
    provider: "p",
    timestamp: 1,
  });

  it("unwraps agent_trigger and settles anything else as missing_function", () => {
    const plan = planBatch(
      assistant([
        { type: "text", text: "let me" },
        {
          type: "function_call",
          id: "a",
          function_id: AGENT_TRIGGER,
          arguments: { function: "state::get", payload: { scope: "x", key: "y" } },
        },
        { type: "function_call", id: "b", function_id: AGENT_TRIGGER, arguments: { function: " " } },
        { type: "function_call", id: "c", function_id: "bash", arguments: {} },
        { type: "function_call", id: "d", function_id: AGENT_TRIGGER, arguments: '{"function":"engine::functions::list"}' },
        { type: "function_call", id: "e", function_id: AGENT_TRIGGER, arguments: { function: "x::y", payload: [1] } },
      ]),
    );
    expect(
      plan.map((p) => [p.call.id, p.route, p.route === "synthetic" ? (p.result.details as { error: string }).error : p.call.function_id]),
    ).toEqual([
      ["a", "dispatch", "state::get"],
      ["b", "synthetic", "missing_function"],
      ["c", "synthetic", "missing_function"],
      ["d", "dispatch", "engine::functions::list"],
      ["e", "synthetic", "invalid_payload"],
    ]);
    expect(plan[0].call.arguments).toEqual({ scope: "x", key: "y" });
  });

  it("sends the model's arguments unchanged as data and who is calling as metadata, without changing the call", async () => {
    const call = { id: "c1", function_id: "f::g", arguments: { a: 1 } };
    const copy = structuredClone(call);
    expect(callMetadata(call, "s1")).toEqual({ session_id: "s1", function_call_id: "c1", function_id: "f::g" });
    const sent: TriggerRequest[] = [];
    const trigger = (async (req: TriggerRequest) => (sent.push(req), { ok: true })) as Trigger;
    await invokeTarget(trigger, call, "s1");
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({
      function_id: "f::g",
      payload: { a: 1 },
      metadata: { session_id: "s1", function_call_id: "c1", function_id: "f::g" },
    });
    expect(Object.keys(sent[0].payload as object)).toEqual(["a"]);
    expect(call).toEqual(copy);
  });

  it("consultBefore: allow, deny with the rule, needs_approval, unreadable → needs_approval, failure → gate_unavailable; one call each", async () => {
    const call = { id: "c", function_id: "f::g", arguments: { password: "hunter2", path: "/" } };
    const answering = (answer: unknown) => {
      let n = 0;
      const t = (async () => {
        n++;
        if (answer instanceof Error) throw answer;
        return answer;
      }) as Trigger;
      return { t, calls: () => n };
    };
    const allow = answering({ decision: "allow", rule_id: "f::g" });
    expect(await consultBefore(allow.t, call)).toEqual({ kind: "allow" });
    expect(allow.calls()).toBe(1);
    const deny = await consultBefore(
      answering({
        decision: "deny",
        rule_id: "no-root",
        rule_action: "deny",
        matched_constraint: { field: "path", operator: "matches", value: "^/$" },
      }).t,
      call,
    );
    expect(deny).toMatchObject({
      kind: "deny",
      envelope: {
        denied_by: "permissions",
        rule_id: "no-root",
        matched_constraint: { field: "path" },
        args_excerpt: { password: "<redacted>", path: "/" },
      },
    });
    expect(await consultBefore(answering({ decision: "needs_approval" }).t, call)).toEqual({ kind: "pending" });
    expect(await consultBefore(answering({ verdict: "?" }).t, call)).toEqual({ kind: "pending" });
    const down = await consultBefore(answering(new IIIError("timeout", "no answer in 5000 ms")).t, call);
    expect(down).toMatchObject({
      kind: "deny",
      envelope: { denied_by: "gate_unavailable", reason: expect.stringContaining("policy unreachable: timeout") },
    });
  });

  it("normalises results and maps target errors (docs/harness-contracts.md §3.1)", () => {
    expect(normaliseResult({ content: [{ type: "text", text: "x" }], details: { a: 1 }, terminate: true })).toEqual({
      content: [{ type: "text", text: "x" }],
      details: { a: 1 },
      terminate: true,
    });
    expect(normaliseResult({ n: 1 })).toEqual({ content: [{ type: "text", text: '{"n":1}' }], details: { n: 1 } });
    expect(normaliseResult("plain")).toEqual({ content: [{ type: "text", text: "plain" }], details: "plain" });
    const call = { id: "c", function_id: "skills/foo", arguments: {} };
    expect(targetErrorResult(call, new IIIError("function_not_found", "nope"), 1).details).toMatchObject({
      error: "function_not_found",
      hint: expect.stringContaining("skill path"),
    });
    expect(targetErrorResult(call, new IIIError("timeout", "late"), 1).details).toMatchObject({ error: "timeout" });
    expect(targetErrorResult(call, new IIIError("invocation_stopped", "dropped"), 1).details).toMatchObject({
      error: "interrupted",
      at_most_once: true,
    });
    expect(targetErrorResult(call, new IIIError("channel_send_failed", "x"), 1).details).toMatchObject({
      status: "denied",
      denied_by: "gate_unavailable",
    });
    expect(targetErrorResult(call, new IIIError("invalid_input", "bad path"), 1).details).toMatchObject({
      error: "handler_error",
      code: "invalid_input",
    });
  });

  it("infers the provider from the model name, never lmstudio", () => {
    expect(
      ["gpt-4o", "o3-mini", "o1", "kimi-k2", "moonshot-v1-8k", "claude-sonnet-4-6", "llama-3", "lmstudio-community/x"].map(inferProvider),
    ).toEqual(["openai", "openai", "openai", "kimi", "kimi", "anthropic", "anthropic", "anthropic"]);
  });
});
