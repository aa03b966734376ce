// `engine::functions-available` with config {delta: true} (iii-edge extension): the subscriber
// gets only what changed ({added, removed}), while a binding without it keeps the full list iii
// sends; and engine::functions::list, whose sorted listing is cached per catalog version,
// answers what the catalog holds right after each change (registration, removal, a worker's name).
// Discovery fires are sent without waiting for results (no invocation id, no open call), and
// `engine::triggers-available` reports trigger bindings the same way, full or as a delta.
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import type { EdgeHost, EdgeInvokeRequest, EngineFrame, Grant } from "@iii-edge/protocol";
import { openCallLimits } from "@iii-edge/engine-do/core/bounds.ts";
import { EngineCore, type EngineOptions, FUNCTIONS_CHANGED_DEBOUNCE_MS } from "@iii-edge/engine-do/core/engine.ts";
import { installEngine } from "@iii-edge/engine-do/core/install.ts";
import type { Conn, EnginePorts } from "@iii-edge/engine-do/core/ports.ts";
import { nodeSql } from "@iii-edge/test-support/node-sql";

function ports(timers: EnginePorts["timers"] = realTimers, edgeHosts: EnginePorts["edgeHosts"] = {}): EnginePorts {
  return {
    namespace: "default",
    sql: nodeSql(new DatabaseSync(":memory:")),
    clock: { now: () => Date.now() },
    timers,
    alarm: { request: () => {} },
    log: { info: () => {}, warn: () => {} },
    newId: () => crypto.randomUUID(),
    background: (p) => void p.catch(() => {}),
    edgeHosts,
  };
}

const realTimers: EnginePorts["timers"] = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/**
 * The discovery debounce fires only when the test says so (`elapse()`), so a burst provably lands
 * in one window; every other timer (call deadlines, sweeps) runs for real.
 */
class HeldTimers {
  private pending = new Map<number, () => void>();
  private next = 1;
  readonly port: EnginePorts["timers"] = {
    set: (fn, ms) => {
      if (ms !== FUNCTIONS_CHANGED_DEBOUNCE_MS) return { real: setTimeout(fn, ms) };
      const h = this.next++;
      this.pending.set(h, fn);
      return h;
    },
    clear: (h) => {
      if (typeof h === "number") this.pending.delete(h);
      else clearTimeout((h as { real: ReturnType<typeof setTimeout> }).real);
    },
  };
  /** Close the debounce windows open now. */
  elapse(): void {
    const due = [...this.pending.values()];
    this.pending.clear();
    for (const fn of due) fn();
  }
}

/** A connection that answers every call with null (unless `silent`: never) and keeps what it was sent. */
class Socket implements Conn {
  readonly frames: EngineFrame[] = [];
  readonly workerId: string;
  private readonly core: EngineCore;
  private readonly silent: boolean;
  constructor(workerId: string, core: EngineCore, opts: { silent?: boolean } = {}) {
    this.workerId = workerId;
    this.core = core;
    this.silent = opts.silent === true;
  }
  send(f: EngineFrame): boolean {
    this.frames.push(f);
    if (f.type === "invokefunction" && f.invocation_id && !this.silent) {
      const id = f.invocation_id;
      setImmediate(() =>
        this.core.message(this, JSON.stringify({ type: "invocationresult", invocation_id: id, function_id: f.function_id, result: null })),
      );
    }
    return true;
  }
  close(): void {}
  calls(fn: string): Record<string, unknown>[] {
    return this.invocations(fn).map((f) => f.data as Record<string, unknown>);
  }
  invocations(fn: string): Extract<EngineFrame, { type: "invokefunction" }>[] {
    return this.frames.filter(
      (f): f is Extract<EngineFrame, { type: "invokefunction" }> => f.type === "invokefunction" && f.function_id === fn,
    );
  }
}

async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 2_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

