// Reconnect after the engine restarts (protocol/README.md §2.6, §12.5): `engine.restart()` stops
// `npm start`'s engine and starts it again on the same port and state; both iii-sdk workers
// reconnect by themselves, replay their registrations, and calls between them work again.
import { afterAll, beforeAll, expect, it } from "vitest";
import { startSecureEngine } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { listed, registered, until, worker, type Worker } from "./sdk.ts";

let engine: EngineServer;
let a: Worker;
let b: Worker;
const stateEvents: unknown[] = [];

beforeAll(async () => {
  engine = await startSecureEngine();
  // Reconnect backoff capped at 1 s so the test does not wait through 1+2+4+8 s of doubling.
  const reconnectionConfig = { maxDelayMs: 1_000 };
  a = await worker(engine.wsUrl, "restart-a", { reconnectionConfig });
  b = await worker(engine.wsUrl, "restart-b", { reconnectionConfig });
  b.registerFunction("b::greet", async (data: { name: string }) => `hello ${data.name}`);
  a.registerFunction("a::on-state", async (data) => {
    stateEvents.push(data);
  });
  a.registerTrigger({ type: "state", function_id: "a::on-state", config: { scope: "restart" } });
  await registered(a, "b::greet", "a::on-state");
});

afterAll(async () => {
  await Promise.allSettled([a?.shutdown(), b?.shutdown()]);
  await engine?.stop();
});

it("both workers reconnect by themselves; calls, bindings and state written before the restart all work", async () => {
  expect(await a.trigger({ function_id: "b::greet", payload: { name: "before" } })).toBe("hello before");
  await a.trigger({ function_id: "state::set", payload: { scope: "restart", key: "k", value: { kept: 1 } } });
  await until(() => stateEvents.length === 1, "the state event before the restart");

  await engine.restart();

  // The SDKs reconnect with their backoff and replay; calls work again.
  const greeting = await until(
    async () => a.trigger({ function_id: "b::greet", payload: { name: "after" }, timeoutMs: 2_000 }),
    "b::greet after the restart",
    30_000,
    250,
  );
  expect(greeting).toBe("hello after");
  expect(await b.trigger({ function_id: "state::get", payload: { scope: "restart", key: "k" } })).toEqual({ kept: 1 });
  // Each worker is listed once (the old connections were dropped, not duplicated).
  const workers = (await a.trigger({ function_id: "engine::workers::list", payload: {} })) as { workers: { name: string }[] };
  expect(workers.workers.map((w) => w.name).sort()).toEqual(["restart-a", "restart-b"]);
  expect(await listed(a)).toEqual(expect.arrayContaining(["b::greet", "a::on-state"]));
  // The replayed state binding fires again.
  await until(async () => {
    // (The built-in harness workers bind state triggers of their own; this worker's is the one that matters.)
    const r = (await a.trigger({ function_id: "engine::registered-triggers::list", payload: { trigger_type: "state" } })) as {
      registered_triggers: { function_id: string }[];
    };
    return r.registered_triggers.filter((t) => t.function_id === "a::on-state").length === 1;
  }, "the replayed state binding");
  await b.trigger({ function_id: "state::set", payload: { scope: "restart", key: "k", value: { kept: 2 } } });
  // State triggers are durable fires, delivered at least once: when the restart falls between the
  // handler's answer and the write that deletes the delivered message, that first event comes again
  // after it. Nothing else may: every other event is the update, or a copy of the first.
  const updated = await until(
    () => stateEvents.find((e) => (e as { event_type?: string }).event_type === "state:updated"),
    "the state event after the restart",
  );
  expect(updated).toMatchObject({ event_type: "state:updated", old_value: { kept: 1 }, new_value: { kept: 2 } });
  expect(stateEvents.filter((e) => e !== updated)).toEqual(stateEvents.filter((e) => e !== updated).map(() => stateEvents[0]));
});
