// What a state write causes, delivered durably (protocol/README.md §7.2, §8.3): `state::set` /
// `state::update` with `enqueue` store one queue message in the write's own transaction, only
// when the write happens; `state` trigger fires are durable messages written with the write,
// retried until their handler succeeds and kept across eviction, with one delivery id (the
// invocation id of every attempt) per fire. Over the wire, against the real Engine object.
// The cases here run on both engines: in workerd through the engine Worker (state-delivery.test.ts, which
// keeps what needs the object itself) and on the engine core served in-process
// (tests/unit/state-delivery.test.ts).
import { afterEach, describe, expect, it } from "vitest";
import { NO_REPLY, Wires, eventually, sleep, uuid, type Frame } from "./wire-core.ts";

export function stateDeliveryCases(): void {
  const wires = new Wires();
  afterEach(() => wires.closeAll());

  const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const BAGGAGE = "tenant=acme";
  /** The caller's trace as the target sees it: the same trace, sampled, under the engine's span of the
   * hop (engine-do/src/core/telemetry; tests/node/telemetry*.test.ts checks the parentage). */
  const SAME_TRACE = expect.stringMatching(new RegExp(`^00-${TRACEPARENT.split("-")[1]}-(?!${TRACEPARENT.split("-")[2]})[0-9a-f]{16}-01$`));
  /** How long to watch for a delivery that must not come. */
  const QUIET_MS = 400;
  /** `jobs` (wrangler.toml): durable, standard. `turns`: durable fifo by session_id. `default`: Cloudflare Queues. */
  const DURABLE = "jobs";

  const deliveriesOf = (w: Wire, fn: string) => w.all("invokefunction").filter((f) => f.function_id === fn);
  type Wire = Awaited<ReturnType<Wires["connect"]>>;

  describe("state::set / state::update with enqueue (§7.2)", () => {
    it("stores the message with the write: one delivery, the receipt as its invocation id, in the writer's trace", async () => {
      const w = await wires.connect();
      const fn = `se::job-${uuid()}`;
      w.serve(fn, () => ({ done: true }));
      await w.ok("state::list_groups");
      const scope = `se-${uuid()}`;
      const r = (await w.ok(
        "state::set",
        { scope, key: "rec", value: { step: 1 }, enqueue: { function_id: fn, payload: { session_id: "s1", step: 1 }, queue: DURABLE } },
        { traceparent: TRACEPARENT, baggage: BAGGAGE },
      )) as Frame;
      expect(r).toMatchObject({ old_value: null, new_value: { step: 1 } });
      expect(r.messageReceiptId).toMatch(/^[0-9a-f-]{36}$/);
      const got = await w.next((f) => f.type === "invokefunction" && f.function_id === fn);
      // The payload exactly as given (no _caller_worker_id, like any enqueue), the receipt as invocation id.
      expect(got).toMatchObject({
        invocation_id: r.messageReceiptId,
        data: { session_id: "s1", step: 1 },
        traceparent: SAME_TRACE,
        baggage: BAGGAGE,
      });
      await sleep(QUIET_MS);
      expect(deliveriesOf(w, fn)).toHaveLength(1);
      // Without `enqueue` the result has no receipt.
      expect(await w.ok("state::set", { scope, key: "rec", value: { step: 2 } })).toEqual({
        old_value: { step: 1 },
        new_value: { step: 2 },
      });
    });

    it("a failed compare-and-set (state_conflict) enqueues nothing; the winning one enqueues exactly once", async () => {
      const w = await wires.connect();
      const fn = `se::step-${uuid()}`;
      const steps: unknown[] = [];
      w.serve(fn, (d) => void steps.push(d));
      await w.ok("state::list_groups");
      const scope = `cas-${uuid()}`;
      const enqueue = (step: string) => ({ function_id: fn, payload: { session_id: scope, step }, queue: "turns" });
      const won = (await w.ok("state::update", {
        scope,
        key: "rec",
        expected: null,
        ops: [{ type: "set", path: "", value: { state: "a" } }],
        enqueue: enqueue("a"),
      })) as Frame;
      expect(won).toMatchObject({ old_value: null, new_value: { state: "a" }, messageReceiptId: expect.any(String) });
      // A stale `expected`: the write does not happen, so neither does its message.
      const lost = await w.call("state::update", {
        scope,
        key: "rec",
        expected: null,
        ops: [{ type: "set", path: "", value: { state: "b" } }],
        enqueue: enqueue("b"),
      });
      expect(lost.error.code).toBe("state_conflict");
      await eventually(() => steps.length >= 1);
      await sleep(QUIET_MS);
      expect(steps).toEqual([{ session_id: scope, step: "a" }]);
      expect(await w.ok("state::get", { scope, key: "rec" })).toEqual({ state: "a" });
    });

    it("a repeated idempotency key stores the write again but the message once, answering the first receipt", async () => {
      const w = await wires.connect();
      const fn = `se::once-${uuid()}`;
      const got: unknown[] = [];
      w.serve(fn, (d) => void got.push(d));
      await w.ok("state::list_groups");
      const scope = `idem-${uuid()}`;
      const enqueue = (n: number) => ({ function_id: fn, payload: { n }, queue: DURABLE, idempotency_key: `${scope}-k` });
      const a = (await w.ok("state::set", { scope, key: "k", value: 1, enqueue: enqueue(1) })) as Frame;
      const b = (await w.ok("state::update", {
        scope,
        key: "k",
        ops: [{ type: "set", path: "", value: 2 }],
        enqueue: enqueue(2),
      })) as Frame;
      expect(b.messageReceiptId).toBe(a.messageReceiptId);
      expect(b.new_value).toBe(2);
      await eventually(() => got.length >= 1);
      await sleep(QUIET_MS);
      expect(got).toEqual([{ n: 1 }]);
    });
  });

  describe("state triggers are delivered at least once (§8.3)", () => {
    it("a handler that throws is retried with the same delivery id until it succeeds; the payload is unchanged", async () => {
      const w = await wires.connect();
      const scope = `retry-${uuid()}`;
      const fn = `st::flaky-${uuid()}`;
      const attempts: Frame[] = [];
      w.serve(fn, (_d, f) => {
        attempts.push(f);
        if (attempts.length === 1) throw new Error("transient");
        return null;
      });
      w.send({
        type: "registertrigger",
        id: `t-${scope}`,
        trigger_type: "state",
        function_id: fn,
        config: { scope },
        metadata: { via: "retry" },
      });
      await w.ok("state::list_groups");
      const t0 = Date.now();
      expect(await w.ok("state::set", { scope, key: "k", value: { n: 1 } })).toEqual({ old_value: null, new_value: { n: 1 } });
      await eventually(() => attempts.length >= 2, 5_000);
      await sleep(QUIET_MS);
      expect(attempts).toHaveLength(2);
      const [first, second] = attempts as [Frame, Frame];
      expect(second.invocation_id).toBe(first.invocation_id);
      for (const f of attempts) {
        expect(f.data).toEqual({ type: "state", event_type: "state:created", scope, key: "k", old_value: null, new_value: { n: 1 } });
        expect(f.metadata).toEqual({ via: "retry" });
      }
      // Retried after the state queue's backoff, not at once.
      expect(Date.now() - t0).toBeGreaterThanOrEqual(400);
      // Another fire is another delivery id.
      await w.ok("state::set", { scope, key: "k", value: { n: 2 } });
      await eventually(() => attempts.length >= 3);
      expect(attempts[2]!.invocation_id).not.toBe(first.invocation_id);
    });

    it("a condition that fails is retried like the handler (not taken as a skip); one answering false ends the fire", async () => {
      const w = await wires.connect();
      const scope = `cond-${uuid()}`;
      const asked: unknown[] = [];
      const got: unknown[] = [];
      w.serve(`st::cond-${scope}`, (d) => {
        asked.push(d.new_value);
        if (asked.length === 1) throw new Error("condition not ready");
        return d.new_value !== "skip";
      });
      w.serve(`st::gated-${scope}`, (d) => void got.push(d.new_value));
      w.send({
        type: "registertrigger",
        id: `t-${scope}`,
        trigger_type: "state",
        function_id: `st::gated-${scope}`,
        config: { scope, condition_function_id: `st::cond-${scope}` },
      });
      await w.ok("state::list_groups");
      await w.ok("state::set", { scope, key: "a", value: "go" });
      await eventually(() => got.length >= 1, 5_000);
      expect(asked).toEqual(["go", "go"]);
      await w.ok("state::set", { scope, key: "b", value: "skip" });
      await eventually(() => asked.length >= 3);
      await sleep(QUIET_MS + 600); // past the state queue's first backoff: no retry of a `false`
      expect(asked).toEqual(["go", "go", "skip"]);
      expect(got).toEqual(["go"]);
    });

    it("state::set answers without waiting for its handlers; the fires of one record arrive in write order", async () => {
      const w = await wires.connect();
      const scope = `order-${uuid()}`;
      const hang = `st::hang-${uuid()}`;
      const seq = `st::seq-${uuid()}`;
      const seen: unknown[] = [];
      let failedOnce = false;
      w.serve(hang, () => NO_REPLY);
      w.serve(seq, async (d) => {
        await sleep(Math.random() * 10);
        if (d.new_value === 2 && !failedOnce) {
          failedOnce = true;
          throw new Error("retry me");
        }
        seen.push(d.new_value);
        return null;
      });
      w.send({ type: "registertrigger", id: `t-hang-${scope}`, trigger_type: "state", function_id: hang, config: { scope, key: "h" } });
      w.send({ type: "registertrigger", id: `t-seq-${scope}`, trigger_type: "state", function_id: seq, config: { scope, key: "k" } });
      await w.ok("state::list_groups");
      const t0 = Date.now();
      await w.ok("state::set", { scope, key: "h", value: 1 });
      expect(Date.now() - t0).toBeLessThan(1_000);
      await eventually(() => deliveriesOf(w, hang).length >= 1);
      for (let n = 1; n <= 5; n++) await w.ok("state::set", { scope, key: "k", value: n });
      await eventually(() => seen.length >= 5, 6_000);
      // The failing second fire held back the later fires of its record until it succeeded.
      expect(failedOnce).toBe(true);
      expect(seen).toEqual([1, 2, 3, 4, 5]);
    });
  });
}