function setup(timers?: EnginePorts["timers"], opts?: EngineOptions, edgeHosts?: EnginePorts["edgeHosts"]) {
  const core = new EngineCore(ports(timers, edgeHosts), opts);
  installEngine(core);
  core.start([]);
  const sub = new Socket("sub", core);
  const owner = new Socket("owner", core);
  core.connect(sub, "s");
  core.connect(owner, "o");
  const send = (c: Socket, f: Record<string, unknown>) => core.message(c, JSON.stringify(f));
  /** A `registertrigger` frame from `c`. */
  const bind = (c: Socket, id: string, trigger_type: string, function_id: string, config: Record<string, unknown> = {}) =>
    send(c, { type: "registertrigger", id, trigger_type, function_id, config });
  send(sub, { type: "registerfunction", id: "sub::delta" });
  send(sub, { type: "registerfunction", id: "sub::full" });
  bind(sub, "t-delta", "engine::functions-available", "sub::delta", { delta: true });
  bind(sub, "t-full", "engine::functions-available", "sub::full");
  const list = async () => {
    const r = await core.invoke({ function_id: "engine::functions::list", data: { include_internal: true, limit: 1000 } });
    if (!r.ok) throw new Error(JSON.stringify(r.error));
    return r.result as { functions: { function_id: string; worker_name: string }[]; total: number };
  };
  return { core, sub, owner, send, bind, list };
}

describe("engine::functions-available with {delta: true}", () => {
  it("a delta subscriber gets {added, removed}; a plain one the full list, as iii sends it", async () => {
    const { sub, owner, send } = setup();
    await until(() => sub.calls("sub::full").length >= 1, "the first fire");
    const before = { delta: sub.calls("sub::delta").length, full: sub.calls("sub::full").length };

    send(owner, { type: "registerfunction", id: "orders::create", description: "creates an order" });
    await until(
      () => sub.calls("sub::delta").length > before.delta && sub.calls("sub::full").length > before.full,
      "the fires of a registration",
    );
    const d = sub.calls("sub::delta").at(-1)!;
    expect(d).toMatchObject({
      event: "functions_changed",
      added: [{ function_id: "orders::create", description: "creates an order" }],
      removed: [],
    });
    expect(d.functions).toBeUndefined();
    const full = sub.calls("sub::full").at(-1)!;
    expect((full.functions as { function_id: string }[]).map((f) => f.function_id)).toEqual(
      expect.arrayContaining(["orders::create", "sub::delta", "engine::functions::list"]),
    );

    const n = sub.calls("sub::delta").length;
    send(owner, { type: "unregisterfunction", id: "orders::create" });
    await until(() => sub.calls("sub::delta").length > n, "the fire of a removal");
    expect(sub.calls("sub::delta").at(-1)).toMatchObject({ event: "functions_changed", added: [], removed: ["orders::create"] });
  });
});

describe("engine::functions::list after changes (cached per catalog version)", () => {
  it("lists a registration, a removal and a worker's new name at once", async () => {
    const { core, owner, send, list } = setup();
    const before = await list();
    send(owner, { type: "registerfunction", id: "cache::a" });
    let after = await list();
    expect(after.total).toBe(before.total + 1);
    expect(after.functions.find((f) => f.function_id === "cache::a")?.worker_name).toBe("owner");
    core.describeWorker("owner", { name: "billing" });
    after = await list();
    expect(after.functions.find((f) => f.function_id === "cache::a")?.worker_name).toBe("billing");
    send(owner, { type: "unregisterfunction", id: "cache::a" });
    after = await list();
    expect(after.total).toBe(before.total);
    expect(after.functions.some((f) => f.function_id === "cache::a")).toBe(false);
  });
});

describe("engine::functions-available is debounced", () => {
  it("a burst inside one window fires once with all of it; the same ids again fire nothing", async () => {
    const held = new HeldTimers();
    const { sub, owner, send } = setup(held.port);
    held.elapse(); // the subscriber's own registrations
    await until(() => sub.calls("sub::full").length >= 1, "the first fire");
    const fired = () => sub.calls("sub::full").length;
    const first = fired();

    send(owner, { type: "registerfunction", id: "burst::a" });
    send(owner, { type: "registerfunction", id: "burst::b" });
    send(owner, { type: "registerfunction", id: "burst::c" });
    held.elapse();
    await until(() => fired() > first, "the burst's fire");
    expect(fired()).toBe(first + 1);
    const ids = (sub.calls("sub::full").at(-1)!.functions as { function_id: string }[]).map((f) => f.function_id);
    expect(ids).toEqual(expect.arrayContaining(["burst::a", "burst::b", "burst::c"]));

    // Re-registering an id with a new description leaves the set of ids as it was: no fire.
    send(owner, { type: "registerfunction", id: "burst::a", description: "new text" });
    held.elapse();
    // A later real change is the barrier: the next fire is its own, and nothing came before it.
    send(owner, { type: "registerfunction", id: "burst::d" });
    held.elapse();
    await until(() => fired() > first + 1, "the next change's fire");
    expect(fired()).toBe(first + 2);
    expect((sub.calls("sub::full").at(-1)!.functions as { function_id: string }[]).map((f) => f.function_id)).toContain("burst::d");
  });
});

