// Worker-hosted functions as the engine core sees them (engine-do/src/core/edge-hosts.ts): what a
// host's service binding answers is parsed with protocol's edge-host.ts schemas, never trusted as is.
import { describe, expect, it } from "vitest";
import { MAX_REGISTRATIONS_PER_WORKER, type EdgeInvokeRequest } from "@iii-edge/protocol";
import { edgeHostPort } from "@iii-edge/engine-do/core/edge-hosts.ts";

const call: EdgeInvokeRequest = { function_id: "edge::f", data: { a: 1 }, invocation_id: "i-1", namespace: "default" };
const host = (manifest: unknown, answer: unknown = {}) =>
  edgeHostPort("EDGE_T", { iiiManifest: async () => manifest, iiiInvoke: async () => answer });

describe("edge host port", () => {
  it("passes a well-formed manifest and answers through", async () => {
    const manifest = {
      functions: [{ id: "edge::f", description: "d", request_format: { type: "object" }, metadata: { team: "x" } }],
      triggers: [{ id: "edge::f#http#0", trigger_type: "http", function_id: "edge::f", config: { api_path: "f" } }],
    };
    expect(await host(manifest).iiiManifest()).toEqual(manifest);
    expect(await host(manifest, { result: { ok: 1 } }).iiiInvoke(call)).toEqual({ result: { ok: 1 } });
    expect(await host(manifest, {}).iiiInvoke(call)).toEqual({});
    expect(await host(manifest, { error: { code: "not_found", message: "gone" } }).iiiInvoke(call)).toEqual({
      error: { code: "not_found", message: "gone" },
    });
  });

  it("refuses a malformed manifest, naming the host and the field", async () => {
    for (const [bad, where] of [
      [null, "answer"],
      [{ functions: [{ id: "" }], triggers: [] }, "functions.0.id"],
      [{ functions: [], triggers: [{ id: "t", trigger_type: "cron" }] }, "triggers.0.function_id"],
      [{ functions: [{ id: "f", metadata: [1] }], triggers: [] }, "functions.0.metadata"],
      [{ functions: Array.from({ length: MAX_REGISTRATIONS_PER_WORKER + 1 }, (_, i) => ({ id: `f${i}` })), triggers: [] }, "functions"],
    ] as const) {
      await expect(host(bad).iiiManifest()).rejects.toThrow(
        new RegExp(`^edge host EDGE_T sent a malformed manifest: ${where.replace(/\./g, "\\.")}: `),
      );
    }
  });

  it("ends a call whose answer is malformed with invocation_failed", async () => {
    for (const bad of [null, 7, { error: "kaboom" }, { error: { code: 1, message: "m" } }]) {
      expect(await host({ functions: [], triggers: [] }, bad).iiiInvoke(call)).toMatchObject({
        error: { code: "invocation_failed", message: expect.stringContaining("edge host EDGE_T answered edge::f malformed") },
      });
    }
  });
});
