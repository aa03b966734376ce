// Connection lifecycle (protocol/README.md §2.5–2.6, §3.2–3.5): identity first, registrations owned
// by their connection, reattach with a token, and the ownership-checked cleanup race.
// The cases that need nothing of workerd are in lifecycle.case.ts, run here and on the engine core
// (tests/unit/lifecycle.test.ts); this file adds those that need the object itself.
import { afterEach, describe, expect, it } from "vitest";
import { Wires, evictEngine, functionIds } from "./wire.ts";
import { lifecycleCases } from "./lifecycle.case.ts";

lifecycleCases();

const wires = new Wires();
afterEach(() => wires.closeAll());

describe("connect", () => {
  it("answers the SDKs' JSON keep-alive ping with a pong, also after an eviction", async () => {
    const w = await wires.connect();
    w.send({ type: "ping" });
    expect(await w.next((f) => f.type === "pong")).toEqual({ type: "pong" });
    await evictEngine();
    w.send({ type: "ping" });
    expect(await w.next((f) => f.type === "pong")).toEqual({ type: "pong" });
  });

  it("serves / (the default namespace) and /ns/<name> as separate engines", async () => {
    const dflt = await wires.connect("/");
    const blue = await wires.connect("/ns/blue");
    const blue2 = await wires.connect("/ns/blue");
    blue.serve("ns::only-blue", () => "blue");
    expect(await blue2.ok("ns::only-blue")).toBe("blue");
    const miss = await dflt.call("ns::only-blue");
    expect(miss.error.code).toBe("function_not_found");
    expect(await functionIds(dflt)).not.toContain("ns::only-blue");
  });

  it("refuses an invalid namespace and answers /otel without a workerregistered", async () => {
    const { exports } = await import("cloudflare:workers");
    const bad = await exports.default.fetch("http://localhost/ns/bad%20name", { headers: { Upgrade: "websocket" } });
    expect(bad.status).toBe(400);
    const otel = await wires.raw("/otel");
    otel.send(new TextEncoder().encode("OTLP{}").buffer as ArrayBuffer);
    expect(await otel.maybe(() => true, 200)).toBeNull();
  });
});

describe("reattach", () => {
  it("still works after the object was evicted (token and identity live in SQLite/attachments)", async () => {
    const old = await wires.connect();
    old.serve("life::evicted", () => "old");
    await evictEngine();
    const fresh = await wires.connect();
    fresh.send({ type: "reattach", previous_worker_id: old.workerId, reattach_token: old.token });
    expect(await old.waitClosed()).toBe(true);
    fresh.serve("life::evicted", () => "new");
    expect(await fresh.ok("life::evicted")).toBe("new");
  });
});
