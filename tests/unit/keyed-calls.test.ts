// Keyed functions in the engine core (engine-do/src/core/keyed.ts): a call that cannot name its
// instance is answered `invalid_arguments` at once and reaches no host; a keyed call to a
// Worker-hosted function carries its key to the host; a declaration the engine cannot honour is
// refused at registration.
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import { type EdgeInvokeRequest, KEYED_METADATA_KEY, MAX_KEY_LENGTH, keyedInstanceName } from "@iii-edge/protocol";
import { EngineCore } from "@iii-edge/engine-do/core/engine.ts";
import { nodePorts, RecordingConn } from "@iii-edge/test-support/node-sql";

const keyed = { [KEYED_METADATA_KEY]: "cart_id" };

function engine(edgeCalls: EdgeInvokeRequest[] = []) {
  const core = new EngineCore(
    nodePorts(new DatabaseSync(":memory:"), {
      edgeHosts: {
        EDGE_K: {
          iiiManifest: async () => ({ functions: [{ id: "ecart::add", metadata: keyed }], triggers: [] }),
          iiiInvoke: async (req) => {
            edgeCalls.push(req);
            return { result: { key: req.key } };
          },
        },
      },
    }),
  );
  core.start([]);
  return core;
}

const call = (id: string, function_id: string, data: unknown) =>
  JSON.stringify({ type: "invokefunction", invocation_id: id, function_id, data });

describe("keyed calls in the engine", () => {
  it("a call without a usable key is answered invalid_arguments and runs nowhere", async () => {
    const core = engine();
    const target = new RecordingConn("target-1");
    const caller = new RecordingConn("caller-1");
    core.connect(target, "t");
    core.connect(caller, "c");
    core.message(target, JSON.stringify({ type: "registerfunction", id: "cart::add", metadata: keyed }));
    expect(target.find("error")).toBeUndefined();
    const bad: [string, unknown][] = [
      ["missing", { item: "x" }],
      ["not an object", "cart-1"],
      ["a number", { cart_id: 7 }],
      ["empty", { cart_id: "" }],
      ["a slash", { cart_id: "a/b" }],
      ["too long", { cart_id: "k".repeat(MAX_KEY_LENGTH + 1) }],
    ];
    for (const [label, data] of bad) core.message(caller, call(label, "cart::add", data));
    await expect.poll(() => caller.frames.filter((f) => f.type === "invocationresult").length).toBe(bad.length);
    for (const [label] of bad) {
      expect(
        caller.find("invocationresult", (f) => f.invocation_id === label),
        label,
      ).toMatchObject({
        error: { code: "invalid_arguments", message: expect.stringContaining("cart_id") },
      });
    }
    expect(target.calls("cart::add")).toHaveLength(0);
    core.message(caller, call("good", "cart::add", { cart_id: "user-1@example.com", item: "x" }));
    expect(target.calls("cart::add")).toMatchObject([{ data: { cart_id: "user-1@example.com", item: "x" } }]);
  });

  it("refuses a registration whose key field is not a field name", () => {
    const core = engine();
    const target = new RecordingConn("target-1");
    core.connect(target, "t");
    for (const field of [7, "", "a.b", "has space"]) {
      target.frames.length = 0;
      core.message(target, JSON.stringify({ type: "registerfunction", id: "cart::bad", metadata: { [KEYED_METADATA_KEY]: field } }));
      expect(target.find("error"), String(field)).toMatchObject({ error: { code: "invalid_arguments" } });
    }
    expect(core.catalog.functions.has("cart::bad")).toBe(false);
  });

  it("passes the key of a call to a Worker-hosted keyed function on to its host", async () => {
    const seen: EdgeInvokeRequest[] = [];
    const core = engine(seen);
    await core.refreshEdgeHosts();
    const caller = new RecordingConn("caller-1");
    core.connect(caller, "c");
    core.message(caller, call("no-key", "ecart::add", {}));
    core.message(caller, call("with-key", "ecart::add", { cart_id: "c-9" }));
    await expect
      .poll(() => caller.find("invocationresult", (f) => f.invocation_id === "with-key"))
      .toMatchObject({ result: { key: "c-9" } });
    expect(caller.find("invocationresult", (f) => f.invocation_id === "no-key")).toMatchObject({ error: { code: "invalid_arguments" } });
    expect(seen.map((r) => r.key)).toEqual(["c-9"]);
  });

  it("calls the key's object straight when the host names keyed objects this engine has, else the host", async () => {
    const viaHost: string[] = [];
    const direct: { objects: string; instance: string; key: string }[] = [];
    const core = new EngineCore(
      nodePorts(new DatabaseSync(":memory:"), {
        edgeHosts: {
          EDGE_K: {
            iiiManifest: async () => ({
              functions: [{ id: "ecart::add", metadata: keyed }, { id: "ecart::plain" }],
              triggers: [],
              keyed_objects: "CARTS",
            }),
            iiiInvoke: async (req) => {
              viaHost.push(req.function_id);
              return { result: "host" };
            },
            iiiKeyedInvoke: (objects, instance, req) => {
              if (req.key === "elsewhere") return undefined;
              direct.push({ objects, instance, key: req.key });
              return Promise.resolve({ result: "object" });
            },
          },
        },
      }),
    );
    core.start([]);
    await core.refreshEdgeHosts();
    const caller = new RecordingConn("caller-1");
    core.connect(caller, "c");
    core.message(caller, call("a", "ecart::add", { cart_id: "c-1" }));
    core.message(caller, call("b", "ecart::add", { cart_id: "elsewhere" }));
    core.message(caller, call("c", "ecart::plain", {}));
    await expect.poll(() => caller.frames.filter((f) => f.type === "invocationresult").length).toBe(3);
    expect(caller.find("invocationresult", (f) => f.invocation_id === "a")).toMatchObject({ result: "object" });
    expect(caller.find("invocationresult", (f) => f.invocation_id === "b")).toMatchObject({ result: "host" });
    expect(direct).toEqual([{ objects: "CARTS", instance: keyedInstanceName("default", "ecart::add", "c-1"), key: "c-1" }]);
    expect(viaHost.sort()).toEqual(["ecart::add", "ecart::plain"]);
  });

  it("names instances by namespace, function group and key, unambiguously", () => {
    expect(keyedInstanceName("default", "cart::add", "k")).toBe(keyedInstanceName("default", "cart::get", "k"));
    expect(keyedInstanceName("default", "cart::add", "k")).not.toBe(keyedInstanceName("other", "cart::add", "k"));
    expect(keyedInstanceName("default", "a::b::add", "c")).not.toBe(keyedInstanceName("default", "a::add", "b::c"));
  });
});
