// The engine object's RPC `trigger()` (protocol/src/rpc.ts): sdk-edge's client takes the Durable
// Object namespace as it is (no cast), and the engine parses every request before trusting it.
import { env } from "cloudflare:workers";
import { describe, expect, expectTypeOf, it } from "vitest";
import type { CallOutcome } from "@iii-edge/protocol";
import { connectEngine, type EngineNamespaceLike } from "@iii-edge/sdk-edge/rpc";

/** The stub as a caller that ignores the contract's types sees it (what reaches the object). */
const untyped = (ns = "default") => env.ENGINE.getByName(ns) as unknown as { trigger(req: unknown): Promise<CallOutcome> };

describe("engine RPC", () => {
  it("the Durable Object namespace is what sdk-edge's client expects", async () => {
    expectTypeOf(env.ENGINE).toExtend<EngineNamespaceLike>();
    const engine = connectEngine(env.ENGINE, { namespace: "rpc-typed" });
    expect(await engine.trigger({ function_id: "state::set", payload: { scope: "rpc", key: "k", value: 1 } })).toEqual({
      old_value: null,
      new_value: 1,
    });
    expect(await engine.trigger({ function_id: "state::get", payload: { scope: "rpc", key: "k" } })).toBe(1);
    await expect(engine.trigger({ function_id: "nope::x" })).rejects.toMatchObject({ code: "function_not_found" });
  });

  it("refuses a malformed request with the codes it always had, before calling anything", async () => {
    const stub = untyped("rpc-bad");
    expect(await stub.trigger({ payload: 1 })).toMatchObject({
      ok: false,
      error: { code: "invalid_frame", message: "function_id is required" },
    });
    expect(await stub.trigger({ function_id: "state::get", grant: { sub: "" } })).toMatchObject({
      ok: false,
      error: { code: "unauthorized", message: "malformed grant" },
    });
    const refused = await stub.trigger({ function_id: "state::set", payload: { scope: "s", key: "k", value: 1 }, timeout_ms: -5 });
    expect(refused).toMatchObject({ ok: false, error: { code: "invalid_frame" } });
    expect(refused.ok ? "" : refused.error.message).toMatch(/^trigger: timeout_ms: /);
    expect(
      await stub.trigger({ function_id: "state::set", payload: { scope: "s", key: "k", value: 1 }, action: { type: "later" } }),
    ).toMatchObject({ ok: false, error: { code: "invalid_frame" } });
    // Nothing ran.
    expect(await stub.trigger({ function_id: "state::get", payload: { scope: "s", key: "k" } })).toEqual({ ok: true });
  });
});
