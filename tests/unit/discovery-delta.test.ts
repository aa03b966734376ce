// `engine::functions-available` with config {delta: true} (iii-edge extension): the subscriber
// gets only what changed ({added, removed}), while a binding without it keeps the full list iii
// sends; and engine::functions::list, whose sorted listing is cached per catalog version,
// answers what the catalog holds right after each change (registration, removal, a worker's name).
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import type { EngineFrame } from "@iii-edge/protocol";
import { EngineCore, FUNCTIONS_CHANGED_DEBOUNCE_MS } from "@iii-edge/engine-do/core/engine.ts";
import { installEngine } from "@iii-edge/engine-do/core/install.ts";
import type { Conn, EnginePorts } from "@iii-edge/engine-do/core/ports.ts";
import { nodeSql } from "../support/node-sql.ts";

function ports(timers: EnginePorts["timers"] = realTimers): EnginePorts {
  return {
    namespace: "default",
    sql: nodeSql(new DatabaseSync(":memory:")),
    clock: { now: () => Date.now() },
    timers,
    alarm: { request: () => {} },
    log: { info: () => {}, warn: () => {} },
    newId: () => crypto.randomUUID(),
    background: (p) => void p.catch(() => {}),
    edgeHosts: {},
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

/** A connection that answers every call with null and keeps what it was sent. */
class Socket implements Conn {
  readonly frames: EngineFrame[] = [];
  readonly workerId: string;
  private readonly core: EngineCore;
  constructor(workerId: string, core: EngineCore) {
    this.workerId = workerId;
    this.core = core;
  }
  send(f: EngineFrame): boolean {
    this.frames.push(f);
    if (f.type === "invokefunction" && f.invocation_id) {
      const id = f.invocation_id;
      setImmediate(() =>
        this.core.message(this, JSON.stringify({ type: "invocationresult", invocation_id: id, function_id: f.function_id, result: null })),
      );
    }
    return true;
  }
  close(): void {}
  calls(fn: string): Record<string, unknown>[] {
    return this.frames
      .filter((f) => f.type === "invokefunction" && f.function_id === fn)
      .map((f) => (f as { data: Record<string, unknown> }).data);
  }
}

async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 2_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

function setup(timers?: EnginePorts["timers"]) {
  const core = new EngineCore(ports(timers));
  installEngine(core);
  core.start([]);
  const sub = new Socket("sub", core);
  const owner = new Socket("owner", core);
  core.connect(sub, "s");
  core.connect(owner, "o");
  const send = (c: Socket, f: Record<string, unknown>) => core.message(c, JSON.stringify(f));
  send(sub, { type: "registerfunction", id: "sub::delta" });
  send(sub, { type: "registerfunction", id: "sub::full" });
  send(sub, {
    type: "registertrigger",
    id: "t-delta",
    trigger_type: "engine::functions-available",
    function_id: "sub::delta",
    config: { delta: true },
  });
  send(sub, { type: "registertrigger", id: "t-full", trigger_type: "engine::functions-available", function_id: "sub::full", config: {} });
  const list = async () => {
    const r = await core.invoke({ function_id: "engine::functions::list", data: { include_internal: true, limit: 1000 } });
    if (!r.ok) throw new Error(JSON.stringify(r.error));
    return r.result as { functions: { function_id: string; worker_name: string }[]; total: number };
  };
  return { core, sub, owner, send, list };
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
