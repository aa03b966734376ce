// Edge-hosted functions, the plain part (sdk-edge/src/host-registry.ts) that the FunctionHost
// WorkerEntrypoint shell wraps: manifest, zod validation, errors, calls back with trace context.
// The shell itself runs in workerd and is covered by the browser suite (edge::hello, edge::call-tab).
import { describe, expect, it } from "vitest";
import { HostRegistry } from "@iii-edge/sdk-edge/registry";
import { rpcClient, type RpcTriggerRequest } from "@iii-edge/sdk-edge/rpc";
import { IIIError, z } from "@iii-edge/sdk-edge/node";

describe("HostRegistry", () => {
  const host = new HostRegistry<{ greeting: string }>();
  host.function("h::hello", ({ name }, ctx) => ({ text: `${ctx.env.greeting}, ${name}` }), {
    description: "greets",
    input: z.object({ name: z.string() }),
    output: z.object({ text: z.string() }),
  });
  host.function("h::nothing", () => undefined);
  host.function("h::fail", () => {
    throw new IIIError("not_found", "gone");
  });
  host.function("h::relay", (data: { to: string }, ctx) => ctx.trigger({ function_id: data.to, payload: { via: "relay" } }));
  host.trigger({ trigger_type: "cron", function_id: "h::nothing", config: { expression: "0 * * * * *" } });
  host.trigger({ trigger_type: "cron", function_id: "h::nothing", config: { expression: "30 * * * * *" } });
  const env = { greeting: "Hi" };
  const noCalls = async () => {
    throw new Error("unexpected call");
  };

  it("publishes a manifest with JSON Schema and deterministic trigger ids", () => {
    const m = host.manifest();
    expect(m.functions.map((f) => f.id)).toEqual(["h::hello", "h::nothing", "h::fail", "h::relay"]);
    expect(m.functions[0]).toMatchObject({
      description: "greets",
      request_format: { type: "object", required: ["name"] },
      response_format: { type: "object" },
    });
    expect(m.triggers.map((t) => t.id)).toEqual(["h::nothing#cron#0", "h::nothing#cron#1"]);
    expect(host.manifest()).toEqual(m);
  });

  it("invokes: result, no result, invalid_input, thrown code, unknown function", async () => {
    const inv = (function_id: string, data: unknown) => host.invoke({ function_id, data, invocation_id: "i-1" }, env, noCalls);
    expect(await inv("h::hello", { name: "Ada", _caller_worker_id: "w" })).toEqual({ result: { text: "Hi, Ada" } });
    expect(await inv("h::nothing", null)).toEqual({});
    expect(await inv("h::hello", { name: 1 })).toMatchObject({ error: { code: "invalid_input" } });
    expect(await inv("h::fail", null)).toEqual({ error: { code: "not_found", message: "gone" } });
    expect(await inv("h::missing", null)).toMatchObject({ error: { code: "function_not_found" } });
  });

  it("calls back through the engine RPC client with the caller's trace context", async () => {
    const sent: RpcTriggerRequest[] = [];
    const stub = { trigger: async (req: RpcTriggerRequest) => (sent.push(req), { ok: true as const, result: { echoed: req.payload } }) };
    const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const out = await host.invoke(
      { function_id: "h::relay", data: { to: "tab::echo" }, invocation_id: "i-2", traceparent: tp },
      env,
      (req, trace) => rpcClient(stub, trace).trigger(req),
    );
    expect(out).toEqual({ result: { echoed: { via: "relay" } } });
    expect(sent[0]).toMatchObject({ function_id: "tab::echo", traceparent: tp, timeout_ms: 30_000 });
  });

  it("rpc client turns ok:false into IIIError with the wire code", async () => {
    const stub = { trigger: async () => ({ ok: false as const, error: { code: "function_not_found", message: "Function x not found" } }) };
    const err = await rpcClient(stub)
      .trigger({ function_id: "x" })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(IIIError);
    expect(err).toMatchObject({ code: "function_not_found", message: "Function x not found" });
  });
});
