// The engine core in plain Node (docs/engineering.md Style §1, §8: the core has no `cloudflare:*`
// import), over Node's own SQLite: a routed call that outlives PERSIST_AFTER_MS survives the loss
// of the object's memory. An "eviction" here is what workerd does to a Durable Object: the instance
// and its timers are gone, SQLite and the (hibernated) sockets remain, and a new instance starts
// over them. (miniflare's evictDurableObject waits for pending timers: workerd tests cannot show it.)
import { DatabaseSync } from "node:sqlite";
import { afterEach, describe, expect, it } from "vitest";
import { FRAME_BURST } from "@iii-edge/protocol";
import { EngineCore } from "@iii-edge/engine-do/core/engine.ts";
import type { EnginePorts } from "@iii-edge/engine-do/core/ports.ts";
import { nodePorts, RecordingConn, trackedTimers } from "@iii-edge/test-support/node-sql";

/** One object instance: its own timers (dropped on "eviction"), the shared database; the wall
 * clock unless another is given. */
function instance(db: DatabaseSync, clock: EnginePorts["clock"] = { now: () => Date.now() }) {
  const handles = new Set<ReturnType<typeof setTimeout>>();
  const core = new EngineCore(nodePorts(db, { clock, timers: trackedTimers(handles) }));
  return { core, evict: () => handles.forEach((h) => clearTimeout(h)) };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const live: { evict(): void }[] = [];
afterEach(() => live.splice(0).forEach((i) => i.evict()));

async function openCall(db: DatabaseSync, timeout_ms: number) {
  const first = instance(db);
  live.push(first);
  first.core.start([]);
  const target = new RecordingConn("target-1");
  const caller = new RecordingConn("caller-1");
  first.core.connect(target, "t-token");
  first.core.connect(caller, "c-token");
  first.core.message(target, JSON.stringify({ type: "registerfunction", id: "slow::model" }));
  first.core.message(
    caller,
    JSON.stringify({
      type: "invokefunction",
      invocation_id: "call-1",
      function_id: "slow::model",
      data: { q: 1 },
      timeout_ms,
      traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    }),
  );
  expect(target.find("invokefunction")).toMatchObject({ invocation_id: "call-1", function_id: "slow::model" });
  await sleep(1_100); // past PERSIST_AFTER_MS: the call is now in SQLite
  first.evict();
  return { target: new RecordingConn("target-1"), caller: new RecordingConn("caller-1") };
}

describe("routed calls across an eviction", () => {
  it("the target's late result still reaches the caller, with its trace context", async () => {
    const db = new DatabaseSync(":memory:");
    const { target, caller } = await openCall(db, 20_000);
    const second = instance(db);
    live.push(second);
    second.core.start([target, caller]);
    second.core.message(
      target,
      JSON.stringify({ type: "invocationresult", invocation_id: "call-1", function_id: "slow::model", result: { answer: 42 } }),
    );
    expect(caller.find("invocationresult")).toMatchObject({
      invocation_id: "call-1",
      result: { answer: 42 },
      traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    });
    expect(db.prepare("SELECT COUNT(*) AS n FROM routed_calls").get()).toEqual({ n: 0 });
  });

  it("the engine deadline still ends a call nobody answers", async () => {
    const db = new DatabaseSync(":memory:");
    const { target, caller } = await openCall(db, 2_000);
    const second = instance(db);
    live.push(second);
    second.core.start([target, caller]);
    expect(caller.find("invocationresult")).toBeUndefined();
    await sleep(1_200);
    expect(caller.find("invocationresult")).toMatchObject({ invocation_id: "call-1", error: { code: "timeout" } });
  });

  it("a target that is gone after the eviction ends the call with invocation_stopped at once", async () => {
    const db = new DatabaseSync(":memory:");
    const { caller } = await openCall(db, 20_000);
    const second = instance(db);
    live.push(second);
    second.core.start([caller]); // the target's socket did not survive
    expect(caller.find("invocationresult")).toMatchObject({ invocation_id: "call-1", error: { code: "invocation_stopped" } });
  });

  it("short calls never touch storage", async () => {
    const db = new DatabaseSync(":memory:");
    const one = instance(db);
    live.push(one);
    one.core.start([]);
    const target = new RecordingConn("t");
    const caller = new RecordingConn("c");
    one.core.connect(target, "x");
    one.core.connect(caller, "y");
    one.core.message(target, JSON.stringify({ type: "registerfunction", id: "fast::fn" }));
    one.core.message(caller, JSON.stringify({ type: "invokefunction", invocation_id: "c-1", function_id: "fast::fn", data: {} }));
    one.core.message(target, JSON.stringify({ type: "invocationresult", invocation_id: "c-1", function_id: "fast::fn", result: 1 }));
    await sleep(1_100);
    expect(caller.find("invocationresult")).toMatchObject({ result: 1 });
    expect(db.prepare("SELECT COUNT(*) AS n FROM routed_calls").get()).toEqual({ n: 0 });
  });
});

describe("a target over its frame budget", () => {
  it("an answer the budget drops ends its call at once with rate_limited, not at the deadline", async () => {
    const db = new DatabaseSync(":memory:");
    // The object's clock held still: every frame below arrives in the same instant, so the budget
    // cannot refill between them however slowly a loaded machine runs this loop.
    const instant = Date.now();
    const one = instance(db, { now: () => instant });
    live.push(one);
    one.core.start([]);
    const target = new RecordingConn("target-b");
    const caller = new RecordingConn("caller-b");
    one.core.connect(target, "t");
    one.core.connect(caller, "c");
    one.core.message(target, JSON.stringify({ type: "registerfunction", id: "busy::fn" }));
    caller.frames.length = 0;
    const ids: string[] = [];
    for (let i = 0; i < 200; i++) {
      const id = `call-${i}`;
      ids.push(id);
      one.core.message(
        caller,
        JSON.stringify({ type: "invokefunction", invocation_id: id, function_id: "busy::fn", data: {}, timeout_ms: 60_000 }),
      );
    }
    // The target spends its whole burst on noise, then answers: those answers are dropped unread.
    for (let i = 0; i < 2 * FRAME_BURST; i++) one.core.message(target, '{"type":"pong"}');
    for (const id of ids)
      one.core.message(target, JSON.stringify({ type: "invocationresult", invocation_id: id, function_id: "busy::fn", result: 1 }));
    await sleep(20); // settled calls answer their callers on the next turns of the event loop
    // Every call is answered at once: those the budget let through with their result, the rest rate_limited.
    const results = caller.frames.filter((f) => f.type === "invocationresult") as {
      invocation_id: string;
      result?: unknown;
      error?: { code: string };
    }[];
    expect(results.map((r) => r.invocation_id).sort()).toEqual([...ids].sort());
    const dropped = results.filter((r) => r.error?.code === "rate_limited").length;
    expect(dropped).toBeGreaterThan(0);
    expect(results.filter((r) => r.result === 1).length + dropped).toBe(ids.length);
  });
});
