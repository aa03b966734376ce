// The worker's edge copy: composed into `npm start`'s Worker (deploy/harness.ts) over the engine's
// real local D1 (`env.DB`), creating its tables itself. The other harness workers are left out.
import type { AgentMessage } from "@iii-edge/protocol/harness";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { until } from "@iii-edge/test-support/wait";

const HARNESS_DISABLE = "harness,turn-orchestrator,provisioning,providers,auth-credentials,policy,approval-gate";

let engine: EngineServer;
let caller: RunningWorkers;
const call = <T>(function_id: string, payload: unknown) => caller.client.trigger<unknown, T>({ function_id, payload });
const user = (text: string): AgentMessage => ({ role: "user", content: [{ type: "text", text }], timestamp: 1 });

beforeAll(async () => {
  engine = await startEngine({ env: { HARNESS_DISABLE } });
  caller = runWorkers(engine.wsUrl, [], { workerName: "session-edge-caller" });
  await until(async () => {
    const r = await call<{ functions: { function_id: string }[] }>("engine::functions::list", {});
    return r.functions.some((f) => f.function_id === "session-tree::append_many");
  }, "the Worker's session-storage functions");
});

afterAll(async () => {
  await caller?.shutdown();
  await engine?.stop();
});

describe("session-storage inside the Worker, over D1", () => {
  it("keeps the tree: chained appends, idempotent replays, the active path", async () => {
    expect(await call("session-tree::ensure", { session_id: "edge-1" })).toEqual({ session_id: "edge-1", created: true });
    expect(
      await call("session-tree::append_many", {
        session_id: "edge-1",
        entries: [
          { entry_id: "a", message: user("a") },
          { entry_id: "b", message: user("b") },
        ],
      }),
    ).toEqual({
      entry_ids: ["a", "b"],
      appended: 2,
    });
    expect(await call("session-tree::append", { session_id: "edge-1", entry_id: "a", message: user("a") })).toEqual({
      entry_id: "a",
      appended: false,
    });
    expect(await call("session-tree::append", { session_id: "edge-1", entry_id: "c", parent_id: "a", message: user("c") })).toEqual({
      entry_id: "c",
      appended: true,
    });
    const page = await call<{ messages: { entry_id: string }[] }>("session-tree::messages", { session_id: "edge-1" });
    expect(page.messages.map((m) => m.entry_id)).toEqual(["a", "c"]);
    expect(await call("session-tree::get", { session_id: "edge-1" })).toMatchObject({ entry_count: 3, branch_count: 2, leaf_id: "c" });
  });

  it("drains an inbox atomically under concurrent drains", async () => {
    const work: Promise<unknown>[] = [];
    const drained: unknown[] = [];
    for (let i = 0; i < 20; i++) {
      work.push(call("session-inbox::push", { name: "steering", session_id: "edge-1", item: i }));
      if (i % 4 === 3)
        work.push(
          call<{ items: unknown[] }>("session-inbox::drain", { name: "steering", session_id: "edge-1" }).then((r) =>
            drained.push(...r.items),
          ),
        );
    }
    await Promise.all(work);
    drained.push(...(await call<{ items: unknown[] }>("session-inbox::drain", { name: "steering", session_id: "edge-1" })).items);
    expect([...drained].sort((x, y) => Number(x) - Number(y))).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });
});
