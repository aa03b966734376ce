// approval::resolve against the engine core served in-process (tests/support/node-engine.ts), the worker run alone in Node: a decision lands in
// state `approvals/<sid>/<cid>` (and fires a state trigger on that scope, as the orchestrator's
// turn::on_approval is bound); a bad payload writes nothing.
import { APPROVALS_SCOPE } from "@iii-edge/protocol/harness";
import type { WorkerModule, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import { eventually, until } from "@iii-edge/test-support/wait";
import { registerApprovalGate, RESOLVE, worker } from "../src/index.ts";

let engine: NodeEngine;
let gate: RunningWorkers;
let caller: RunningWorkers;
const fired: { event_type: string; key: string; new_value: unknown }[] = [];

const resolve = (payload: unknown) => caller.client.trigger<unknown, unknown>({ function_id: RESOLVE, payload });
const stored = (key: string) =>
  caller.client.trigger<unknown, unknown>({ function_id: "state::get", payload: { scope: APPROVALS_SCOPE, key } });
const allStored = () => caller.client.trigger<unknown, unknown[]>({ function_id: "state::list", payload: { scope: APPROVALS_SCOPE } });

beforeAll(async () => {
  engine = await startNodeEngine();
  gate = runWorkers(engine.wsUrl, [worker as WorkerModule<never>]);
  caller = runWorkers(engine.wsUrl, [], { workerName: "approval-test-caller" });
  caller.client.registerFunction("test::on_approval", (event: { event_type: string; key: string; new_value: unknown }) => {
    fired.push({ event_type: event.event_type, key: event.key, new_value: event.new_value });
    return null;
  });
  caller.client.registerTrigger({ type: "state", function_id: "test::on_approval", config: { scope: APPROVALS_SCOPE } });
  await until(async () => {
    const r = await caller.client.trigger<unknown, { functions: { function_id: string }[] }>({
      function_id: "engine::functions::list",
      payload: {},
    });
    const ids = r.functions.map((f) => f.function_id);
    return ids.includes(RESOLVE) && ids.includes("test::on_approval");
  }, "approval::resolve registered");
});

afterAll(async () => {
  await caller?.shutdown();
  await gate?.shutdown();
  await engine?.stop();
});

describe("approval::resolve", () => {
  it("writes the decision under <sid>/<cid>, reason normalised to null, and the state trigger fires", async () => {
    expect(await resolve({ session_id: "s1", function_call_id: "call_1", decision: "allow" })).toEqual({ ok: true });
    expect(await stored("s1/call_1")).toEqual({ decision: "allow", reason: null });
    expect(await resolve({ session_id: "s1", function_call_id: "call_2", decision: "deny", reason: "not on prod" })).toEqual({ ok: true });
    expect(await stored("s1/call_2")).toEqual({ decision: "deny", reason: "not on prod" });
    expect(await resolve({ session_id: "s1", function_call_id: "call_3", decision: "deny", reason: null })).toEqual({ ok: true });
    expect(await stored("s1/call_3")).toEqual({ decision: "deny", reason: null });
    await eventually(() => fired.length >= 3, 20_000, "three state trigger fires");
    expect(fired).toEqual(
      expect.arrayContaining([
        { event_type: "state:created", key: "s1/call_1", new_value: { decision: "allow", reason: null } },
        { event_type: "state:created", key: "s1/call_2", new_value: { decision: "deny", reason: "not on prod" } },
      ]),
    );
  });

  it("a second decision on the same call overwrites the first (the orchestrator reads it fresh)", async () => {
    expect(await resolve({ session_id: "s2", function_call_id: "c", decision: "deny" })).toEqual({ ok: true });
    expect(await resolve({ session_id: "s2", function_call_id: "c", decision: "allow", reason: "changed my mind" })).toEqual({ ok: true });
    expect(await stored("s2/c")).toEqual({ decision: "allow", reason: "changed my mind" });
  });

  it("bad ids and decisions are invalid_payload and write nothing", async () => {
    const before = (await allStored()).length;
    const bad: unknown[] = [
      { session_id: "a/b", function_call_id: "c", decision: "allow" },
      { session_id: "a", function_call_id: "b/c", decision: "allow" },
      { session_id: "a", function_call_id: "c", decision: "aborted" },
      { session_id: "a", function_call_id: "c", decision: "ALLOW" },
      { session_id: "a", function_call_id: "c" },
      { session_id: "", function_call_id: "c", decision: "allow" },
      { function_call_id: "c", decision: "deny" },
      { session_id: "a", function_call_id: "c", decision: "deny", reason: 7 },
      { session_id: "a", function_call_id: "c", decision: "deny", reason: "r".repeat(2001) },
      { session_id: "x".repeat(257), function_call_id: "c", decision: "allow" },
      "allow",
      null,
    ];
    for (const payload of bad) expect(await resolve(payload)).toEqual({ ok: false, error: "invalid_payload" });
    expect(await stored("a/b/c")).toBeFalsy();
    expect(await stored("a/c")).toBeFalsy();
    expect(await allStored()).toHaveLength(before);
  });
});

describe("a failed state write", () => {
  it("is resume_failed", async () => {
    // The write path alone, over a surface whose engine refuses the write.
    let handler: ((data: unknown, ctx: never) => unknown) | undefined;
    const surface = {
      runtime: "node",
      env: {},
      registerFunction: (id: string, h: (data: unknown, ctx: never) => unknown) => {
        if (id === RESOLVE) handler = h;
      },
      registerTrigger: () => {},
      trigger: () => Promise.reject(new Error("not connected")),
    } as unknown as WorkerSurface;
    registerApprovalGate(surface);
    const ctx = { trigger: () => Promise.reject(Object.assign(new Error("engine unavailable"), { code: "not_connected" })) } as never;
    expect(await handler!({ session_id: "s", function_call_id: "c", decision: "allow" }, ctx)).toEqual({
      ok: false,
      error: "resume_failed",
    });
  });
});
