// Connection lifecycle (protocol/README.md §2.5–2.6, §3.2–3.5): identity first, registrations owned
// by their connection, reattach with a token, and the ownership-checked cleanup race.
// The cases here run on both engines: in workerd through the engine Worker (lifecycle.test.ts, which
// keeps what needs the object itself) and on the engine core served in-process
// (tests/unit/lifecycle.test.ts).
import { afterEach, describe, expect, it } from "vitest";
import { type Wire, Wires, eventually, functionIds, sleep, uuid } from "./wire-core.ts";

export function lifecycleCases(): void {
  const wires = new Wires();
  afterEach(() => wires.closeAll());

  const workerIds = async (w: Wire) => ((await w.ok("engine::workers::list")) as { workers: { id: string }[] }).workers.map((x) => x.id);

  describe("connect", () => {
    it("sends workerregistered first, before reading anything, with a fresh id and token", async () => {
      const a = await wires.raw();
      const b = await wires.raw();
      const fa = await a.next(() => true);
      const fb = await b.next(() => true);
      for (const f of [fa, fb]) {
        expect(f.type).toBe("workerregistered");
        expect(f.worker_id).toMatch(/^[0-9a-f-]{36}$/);
        expect(f.reattach_token).toMatch(/^[0-9a-f-]{36}$/);
      }
      expect(fa.worker_id).not.toBe(fb.worker_id);
      expect(fa.reattach_token).not.toBe(fb.reattach_token);
    });
  });

  describe("functions", () => {
    it("registers, routes and unregisters a function; only the owner can unregister it", async () => {
      const a = await wires.connect();
      const b = await wires.connect();
      a.serve("life::add", (d) => ({ sum: d.a + d.b }), { description: "adds" });
      expect(await b.ok("life::add", { a: 2, b: 3 })).toEqual({ sum: 5 });
      b.send({ type: "unregisterfunction", id: "life::add" }); // not b's: ignored
      expect(await b.ok("life::add", { a: 1, b: 1 })).toEqual({ sum: 2 });
      a.send({ type: "unregisterfunction", id: "life::add" });
      const r = await b.call("life::add", { a: 1, b: 1 });
      expect(r.error.code).toBe("function_not_found");
    });

    it("a live function belongs to its worker: another's registration is forbidden until the owner leaves", async () => {
      const a = await wires.connect();
      const b = await wires.connect();
      const c = await wires.connect();
      a.serve("life::who", () => "a");
      expect(await c.ok("life::who")).toBe("a");
      b.serve("life::who", () => "b");
      expect((await b.next((f) => f.type === "error")).error.code).toBe("forbidden");
      expect(await c.ok("life::who")).toBe("a");
      await a.close();
      await eventually(async () => !(await functionIds(c)).includes("life::who"));
      b.serve("life::who", () => "b");
      expect(await c.ok("life::who")).toBe("b");
    });

    it("removes a connection's functions when it closes", async () => {
      const a = await wires.connect();
      const b = await wires.connect();
      a.serve("life::gone", () => 1);
      expect(await b.ok("life::gone")).toBe(1);
      await a.close();
      await sleep(50);
      expect(await functionIds(b)).not.toContain("life::gone");
      expect((await workerIds(b)).includes(a.workerId)).toBe(false);
    });
  });

  describe("reattach", () => {
    it("with the right token retires the old connection and its registrations", async () => {
      const provider = await wires.connect();
      provider.send({ type: "registertriggertype", id: "life::hook", description: "test type" });
      const old = await wires.connect();
      old.serve("life::re", () => "old");
      old.send({ type: "registertrigger", id: "re-trig", trigger_type: "life::hook", function_id: "life::re", config: {} });
      await provider.next((f) => f.type === "registertrigger" && f.id === "re-trig");

      const fresh = await wires.connect();
      fresh.send({ type: "reattach", previous_worker_id: old.workerId, reattach_token: old.token });
      // The old connection is cleaned up (provider told) and closed by the engine.
      await provider.next((f) => f.type === "unregistertrigger" && f.id === "re-trig");
      expect(await old.waitClosed()).toBe(true);
      expect(old.closed?.code).toBe(4000);
      // Then the replay from the new connection takes over the same ids.
      fresh.serve("life::re", () => "new");
      fresh.send({ type: "registertrigger", id: "re-trig", trigger_type: "life::hook", function_id: "life::re", config: {} });
      await provider.next((f) => f.type === "registertrigger" && f.id === "re-trig");
      expect(await provider.ok("life::re")).toBe("new");
      expect(await workerIds(provider)).not.toContain(old.workerId);
    });

    it("with a wrong or missing token changes nothing", async () => {
      const old = await wires.connect();
      old.serve("life::keep", () => "old");
      const other = await wires.connect();
      other.send({ type: "reattach", previous_worker_id: old.workerId, reattach_token: uuid() });
      other.send({ type: "reattach", previous_worker_id: old.workerId });
      other.send({ type: "reattach", previous_worker_id: old.workerId, reattach_token: other.token });
      other.send({ type: "reattach", previous_worker_id: other.workerId, reattach_token: other.token });
      expect(await other.ok("life::keep")).toBe("old");
      expect(old.closed).toBeNull();
      expect(other.closed).toBeNull();
      expect(await workerIds(other)).toEqual(expect.arrayContaining([old.workerId, other.workerId]));
    });
  });

  describe("cleanup race (ownership-checked, §2.5 step 1)", () => {
    it("a late close of the old socket does not remove what the reattached connection replayed", async () => {
      const provider = await wires.connect();
      provider.send({ type: "registertriggertype", id: "life::race-hook", description: "test type" });
      const old = await wires.connect();
      old.serve("life::race", () => "old");
      old.send({ type: "registertrigger", id: "race-trig", trigger_type: "life::race-hook", function_id: "life::race", config: {} });
      await provider.next((f) => f.type === "registertrigger" && f.id === "race-trig");

      const fresh = await wires.connect();
      // The SDK's replay burst: reattach, then every registration, without waiting.
      fresh.send({ type: "reattach", previous_worker_id: old.workerId, reattach_token: old.token });
      fresh.serve("life::race", () => "new");
      fresh.send({ type: "registertrigger", id: "race-trig", trigger_type: "life::race-hook", function_id: "life::race", config: {} });
      await provider.next((f) => f.type === "registertrigger" && f.id === "race-trig");
      // The reattach retired the old binding (provider told once, before the replay re-delivered it).
      const seq = provider.frames.filter((f) => f.id === "race-trig").map((f) => f.type);
      expect(seq).toEqual(["registertrigger", "unregistertrigger", "registertrigger"]);
      await provider.next((f) => f.type === "unregistertrigger" && f.id === "race-trig");
      // The old socket's own close event arrives only now.
      await old.close();
      await sleep(50);
      expect(await provider.ok("life::race")).toBe("new");
      const regs = (await provider.ok("engine::registered-triggers::list", { trigger_type: "life::race-hook" })) as {
        registered_triggers: { id: string; status: string }[];
      };
      expect(regs.registered_triggers).toEqual([expect.objectContaining({ id: "race-trig", status: "active" })]);
      expect(await provider.maybe((f) => f.type === "unregistertrigger" && f.id === "race-trig", 200)).toBeNull();
    });

    it("without reattach, a new connection cannot take a live one's function; once the old one closes it can", async () => {
      const old = await wires.connect();
      const fresh = await wires.connect();
      old.serve("life::race2", () => "old");
      fresh.serve("life::race2", () => "new");
      expect((await fresh.next((f) => f.type === "error")).error.code).toBe("forbidden");
      expect(await fresh.ok("life::race2")).toBe("old");
      await old.close();
      await eventually(async () => !(await functionIds(fresh)).includes("life::race2"));
      fresh.serve("life::race2", () => "new");
      expect(await fresh.ok("life::race2")).toBe("new");
      expect(await functionIds(fresh)).toContain("life::race2");
    });
  });

  describe("reserved ids", () => {
    it("refuses a built-in function id or trigger type with forbidden and keeps the built-in", async () => {
      const a = await wires.connect();
      a.send({ type: "registerfunction", id: "state::get" });
      expect((await a.next((f) => f.type === "error")).error.code).toBe("forbidden");
      a.send({ type: "registertriggertype", id: "state", description: "mine" });
      expect((await a.next((f) => f.type === "error")).error.code).toBe("forbidden");
      a.send({ type: "registerfunction", id: "engine::functions::list" });
      expect((await a.next((f) => f.type === "error")).error.code).toBe("forbidden");
      a.send({ type: "registertriggertype", id: "engine::functions-available", description: "mine" });
      expect((await a.next((f) => f.type === "error")).error.code).toBe("forbidden");
      const r = await a.call("state::get", { scope: "life", key: "none" });
      expect(r.error).toBeUndefined();
      expect(await functionIds(a)).toContain("engine::functions::list");
    });
  });
}
