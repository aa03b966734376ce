// The hook chain (src/hook-chain.ts) at the layer that owns it: hooks called in priority order, the
// first deny or hold stopping the rest, each hook's deadline and on_error on a fake clock, the
// mutations each point takes, the `functions` globs; and the binding cache (no engine read while
// it holds, invalidated by the change notice, a failed read transient).
import { IIIError } from "@iii-edge/protocol";
import { parseHookConfig, type HookInput, type HookPoint } from "@iii-edge/protocol/harness";
import type { TriggerRequest } from "@iii-edge/sdk-edge/client";
import { describe, expect, it } from "vitest";
import { TransientError, type Trigger } from "../src/calls.ts";
import {
  HOOK_BINDINGS_TTL_MS,
  HookBindings,
  lookupHookBindings,
  runHookChain,
  type ChainPorts,
  type HookBinding,
} from "../src/hook-chain.ts";

/** A clock that moves only when told, with the timers it holds. */
class FakeClock {
  now = 0;
  #timers = new Map<number, { at: number; fn: () => void }>();
  #next = 1;
  set = (fn: () => void, ms: number): number => {
    const id = this.#next++;
    this.#timers.set(id, { at: this.now + ms, fn });
    return id;
  };
  clear = (h: unknown): void => {
    this.#timers.delete(h as number);
  };
  get pending(): number {
    return this.#timers.size;
  }
  /** Move to `now + ms`, firing what falls due in order. */
  async advance(ms: number): Promise<void> {
    const until = this.now + ms;
    for (;;) {
      const due = [...this.#timers.entries()].filter(([, t]) => t.at <= until).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.#timers.delete(due[0]);
      this.now = due[1].at;
      due[1].fn();
      await flush();
    }
    this.now = until;
  }
}
const flush = () => new Promise<void>((r) => setImmediate(r));

type Answer = unknown | ((input: HookInput) => unknown | Promise<unknown>);

function harness(answers: Record<string, Answer>) {
  const clock = new FakeClock();
  const called: { fn: string; input: HookInput; timeoutMs: number }[] = [];
  const ports: ChainPorts = {
    invoke: async (fn, input, timeoutMs) => {
      called.push({ fn, input, timeoutMs });
      const a = answers[fn];
      return typeof a === "function" ? (a as (i: HookInput) => unknown)(input) : a;
    },
    setTimer: clock.set,
    clearTimer: clock.clear,
  };
  return { clock, called, ports };
}

function bound(point: HookPoint, function_id: string, config: Record<string, unknown> = {}, id = function_id): HookBinding {
  const c = parseHookConfig(point, config);
  if (!c.success) throw new Error("bad test config");
  return { id, point, function_id, config: c.data };
}

const envelope = (point: HookPoint): HookInput => ({ point, session_id: "s1", turn_id: "r1", step: 1, depth: 0 });
const callInput = (function_id = "shell::run", args: unknown = { cmd: "ls" }): HookInput => ({
  ...envelope("pre_trigger"),
  call: { id: "c1", function_id, arguments: args },
});
const never = () => new Promise<never>(() => {});

describe("the chain", () => {
  it("calls hooks in ascending priority, ties by function id, each seeing what the one before changed", async () => {
    const { ports, called } = harness({
      "b::second": { decision: "continue", mutations: { arguments: { cmd: "ls -l" } } },
      "a::second": undefined,
      "z::first": { decision: "continue", mutations: { arguments: { cmd: "ls -a" } } },
    });
    const out = await runHookChain(
      ports,
      [
        bound("pre_trigger", "b::second", { priority: 5 }),
        bound("pre_trigger", "a::second", { priority: 5 }),
        bound("pre_trigger", "z::first", { priority: -1 }),
      ],
      callInput(),
    );
    expect(called.map((c) => c.fn)).toEqual(["z::first", "a::second", "b::second"]);
    expect(called[1]!.input.call?.arguments).toEqual({ cmd: "ls -a" });
    expect(out.decision).toBe("continue");
    expect(out.input.call?.arguments).toEqual({ cmd: "ls -l" });
    expect(out.changes).toEqual([
      { function_id: "z::first", mutations: { arguments: { cmd: "ls -a" } } },
      { function_id: "b::second", mutations: { arguments: { cmd: "ls -l" } } },
    ]);
  });

  it("stops at the first deny, and at the first hold (pre_trigger)", async () => {
    const { ports, called } = harness({ "a::gate": { decision: "deny", reason: " not on fridays " }, "b::log": undefined });
    const denied = await runHookChain(ports, [bound("pre_turn", "a::gate"), bound("pre_turn", "b::log")], envelope("pre_turn"));
    expect(denied).toMatchObject({ decision: "deny", by: "a::gate", reason: "not on fridays" });
    expect(called.map((c) => c.fn)).toEqual(["a::gate"]);

    const h = harness({
      "a::rewrite": { decision: "continue", mutations: { arguments: { cmd: "pwd" } } },
      "b::approve": { decision: "hold", pending_timeout_ms: 60_000 },
      "c::after": undefined,
    });
    const bindings = [bound("pre_trigger", "a::rewrite"), bound("pre_trigger", "b::approve"), bound("pre_trigger", "c::after")];
    const held = await runHookChain(h.ports, bindings, callInput());
    expect(held).toMatchObject({ decision: "hold", by: "b::approve", pending_timeout_ms: 60_000 });
    expect(held.input.call?.arguments).toEqual({ cmd: "pwd" });
    expect(h.called.map((c) => c.fn)).toEqual(["a::rewrite", "b::approve"]);
    // Released: the chain goes on after the hook that held.
    const resumed = await runHookChain(h.ports, bindings, held.input, { resumeAfter: "b::approve" });
    expect(resumed.decision).toBe("continue");
    expect(h.called.map((c) => c.fn)).toEqual(["a::rewrite", "b::approve", "c::after"]);
  });

  it("a hook past its timeout_ms denies when fail_closed and is skipped when fail_open", async () => {
    const { ports, clock, called } = harness({ "slow::gate": never, "slow::log": never, "next::one": undefined });
    const closed = runHookChain(
      ports,
      [bound("pre_trigger", "slow::gate", { timeout_ms: 300 }), bound("pre_trigger", "next::one", { priority: 1 })],
      callInput(),
    );
    await flush();
    expect(called[0]!.timeoutMs).toBe(300);
    await clock.advance(299);
    let settled = false;
    void closed.then(() => (settled = true));
    await flush();
    expect(settled).toBe(false);
    await clock.advance(1);
    expect(await closed).toMatchObject({ decision: "deny", by: "slow::gate", reason: expect.stringContaining("no answer within 300 ms") });
    expect(called.map((c) => c.fn)).toEqual(["slow::gate"]);

    const open = runHookChain(ports, [bound("post_trigger", "slow::log"), bound("post_trigger", "next::one", { priority: 1 })], {
      ...envelope("post_trigger"),
      result: { function_call_id: "c1", function_id: "shell::run", content: [{ type: "text", text: "ok" }], is_error: false },
    });
    await flush();
    await clock.advance(5_000);
    expect((await open).decision).toBe("continue");
    expect(called.map((c) => c.fn)).toEqual(["slow::gate", "slow::log", "next::one"]);
    expect(clock.pending).toBe(0);
  });

  it("a throw, an unreadable answer or a decision the point does not take follows on_error", async () => {
    const { ports } = harness({
      "x::throws": () => {
        throw new IIIError("invocation_failed", "boom");
      },
      "x::garbage": { decision: "maybe" },
      "x::hold_at_turn": { decision: "hold" },
      "x::deny_after": { decision: "deny", reason: "late" },
    });
    expect(await runHookChain(ports, [bound("pre_turn", "x::throws")], envelope("pre_turn"))).toMatchObject({
      decision: "deny",
      reason: expect.stringContaining("invocation_failed: boom"),
    });
    expect((await runHookChain(ports, [bound("pre_generate", "x::garbage")], envelope("pre_generate"))).decision).toBe("deny");
    expect((await runHookChain(ports, [bound("pre_turn", "x::hold_at_turn")], envelope("pre_turn"))).decision).toBe("deny");
    expect((await runHookChain(ports, [bound("pre_turn", "x::throws", { on_error: "fail_open" })], envelope("pre_turn"))).decision).toBe(
      "continue",
    );
    // post_generate is read-only: a deny there is not a decision it takes; fail_open by default.
    expect((await runHookChain(ports, [bound("post_generate", "x::deny_after")], envelope("post_generate"))).decision).toBe("continue");
  });

  it("a hook whose function is gone: skipped when its binding went with it, fail_closed while the binding stays", async () => {
    const { ports, called } = harness({
      "gone::gate": () => {
        throw new IIIError("function_not_found", "Function gone::gate not found");
      },
      "next::one": undefined,
    });
    const bindings = [bound("pre_trigger", "gone::gate"), bound("pre_trigger", "next::one", { priority: 1 })];
    const asked: string[] = [];
    const gone = await runHookChain({ ...ports, stillBound: async (b) => (asked.push(b.id), false) }, bindings, callInput());
    expect(gone.decision).toBe("continue");
    expect(asked).toEqual(["gone::gate"]);
    expect(called.map((c) => c.fn)).toEqual(["gone::gate", "next::one"]);
    const down = await runHookChain({ ...ports, stillBound: async () => true }, bindings, callInput());
    expect(down).toMatchObject({ decision: "deny", by: "gone::gate", reason: expect.stringContaining("function_not_found") });
  });

  it("pre_generate may set the system prompt and append messages, within the bound", async () => {
    const msg = (t: string) => ({ role: "user", content: t });
    const { ports } = harness({
      "mem::recall": { decision: "continue", mutations: { system_prompt: "You remember: tea.", append_messages: [msg("earlier: tea")] } },
      "rag::many": { decision: "continue", mutations: { append_messages: Array.from({ length: 16 }, (_, i) => msg(`doc ${i}`)) } },
    });
    const input: HookInput = {
      ...envelope("pre_generate"),
      generate: { system_prompt: "base", messages: [], model: "m", provider: "openai" },
    };
    const one = await runHookChain(ports, [bound("pre_generate", "mem::recall")], input);
    expect(one.input.generate).toMatchObject({ system_prompt: "You remember: tea.", messages: [msg("earlier: tea")] });
    // 1 + 16 appended in one round is past HOOK_MAX_APPENDED_MESSAGES: that hook failed (fail_closed).
    const both = await runHookChain(ports, [bound("pre_generate", "mem::recall"), bound("pre_generate", "rag::many")], input);
    expect(both).toMatchObject({ decision: "deny", by: "rag::many", reason: expect.stringContaining("more than 16") });
  });

  it("post_trigger rewrites content, details and is_error; mutations of another point change nothing", async () => {
    const { ports } = harness({
      "scrub::secrets": {
        decision: "continue",
        mutations: { content: [{ type: "text", text: "[redacted]" }], details: { redacted: true } },
      },
      "mark::error": { decision: "continue", mutations: { is_error: true, system_prompt: "ignored here" } },
    });
    const out = await runHookChain(
      ports,
      [bound("post_trigger", "scrub::secrets"), bound("post_trigger", "mark::error", { priority: 1 })],
      {
        ...envelope("post_trigger"),
        result: {
          function_call_id: "c1",
          function_id: "secrets::read",
          content: [{ type: "text", text: "hunter2" }],
          is_error: false,
          details: { v: "hunter2" },
        },
      },
    );
    expect(out.input.result).toEqual({
      function_call_id: "c1",
      function_id: "secrets::read",
      content: [{ type: "text", text: "[redacted]" }],
      details: { redacted: true },
      is_error: true,
    });
    expect(out.changes.map((c) => c.mutations)).toEqual([
      { content: [{ type: "text", text: "[redacted]" }], details: { redacted: true } },
      { is_error: true },
    ]);
  });

  it("functions globs pick the calls a hook sees", async () => {
    const { ports, called } = harness({ "gate::shell": undefined, "gate::all": undefined });
    const bindings = [bound("pre_trigger", "gate::shell", { functions: ["shell::*", "fs::write"] }), bound("pre_trigger", "gate::all")];
    await runHookChain(ports, bindings, callInput("weather::today"));
    await runHookChain(ports, bindings, callInput("shell::exec"));
    await runHookChain(ports, bindings, callInput("fs::write"));
    expect(called.map((c) => `${c.fn} ${c.input.call?.function_id}`)).toEqual([
      "gate::all weather::today",
      "gate::all shell::exec",
      "gate::shell shell::exec",
      "gate::all fs::write",
      "gate::shell fs::write",
    ]);
  });
});

describe("the binding cache", () => {
  type Row = { id: string; trigger_type: string; function_id: string; config: unknown; status?: string };
  function engine(rows: Row[], fail = false) {
    const calls: TriggerRequest[] = [];
    const trigger = (async (req: TriggerRequest) => {
      calls.push(req);
      if (fail) throw new IIIError("timeout", "no answer");
      return { registered_triggers: rows, total: rows.length };
    }) as Trigger;
    return { trigger, calls };
  }

  it("reads the engine once per TTL, and again after a change notice", async () => {
    let now = 0;
    const cache = new HookBindings(lookupHookBindings, () => now);
    const e = engine([
      { id: "t1", trigger_type: "harness::hook::pre_turn", function_id: "a::gate", config: { priority: 2 } },
      { id: "t2", trigger_type: "harness::hook::pre_trigger", function_id: "b::gate", config: null },
      { id: "t3", trigger_type: "harness::hook::pre_trigger", function_id: "parked::gate", config: {}, status: "parked" },
      { id: "t4", trigger_type: "harness::hooks", function_id: "not::a_hook", config: {} },
    ]);
    expect((await cache.of(e.trigger, "pre_turn")).map((b) => [b.function_id, b.config.priority])).toEqual([["a::gate", 2]]);
    expect((await cache.of(e.trigger, "pre_trigger")).map((b) => b.function_id)).toEqual(["b::gate"]);
    expect(await cache.of(e.trigger, "post_generate")).toEqual([]);
    expect(e.calls).toHaveLength(1);
    now += HOOK_BINDINGS_TTL_MS - 1;
    await cache.of(e.trigger, "pre_turn");
    expect(e.calls).toHaveLength(1);
    cache.invalidate();
    await cache.of(e.trigger, "pre_turn");
    expect(e.calls).toHaveLength(2);
    now += HOOK_BINDINGS_TTL_MS;
    await cache.of(e.trigger, "pre_turn");
    expect(e.calls).toHaveLength(3);
    expect(cache.lookups).toBe(3);
  });

  it("a failed read is transient: the step goes back to the queue", async () => {
    const cache = new HookBindings();
    await expect(cache.of(engine([], true).trigger, "pre_turn")).rejects.toBeInstanceOf(TransientError);
  });
});