describe("discovery fires are sent without waiting for results", () => {
  it("a subscriber gets a frame without invocation_id, and the engine keeps no open call for it", () => {
    const held = new HeldTimers();
    const { core, sub, owner, send } = setup(held.port);
    held.elapse();
    send(owner, { type: "registerfunction", id: "shape::a" });
    held.elapse();
    // Sent before the window's timer returns: nothing to wait for.
    const frames = sub.invocations("sub::delta");
    expect(frames.at(-1)).toMatchObject({
      type: "invokefunction",
      function_id: "sub::delta",
      data: { added: [{ function_id: "shape::a" }] },
    });
    for (const f of [...frames, ...sub.invocations("sub::full")]) expect(f.invocation_id).toBeUndefined();
    expect(core.introspection.activeInvocations("sub")).toBe(0);
  });

  it("a subscriber that never answers holds no share of its principal's open calls", async () => {
    const held = new HeldTimers();
    // One open call per principal: a fire waiting on the silent subscriber would take all of it.
    const { core, owner, send, bind } = setup(held.port, { openCalls: openCallLimits(8, 1), defaultInvokeTimeoutMs: 60_000 });
    const alice: Grant = { sub: "alice", ns: ["*"] };
    const mute = new Socket("mute", core, { silent: true });
    core.connect(mute, "m", { grant: alice });
    send(mute, { type: "registerfunction", id: "mute::on" });
    bind(mute, "t-mute", "engine::functions-available", "mute::on", { delta: true });
    held.elapse();
    for (const id of ["quiet::a", "quiet::b", "quiet::c"]) {
      send(owner, { type: "registerfunction", id });
      held.elapse();
    }
    expect(mute.calls("mute::on").flatMap((d) => (d.added as { function_id: string }[]).map((f) => f.function_id))).toEqual(
      expect.arrayContaining(["quiet::a", "quiet::b", "quiet::c"]),
    );
    expect(core.introspection.activeInvocations("mute")).toBe(0);
    // alice's own call still has its one slot.
    send(mute, { type: "invokefunction", invocation_id: "alice-call", function_id: "engine::functions::list", data: { limit: 1 } });
    await until(() => mute.frames.some((f) => f.type === "invocationresult" && f.invocation_id === "alice-call"), "alice's answer");
    const answer = mute.frames.find((f) => f.type === "invocationresult" && f.invocation_id === "alice-call");
    expect(answer).toMatchObject({ result: { total: expect.any(Number) } });
    expect((answer as { error?: unknown }).error).toBeUndefined();
  });

  it("a slow subscriber does not delay the others: every frame of a window is out when it closes", () => {
    const held = new HeldTimers();
    const { core, sub, owner, send } = setup(held.port);
    const slow = new Socket("slow", core, { silent: true });
    core.connect(slow, "sl");
    send(slow, { type: "registerfunction", id: "slow::on" });
    send(slow, { type: "registertrigger", id: "t-slow", trigger_type: "engine::functions-available", function_id: "slow::on", config: {} });
    held.elapse();
    const before = { slow: slow.calls("slow::on").length, sub: sub.calls("sub::full").length };
    send(owner, { type: "registerfunction", id: "race::x" });
    held.elapse();
    expect(slow.calls("slow::on").length).toBe(before.slow + 1);
    expect(sub.calls("sub::full").length).toBe(before.sub + 1);
    expect(sub.calls("sub::delta").at(-1)).toMatchObject({ added: [{ function_id: "race::x" }] });
  });

  it("a Worker-hosted subscriber's host is told not to be waited for, and one that would never answer holds no open call", async () => {
    const held = new HeldTimers();
    const asked: EdgeInvokeRequest[] = [];
    // Answers a void call at once (as FunctionHost does); any other call never.
    const host: EdgeHost = {
      iiiManifest: async () => ({
        functions: [{ id: "edge::on-fns" }],
        triggers: [{ id: "edge-fa", trigger_type: "engine::functions-available", function_id: "edge::on-fns", config: { delta: true } }],
      }),
      iiiInvoke: (req) => (asked.push(req), req.void ? Promise.resolve({}) : new Promise(() => {})),
    };
    // Four open calls in all: a fire waiting on the host would fill the table after four.
    const { core, owner, send } = setup(held.port, { openCalls: openCallLimits(4) }, { HOST: host });
    await core.refreshEdgeHosts();
    held.elapse();
    for (let i = 0; i < 6; i++) {
      send(owner, { type: "registerfunction", id: `edge-seen::f${i}` });
      held.elapse();
    }
    await until(() => asked.some((r) => JSON.stringify(r.data).includes("edge-seen::f5")), "the host's sixth fire");
    expect(asked.length).toBeGreaterThanOrEqual(6);
    for (const r of asked) expect(r).toMatchObject({ function_id: "edge::on-fns", void: true });
    // The table is free: a routed call still goes through.
    send(owner, { type: "registerfunction", id: "owner::echo" });
    const out = await core.invoke({ function_id: "owner::echo", data: {} });
    expect(out).toMatchObject({ ok: true });
  });

  it("with tracing on, one change is one span: every subscriber's frame carries the same context", () => {
    const held = new HeldTimers();
    const { core, sub, owner, send } = setup(held.port, { telemetry: { vars: { TRACING: "on", TRACE_RATE_LIMIT: "0" } } });
    held.elapse();
    send(owner, { type: "registerfunction", id: "traced::a" });
    held.elapse();
    const delta = sub.invocations("sub::delta").at(-1)!;
    const full = sub.invocations("sub::full").at(-1)!;
    expect(delta.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(full.traceparent).toBe(delta.traceparent);
    expect(core.telemetry.tracing).toBe(true);
  });

  it("engine::workers-available goes out the same way", () => {
    const { core, sub, send } = setup();
    send(sub, { type: "registerfunction", id: "sub::workers" });
    send(sub, { type: "registertrigger", id: "t-w", trigger_type: "engine::workers-available", function_id: "sub::workers", config: {} });
    core.connect(new Socket("late", core), "l");
    const f = sub.invocations("sub::workers").at(-1);
    expect(f).toMatchObject({ data: { event: "worker_connected", worker_id: "late" } });
    expect(f?.invocation_id).toBeUndefined();
  });
});

describe("engine::triggers-available", () => {
  type Entry = { id: string; trigger_type: string; function_id: string; worker_name: string; status: string };
  function bindings(held: HeldTimers) {
    const env = setup(held.port);
    const { sub, send, bind } = env;
    send(sub, { type: "registerfunction", id: "sub::tfull" });
    send(sub, { type: "registerfunction", id: "sub::tdelta" });
    bind(sub, "tt-full", "engine::triggers-available", "sub::tfull");
    bind(sub, "tt-delta", "engine::triggers-available", "sub::tdelta", { delta: true });
    held.elapse();
    const listed = async () => {
      const r = await env.core.invoke({ function_id: "engine::registered-triggers::list", data: {} });
      if (!r.ok) throw new Error(JSON.stringify(r.error));
      return (r.result as { registered_triggers: Entry[] }).registered_triggers;
    };
    return { ...env, listed };
  }

  it("the full list is what engine::registered-triggers::list answers; a delta is {added, removed}", async () => {
    const held = new HeldTimers();
    const { sub, owner, send, bind, listed } = bindings(held);
    // Subscribing itself is no change of the listed bindings (engine::* types are left out).
    expect(sub.calls("sub::tfull")).toHaveLength(0);
    send(owner, { type: "registerfunction", id: "orders::on-paid" });
    bind(owner, "b-paid", "orders::paid", "orders::on-paid", { min: 5 });
    held.elapse();
    const full = sub.calls("sub::tfull");
    expect(full).toHaveLength(1);
    expect(full[0]).toEqual({ event: "triggers_changed", triggers: await listed() });
    expect(full[0]!.triggers).toEqual([
      expect.objectContaining({
        id: "b-paid",
        trigger_type: "orders::paid",
        function_id: "orders::on-paid",
        worker_name: "owner",
        config: { min: 5 },
        status: "parked",
      }),
    ]);
    expect(sub.calls("sub::tdelta").at(-1)).toEqual({ event: "triggers_changed", added: full[0]!.triggers, removed: [] });
    for (const f of sub.invocations("sub::tfull")) expect(f.invocation_id).toBeUndefined();

    send(owner, { type: "unregistertrigger", id: "b-paid" });
    held.elapse();
    expect(sub.calls("sub::tdelta").at(-1)).toEqual({ event: "triggers_changed", added: [], removed: ["b-paid"] });
    expect(sub.calls("sub::tfull").at(-1)).toEqual({ event: "triggers_changed", triggers: [] });
  });

  it("a worker's disconnect removing its bindings is one change; a burst is one fire; a new config is none", async () => {
    const held = new HeldTimers();
    const { core, sub, owner, send, listed } = bindings(held);
    send(owner, { type: "registerfunction", id: "orders::f" });
    for (const id of ["b1", "b2", "b3"])
      send(owner, { type: "registertrigger", id, trigger_type: "orders::evt", function_id: "orders::f", config: {} });
    held.elapse();
    expect(sub.calls("sub::tdelta")).toHaveLength(1);
    expect((sub.calls("sub::tdelta")[0]!.added as Entry[]).map((t) => t.id)).toEqual(["b1", "b2", "b3"]);

    // The same binding with another config: the set of bindings is what it was.
    send(owner, { type: "registertrigger", id: "b1", trigger_type: "orders::evt", function_id: "orders::f", config: { again: true } });
    held.elapse();
    expect(sub.calls("sub::tdelta")).toHaveLength(1);
    // …but the same id bound to another type is a change (added again, under its new type).
    send(owner, { type: "registertrigger", id: "b1", trigger_type: "orders::other", function_id: "orders::f", config: {} });
    held.elapse();
    expect(sub.calls("sub::tdelta").at(-1)).toMatchObject({ added: [{ id: "b1", trigger_type: "orders::other" }], removed: [] });

    core.disconnect(owner.workerId);
    held.elapse();
    expect(sub.calls("sub::tdelta").at(-1)).toEqual({ event: "triggers_changed", added: [], removed: ["b1", "b2", "b3"] });
    expect(sub.calls("sub::tfull").at(-1)).toEqual({ event: "triggers_changed", triggers: await listed() });
    expect(await listed()).toEqual([]);
  });

  it.each([
    ["engine::triggers-available", "engine::registered-triggers::list"],
    ["engine::functions-available", "engine::functions::list"],
  ])("a maker whose grant may not call what %s pushes (%s) may not bind it, and is told nothing", (type) => {
    const held = new HeldTimers();
    const { core, owner, send } = setup(held.port);
    const bob = new Socket("bob", core);
    core.connect(bob, "b", { grant: { sub: "bob", ns: ["*"], call: ["bob::*"] } });
    send(bob, { type: "registerfunction", id: "bob::on" });
    send(bob, { type: "registertrigger", id: "t-bob", trigger_type: type, function_id: "bob::on", config: {} });
    expect(bob.frames.find((f) => f.type === "triggerregistrationresult")).toMatchObject({ id: "t-bob", error: { code: "forbidden" } });
    expect(core.catalog.triggers.has("t-bob")).toBe(false);
    send(owner, { type: "registerfunction", id: "orders::g" });
    send(owner, { type: "registertrigger", id: "b-g", trigger_type: "orders::evt", function_id: "orders::g", config: {} });
    held.elapse();
    expect(bob.calls("bob::on")).toHaveLength(0);
  });
});
