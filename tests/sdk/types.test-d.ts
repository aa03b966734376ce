// Type tests for the public API (run by vitest's typecheck in the sdk project).
import { describe, expectTypeOf, it } from "vitest";
import {
  registerWorker,
  z,
  TriggerAction,
  type EdgeClient,
  type FunctionRef,
  type ConnectionState,
  type InvocationContext,
} from "@iii-edge/sdk-edge/node";
import { connectEngine, type EngineClient, type EngineNamespaceLike } from "@iii-edge/sdk-edge/rpc";
import type { CallOutcome, EngineRpc, RpcTriggerRequest } from "@iii-edge/protocol";
import type { BrowserClient } from "@iii-edge/sdk-browser";
import type { IIIClient } from "iii-sdk";

declare const iii: EdgeClient;

describe("registerFunction", () => {
  it("infers the input of a zod-typed function and checks its output", () => {
    iii.registerFunction(
      "t::add",
      (data, _metadata, ctx) => {
        expectTypeOf(data).toEqualTypeOf<{ a: number; b: number }>();
        expectTypeOf(ctx).toEqualTypeOf<InvocationContext>();
        return { sum: data.a + data.b };
      },
      { input: z.object({ a: z.number(), b: z.number() }), output: z.object({ sum: z.number() }) },
    );
    // @ts-expect-error the output schema wants { sum: number }
    iii.registerFunction("t::bad", () => ({ sum: "not a number" }), { input: z.object({}), output: z.object({ sum: z.number() }) });
  });

  it("keeps iii-sdk's forms", () => {
    expectTypeOf(iii.registerFunction("t::any", async (d) => d)).toEqualTypeOf<FunctionRef>();
    expectTypeOf(iii.registerFunction({ id: "t::obj", description: "x" }, async () => 1)).toEqualTypeOf<FunctionRef>();
    iii.registerFunction("t::http", { url: "https://example.com", auth: { type: "hmac", secret_key: "K" } });
    // @ts-expect-error an unknown auth type
    iii.registerFunction("t::http2", { url: "https://example.com", auth: { type: "basic" } });
  });
});

describe("trigger and the rest of the surface", () => {
  it("matches iii-sdk's shapes", () => {
    expectTypeOf(iii.trigger<{ a: number }, { sum: number }>({ function_id: "f", payload: { a: 1 } })).toEqualTypeOf<
      Promise<{ sum: number }>
    >();
    iii.trigger({ function_id: "f", payload: 1, action: TriggerAction.Void() });
    iii.trigger({ function_id: "f", payload: 1, action: TriggerAction.Enqueue({ queue: "q", idempotencyKey: "k" }) });
    // @ts-expect-error unknown action
    iii.trigger({ function_id: "f", action: { type: "later" } });
    expectTypeOf(iii.addConnectionStateListener).parameter(0).toEqualTypeOf<(state: ConnectionState) => void>();
    expectTypeOf(iii.shutdown()).toEqualTypeOf<Promise<void>>();
    iii.registerTrigger({ type: "cron", function_id: "f", config: { expression: "* * * * * *" } });
    iii.registerTrigger({ trigger_type: "cron", function_id: "f", config: {} });
    // @ts-expect-error a trigger type is required
    iii.registerTrigger({ function_id: "f" });
  });

  it("returns the same client shape from Node and the browser, and an RPC client for Workers", () => {
    expectTypeOf(registerWorker).returns.toEqualTypeOf<EdgeClient>();
    expectTypeOf<BrowserClient>().toExtend<EdgeClient>();
    expectTypeOf(connectEngine).returns.toEqualTypeOf<EngineClient>();
    // Code written against iii-sdk's registerWorker/trigger call shape compiles against ours.
    expectTypeOf<Parameters<EdgeClient["trigger"]>[0]["function_id"]>().toEqualTypeOf<Parameters<IIIClient["trigger"]>[0]["function_id"]>();
  });
});

describe("the engine RPC client", () => {
  // The engine's Durable Object stub against this expectation: tests/workers/rpc.test.ts (it needs
  // workerd's types, which this project does not load).
  it("expects exactly protocol's contract of the engine's trigger()", () => {
    expectTypeOf<ReturnType<EngineNamespaceLike["getByName"]>>().toEqualTypeOf<EngineRpc>();
    expectTypeOf<Parameters<EngineRpc["trigger"]>[0]>().toEqualTypeOf<RpcTriggerRequest>();
    expectTypeOf<ReturnType<EngineRpc["trigger"]>>().toEqualTypeOf<Promise<CallOutcome>>();
  });

  it("refuses an engine whose trigger() drifted from it", () => {
    const needsMore = { getByName: () => ({ trigger: async (_req: RpcTriggerRequest & { route: string }) => ({ ok: true as const }) }) };
    // @ts-expect-error the engine would want a field the client never sends
    connectEngine(needsMore);
    const answersOther = { getByName: () => ({ trigger: async () => ({ success: true }) }) };
    // @ts-expect-error the engine answers something other than a CallOutcome
    connectEngine(answersOther);
  });
});
