// The worker kit's state helpers (sdk-edge/src/state.ts) against the engine's own state::get and
// state::update (the core over Node's SQLite, docs/engineering.md Style §1): a lost race is read
// again and retried, a value that keeps moving gives up with a typed error, a broken stored value
// is reported, and writing nothing is a choice of the update.
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import { IIIError } from "@iii-edge/protocol";
import { EngineCore } from "@iii-edge/engine-do/core/engine.ts";
import { installEngine } from "@iii-edge/engine-do/core/install.ts";
import { casState, compareAndSet, readState, type Trigger } from "@iii-edge/sdk-edge/worker";
import { z } from "zod";
import { nodePorts } from "@iii-edge/test-support/node-sql";

/** An engine over a fresh database, and a `trigger` into it as a worker's handler has one. */
function engine(): { call: Trigger; calls: string[] } {
  const core = new EngineCore(nodePorts(new DatabaseSync(":memory:")));
  installEngine(core);
  core.start([]);
  const calls: string[] = [];
  const call = (async (req: { function_id: string; payload?: unknown }) => {
    calls.push(req.function_id);
    const r = await core.invoke({ function_id: req.function_id, data: req.payload });
    if (!r.ok) throw IIIError.relayed(r.error);
    return r.result;
  }) as Trigger;
  return { call, calls };
}

const counter = z.object({ n: z.number() });
const ref = { scope: "kit", key: "counter" };
const noWait = async () => {};

describe("casState", () => {
  it("creates, then changes, a value: update sees the parsed old value", async () => {
    const { call } = engine();
    const seen: unknown[] = [];
    const bump = (old: { n: number } | undefined) => {
      seen.push(old);
      return { n: (old?.n ?? 0) + 1 };
    };
    expect(await casState(call, ref, bump, { schema: counter })).toEqual({ written: true, value: { n: 1 } });
    expect(await casState(call, ref, bump, { schema: counter })).toEqual({ written: true, value: { n: 2 } });
    expect(seen).toEqual([undefined, { n: 1 }]);
    expect(await readState(call, ref, counter)).toEqual({ n: 2 });
  });

  it("a lost race is read again and retried on the value the other writer left", async () => {
    const { call, calls } = engine();
    await call({ function_id: "state::set", payload: { ...ref, value: { n: 10 } } });
    let raced = false;
    const out = await casState(
      call,
      ref,
      async (old) => {
        // Another copy of the worker writes between this read and this write, once.
        if (!raced) {
          raced = true;
          await call({ function_id: "state::set", payload: { ...ref, value: { n: 100 } } });
        }
        return { n: (old?.n ?? 0) + 1 };
      },
      { schema: counter, sleep: noWait },
    );
    // Not 11 (a lost update over the other write): 101.
    expect(out).toEqual({ written: true, value: { n: 101 } });
    expect(await readState(call, ref, counter)).toEqual({ n: 101 });
    expect(calls.filter((c) => c === "state::update")).toHaveLength(2);
  });

  it("gives up after `retries` lost races with state_conflict, and what it wrote is nothing", async () => {
    const { call, calls } = engine();
    let other = 0;
    const waits: number[] = [];
    const attempt = casState(
      call,
      ref,
      async (old) => {
        other += 1000;
        await call({ function_id: "state::set", payload: { ...ref, value: { n: other } } });
        return { n: (old?.n ?? 0) + 1 };
      },
      { schema: counter, retries: 3, sleep: async (ms) => void waits.push(ms) },
    );
    await expect(attempt).rejects.toMatchObject({ code: "state_conflict", message: expect.stringContaining("kit/counter kept changing") });
    expect(calls.filter((c) => c === "state::update")).toHaveLength(4);
    // Jittered backoff between attempts, never before the first, bounded by the cap.
    expect(waits).toHaveLength(3);
    for (const w of waits) expect(w).toBeGreaterThanOrEqual(0);
    for (const w of waits) expect(w).toBeLessThanOrEqual(20);
    expect(await readState(call, ref, counter)).toEqual({ n: 4000 });
  });

  it("a worker's own give-up error replaces state_conflict", async () => {
    const { call } = engine();
    const attempt = casState(
      call,
      ref,
      async (old) => {
        await call({ function_id: "state::set", payload: { ...ref, value: { n: Math.random() } } });
        return { n: (old?.n ?? 0) + 1 };
      },
      { schema: counter, retries: 0, giveUp: () => IIIError.custom("budget_busy", "too many writers") },
    );
    await expect(attempt).rejects.toMatchObject({ code: "budget_busy" });
  });

  it("an update that answers undefined writes nothing", async () => {
    const { call, calls } = engine();
    await call({ function_id: "state::set", payload: { ...ref, value: { n: 5 } } });
    expect(await casState(call, ref, () => undefined, { schema: counter })).toEqual({ written: false, value: { n: 5 } });
    expect(calls).not.toContain("state::update");
  });

  it("a stored value its schema refuses is invalid_state, not a reset", async () => {
    const { call, calls } = engine();
    await call({ function_id: "state::set", payload: { ...ref, value: { n: "five" } } });
    await expect(casState(call, ref, () => ({ n: 0 }), { schema: counter })).rejects.toMatchObject({ code: "invalid_state" });
    await expect(readState(call, ref, counter)).rejects.toMatchObject({
      code: "invalid_state",
      message: expect.stringContaining("kit/counter is unreadable"),
    });
    expect(calls).not.toContain("state::update");
  });
});

describe("compareAndSet", () => {
  it("writes only over the expected value; null expects nothing stored", async () => {
    const { call } = engine();
    expect((await compareAndSet(call, ref, { n: 1 }, null)).written).toBe(true);
    expect((await compareAndSet(call, ref, { n: 2 }, null)).written).toBe(false);
    expect((await compareAndSet(call, ref, { n: 3 }, { n: 2 })).written).toBe(false);
    expect((await compareAndSet(call, ref, { n: 3 }, { n: 1 })).written).toBe(true);
    expect(await readState(call, ref, counter)).toEqual({ n: 3 });
  });

  it("another failure is thrown, not taken for a lost race", async () => {
    const { call } = engine();
    // An empty scope is refused by the engine's contract for state::update.
    await expect(compareAndSet(call, { scope: "", key: "k" }, 1, null)).rejects.toMatchObject({ code: "deserialization_error" });
  });
});
