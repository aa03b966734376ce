// Invocation routing (protocol/README.md §4) over the raw wire, one suite of cases run on both
// engines — in workerd through the engine Worker (invoke.test.ts) and on the engine core served
// in-process (tests/unit/invoke.test.ts): sync, void and enqueue; metadata and trace context on
// every hop; `_caller_worker_id`; and "every caller gets an answer" — unknown function at once,
// the engine-side deadline, and a target that disconnects mid-call.
import { afterEach, describe, expect, it } from "vitest";
import { NO_REPLY, Wires, sleep, uuid, type Frame } from "./wire-core.ts";

const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
/** The caller's trace as the target sees it: the same trace, sampled, under the engine's span of the
 * hop (engine-do/src/core/telemetry; tests/node/telemetry*.test.ts checks the parentage). */
const SAME_TRACE = expect.stringMatching(new RegExp(`^00-${TRACEPARENT.split("-")[1]}-(?!${TRACEPARENT.split("-")[2]})[0-9a-f]{16}-01$`));
const BAGGAGE = "tenant=acme,probe=1";

export function invokeCases(): void {
  const wires = new Wires();
  afterEach(() => wires.closeAll());

  describe("sync", () => {
    it("routes caller → engine → target → engine → caller with the caller's invocation_id", async () => {
      const target = await wires.connect();
      const caller = await wires.connect();
      const seen: Frame[] = [];
      target.serve("inv::add", (d, f) => (seen.push(f), { sum: d.a + d.b }));
      const id = uuid();
      const r = await caller.call("inv::add", { a: 2, b: 3 }, { invocation_id: id });
      expect(r).toMatchObject({ type: "invocationresult", invocation_id: id, function_id: "inv::add", result: { sum: 5 } });
      expect(seen[0]!.invocation_id).toBe(id);
      expect(seen[0]!.action).toBeUndefined();
    });

    it("relays a handler error as is, and a result of null / no result", async () => {
      const target = await wires.connect();
      const caller = await wires.connect();
      target.serve("inv::fail", () => {
        throw new Error("always fails");
      });
      target.serve("inv::nothing", () => undefined);
      target.serve("inv::null", () => null);
      const r = await caller.call("inv::fail");
      expect(r.error).toEqual({ code: "invocation_failed", message: "always fails" });
      expect(r.result).toBeUndefined();
      const n = await caller.call("inv::nothing");
      expect(n.error).toBeUndefined();
      expect("result" in n).toBe(false);
      const nl = await caller.call("inv::null");
      expect(nl.error).toBeUndefined();
    });

    it("carries metadata, traceparent and baggage to the target and back on the result", async () => {
      const target = await wires.connect();
      const caller = await wires.connect();
      let at: Frame | undefined;
      target.serve("inv::trace", (_d, f) => ((at = f), "ok"));
      const r = await caller.call(
        "inv::trace",
        { x: 1 },
        { metadata: { tenant: "acme", n: [1, 2] }, traceparent: TRACEPARENT, baggage: BAGGAGE },
      );
      expect(at).toMatchObject({ metadata: { tenant: "acme", n: [1, 2] }, traceparent: SAME_TRACE, baggage: BAGGAGE });
      expect(r).toMatchObject({ result: "ok", traceparent: TRACEPARENT, baggage: BAGGAGE });
      // Absent fields stay absent (§2.3), empty trace strings count as absent (§4.8): the call then
      // starts a trace of its own (its span the root).
      await caller.call("inv::trace", { x: 1 }, { traceparent: "", baggage: "" });
      expect(at).not.toHaveProperty("metadata");
      expect(at!.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(at).not.toHaveProperty("baggage");
    });

    it("injects _caller_worker_id into object payloads only (§4.6)", async () => {
      const target = await wires.connect();
      const caller = await wires.connect();
      const got: unknown[] = [];
      target.serve("inv::see", (d) => (got.push(d), null));
      await caller.call("inv::see", { a: 1 });
      await caller.call("inv::see", [1, 2]);
      await caller.call("inv::see", "text");
      caller.send({ type: "invokefunction", invocation_id: uuid(), function_id: "inv::see" }); // no data
      await caller.call("inv::see", 7);
      expect(got).toEqual([{ a: 1, _caller_worker_id: caller.workerId }, [1, 2], "text", null, 7]);
    });

    it("a built-in called from a worker sees the caller too (engine::workers::register)", async () => {
      const a = await wires.connect();
      await a.ok("engine::workers::register", { name: "inv-named", runtime: "node", pid: 42 });
      const list = (await a.ok("engine::workers::list")) as { workers: { id: string; name: string; pid: number }[] };
      expect(list.workers.find((w) => w.id === a.workerId)).toMatchObject({ name: "inv-named", pid: 42 });
    });

    it("accepts results only from the connection the call was sent to", async () => {
      const target = await wires.connect();
      const intruder = await wires.connect();
      const caller = await wires.connect();
      let asked: Frame | undefined;
      target.serve("inv::slow", async (_d, f) => {
        asked = f;
        intruder.send({ type: "invocationresult", invocation_id: f.invocation_id, function_id: "inv::slow", result: "spoofed" });
        await sleep(100);
        return "real";
      });
      const r = await caller.call("inv::slow");
      expect(asked).toBeDefined();
      expect(r.result).toBe("real");
    });
  });

  describe("every caller gets an answer", () => {
    it("unknown function → function_not_found at once", async () => {
      const caller = await wires.connect();
      const t0 = Date.now();
      const r = await caller.call("inv::does-not-exist", {});
      // At once: far inside the engine's 30 s call deadline, with room for a loaded machine.
      expect(Date.now() - t0).toBeLessThan(2_000);
      expect(r.error).toMatchObject({ code: "function_not_found" });
      expect(r.error.message).toContain("inv::does-not-exist");
    });

    it("the engine-side deadline ends a silent call with `timeout` (timeout_ms overrides 30 s)", async () => {
      const target = await wires.connect();
      const caller = await wires.connect();
      target.serve("inv::never", () => NO_REPLY);
      const t0 = Date.now();
      const r = await caller.call("inv::never", {}, { timeout_ms: 300 });
      const took = Date.now() - t0;
      expect(r.error.code).toBe("timeout");
      expect(took).toBeGreaterThanOrEqual(250);
      expect(took).toBeLessThan(2_000);
      // A late answer after the deadline is dropped, not delivered twice.
      const late = target.all("invokefunction").at(-1)!;
      target.send({ type: "invocationresult", invocation_id: late.invocation_id, function_id: "inv::never", result: "late" });
      expect(await caller.maybe((f) => f.type === "invocationresult" && f.invocation_id === late.invocation_id, 200)).toBeNull();
    });

    it("a target that disconnects mid-call → invocation_stopped within a second", async () => {
      const target = await wires.connect();
      const caller = await wires.connect();
      target.serve("inv::hang", () => NO_REPLY);
      const pending = caller.call("inv::hang", {}, {}, 5_000);
      await target.next((f) => f.type === "invokefunction" && f.function_id === "inv::hang");
      const t0 = Date.now();
      await target.close();
      const r = await pending;
      expect(Date.now() - t0).toBeLessThan(2_500); // not the call's own 5 s deadline
      expect(r.error.code).toBe("invocation_stopped");
    });

    it("a malformed result from the target ends the call at once (not at the deadline)", async () => {
      const target = await wires.connect();
      const caller = await wires.connect();
      target.serve("inv::garbled", () => NO_REPLY);
      const pending = caller.call("inv::garbled", {}, { timeout_ms: 10_000 });
      const asked = await target.next((f) => f.type === "invokefunction" && f.function_id === "inv::garbled");
      target.send({ type: "invocationresult", invocation_id: asked.invocation_id, function_id: "inv::garbled", error: { code: 42 } });
      const r = await pending;
      expect(r.error.code).toBe("invocation_failed");
      expect(r.error.message).toContain("invalid result");
      // The target is told its frame was refused, and gets no invocationresult of its own.
      expect((await target.next((f) => f.type === "error")).error.code).toBe("invalid_frame");
      expect(target.all("invocationresult")).toEqual([]);
    });

    it("a call to a function whose owner is gone fails at once", async () => {
      const target = await wires.connect();
      const caller = await wires.connect();
      target.serve("inv::gone", () => 1);
      await target.close();
      await sleep(30);
      const r = await caller.call("inv::gone");
      expect(["function_not_found", "invocation_stopped"]).toContain(r.error.code);
    });

    it("a caller that disconnects mid-call does not break the target or the engine", async () => {
      const target = await wires.connect();
      const caller = await wires.connect();
      target.serve("inv::slow2", async () => (await sleep(100), "done"));
      caller.send({ type: "invokefunction", invocation_id: uuid(), function_id: "inv::slow2", data: {} });
      await target.next((f) => f.type === "invokefunction");
      await caller.close();
      await sleep(200);
      const other = await wires.connect();
      expect(await other.ok("inv::slow2")).toBe("done");
    });
  });

  describe("void", () => {
    it("dispatches with a fresh invocation_id, discards the target's result, answers nothing", async () => {
      const target = await wires.connect();
      const caller = await wires.connect();
      const got: Frame[] = [];
      target.serve("inv::fire", (_d, f) => (got.push(f), "ignored"));
      caller.send({
        type: "invokefunction",
        function_id: "inv::fire",
        data: { n: 1 },
        action: { type: "void" },
        metadata: { m: 1 },
        traceparent: TRACEPARENT,
      });
      // A void call that carries an invocation_id still gets no answer.
      const withId = uuid();
      caller.send({ type: "invokefunction", invocation_id: withId, function_id: "inv::fire", data: { n: 2 }, action: { type: "void" } });
      // No invocation_id and no action degrades to fire-and-forget too (§4.1).
      caller.send({ type: "invokefunction", function_id: "inv::fire", data: { n: 3 } });
      await target.next((f) => f.type === "invokefunction" && f.data?.n === 3);
      await sleep(100);
      expect(got.map((f) => f.data.n).sort()).toEqual([1, 2, 3]);
      for (const f of got) expect(f.invocation_id).toMatch(/^[0-9a-f-]{36}$/);
      expect(got.find((f) => f.data.n === 1)).toMatchObject({
        metadata: { m: 1 },
        traceparent: SAME_TRACE,
        data: { _caller_worker_id: caller.workerId },
      });
      expect(caller.all("invocationresult")).toEqual([]);
    });

    it("a void call to an unknown function answers nothing", async () => {
      const caller = await wires.connect();
      caller.send({ type: "invokefunction", function_id: "inv::nobody", data: {}, action: { type: "void" } });
      expect(await caller.maybe((f) => f.type === "invocationresult" || f.type === "error", 200)).toBeNull();
      expect(await caller.ok("state::list_groups")).toBeDefined();
    });
  });

  describe("enqueue", () => {
    it("answers {messageReceiptId} and delivers the original data later", async () => {
      const target = await wires.connect();
      const caller = await wires.connect();
      const got: Frame[] = [];
      target.serve("inv::job", (_d, f) => (got.push(f), "done"));
      const r = await caller.call(
        "inv::job",
        { job: 1 },
        { action: { type: "enqueue", queue: "default" }, traceparent: TRACEPARENT, baggage: BAGGAGE },
      );
      expect(r.error).toBeUndefined();
      expect(r.result.messageReceiptId).toMatch(/^[0-9a-f-]{36}$/);
      const delivered = await target.next((f) => f.type === "invokefunction" && f.function_id === "inv::job");
      // No _caller_worker_id on enqueue (§4.4); the trace context rides along.
      expect(delivered.data).toEqual({ job: 1 });
      expect(delivered).toMatchObject({ traceparent: SAME_TRACE, baggage: BAGGAGE });
    });

    it("an unknown queue → enqueue_error", async () => {
      const caller = await wires.connect();
      const r = await caller.call("inv::job", {}, { action: { type: "enqueue", queue: "no-such-queue" } });
      expect(r.error.code).toBe("enqueue_error");
    });

    it("an idempotency key returns the first receipt", async () => {
      const caller = await wires.connect();
      const action = { type: "enqueue", queue: "default", idempotency_key: `k-${uuid()}` };
      const a = await caller.call("inv::job-idem", {}, { action });
      const b = await caller.call("inv::job-idem", {}, { action });
      expect(b.result.messageReceiptId).toBe(a.result.messageReceiptId);
    });
  });
}
