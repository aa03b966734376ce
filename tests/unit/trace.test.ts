// Trace context through everything that causes a call (protocol/README.md §4.8), on the engine core
// served in this process with every trace sampled: a trigger fire (state, stream, subscribe,
// durable:subscriber, a worker-provided type) and every attempt of a queue delivery (the enqueue
// action, engine::queue::enqueue, state::set's enqueue) carry the `traceparent` / `baggage` of the
// write, publish or enqueue that caused it; a cron occurrence starts a fresh trace. Asserted on the
// invokefunction frames the handler's worker receives. Each hop the engine makes is a span of its
// own (engine-do/src/core/telemetry), so what arrives is the same trace with the engine's span as its
// parent (IN_TRACE). What needs the front door (an http route, POST /_iii/invoke) is in
// tests/workers/trace.test.ts; tests/node/telemetry*.test.ts checks the parentage.
import { afterEach, describe, expect, it } from "vitest";
import { Wires, eventually, sleep, uuid, useNodeEngine, type Frame } from "./node-wire.ts";
import { IN_TRACE, SAME_TRACE, TRACE, TRACEPARENT, firstCallOf, traceId } from "../workers/trace-context.ts";

useNodeEngine({ tracing: true });

const wires = new Wires();
afterEach(() => wires.closeAll());

describe("trigger fires continue the trace of what caused them", () => {
  it("state: the fire (condition and function) carries the write's traceparent and baggage", async () => {
    const w = await wires.connect();
    const scope = `tr-state-${uuid()}`;
    const cond = firstCallOf(w, `tr::cond-${scope}`, () => true);
    const fired = firstCallOf(w, `tr::state-${scope}`);
    w.send({
      type: "registertrigger",
      id: `t-${scope}`,
      trigger_type: "state",
      function_id: `tr::state-${scope}`,
      config: { scope, condition_function_id: `tr::cond-${scope}` },
    });
    await w.ok("state::list_groups");
    await w.ok("state::set", { scope, key: "k", value: 1 }, TRACE);
    expect(await cond).toMatchObject(IN_TRACE);
    expect(await fired).toMatchObject(IN_TRACE);
  });

  it("stream: stream::set and stream::send fire in the caller's trace", async () => {
    const w = await wires.connect();
    const stream = `tr-stream-${uuid()}`;
    const seen: Frame[] = [];
    w.serve("tr::on-stream", (_d, f) => void seen.push(f));
    w.send({
      type: "registertrigger",
      id: `t-${stream}`,
      trigger_type: "stream",
      function_id: "tr::on-stream",
      config: { stream_name: stream },
    });
    await w.ok("state::list_groups");
    await w.ok("stream::set", { stream_name: stream, group_id: "g", item_id: "i", data: 1 }, TRACE);
    await w.call("stream::send", { stream_name: stream, group_id: "g", type: "ping" }, { traceparent: TRACEPARENT });
    await eventually(() => seen.length >= 2);
    expect(seen[0]).toMatchObject(IN_TRACE);
    expect(seen[1]).toMatchObject({ traceparent: SAME_TRACE });
    expect(seen[1]).not.toHaveProperty("baggage");
  });

  it("subscribe and durable:subscriber: the publisher's trace, on every attempt of a durable delivery", async () => {
    const w = await wires.connect();
    const topic = `tr-topic-${uuid()}`;
    const plain = firstCallOf(w, "tr::sub");
    const durable: Frame[] = [];
    w.serve("tr::durable-sub", (_d, f) => {
      durable.push(f);
      if (durable.length === 1) throw new Error("once more");
      return null;
    });
    w.send({ type: "registertrigger", id: `t-sub-${topic}`, trigger_type: "subscribe", function_id: "tr::sub", config: { topic } });
    w.send({
      type: "registertrigger",
      id: `t-dsub-${topic}`,
      trigger_type: "durable:subscriber",
      function_id: "tr::durable-sub",
      config: { topic, queue_config: { backoff_ms: 10 } },
    });
    await w.ok("state::list_groups");
    await w.ok("publish", { topic, data: { n: 1 } }, TRACE);
    expect(await plain).toMatchObject(IN_TRACE);
    await w.ok("iii::durable::publish", { topic, data: { n: 2 } }, TRACE);
    await eventually(() => durable.length >= 2, 5_000);
    for (const f of durable) expect(f).toMatchObject({ ...IN_TRACE, data: { n: 2 } });
  });

  it("a worker-provided trigger type: the provider's fire passes through in the provider's trace", async () => {
    const provider = await wires.connect();
    const owner = await wires.connect();
    const type = `tr::type-${uuid()}`;
    provider.send({ type: "registertriggertype", id: type, description: "fires with a trace" });
    await provider.ok("state::list_groups");
    const fired = firstCallOf(owner, "tr::custom");
    owner.send({ type: "registertrigger", id: `t-${type}`, trigger_type: type, function_id: "tr::custom", config: {} });
    await provider.next((f) => f.type === "registertrigger" && f.id === `t-${type}`);
    provider.send({ type: "invokefunction", function_id: "tr::custom", data: { fired: true }, action: { type: "void" }, ...TRACE });
    expect(await fired).toMatchObject({ ...IN_TRACE, data: { fired: true } });
  });

  it("cron: every occurrence starts a fresh trace", async () => {
    const w = await wires.connect();
    const runs: Frame[] = [];
    w.serve("tr::tick", (_d, f) => void runs.push(f));
    const id = `t-cron-${uuid()}`;
    await w.ok(
      "engine::register_trigger",
      { id, trigger_type: "cron", function_id: "tr::tick", config: { expression: "* * * * * *" } },
      TRACE,
    );
    await eventually(() => runs.length >= 2, 5_000);
    await w.ok("engine::unregister_trigger", { id });
    const ids = runs.slice(0, 2).map((f) => {
      expect(f.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(f).not.toHaveProperty("baggage");
      return traceId(f.traceparent as string);
    });
    expect(new Set(ids).size).toBe(2);
    expect(ids).not.toContain(traceId(TRACEPARENT));
  });
});

describe("queue rows keep the enqueuer's trace for every attempt", () => {
  for (const how of ["action", "engine::queue::enqueue", "state::set enqueue"] as const) {
    it(`${how}: first attempt and retry carry traceparent and baggage`, async () => {
      const w = await wires.connect();
      const fn = `tr::job-${uuid()}`;
      const attempts: Frame[] = [];
      w.serve(fn, (_d, f) => {
        attempts.push(f);
        if (attempts.length === 1) throw new Error("retry");
        return null;
      });
      await w.ok("state::list_groups");
      const payload = { session_id: "s", n: 1 };
      // `turns` (wrangler.toml): durable fifo, retries after 200 ms.
      if (how === "action") await w.ok(fn, payload, { action: { type: "enqueue", queue: "turns" }, ...TRACE });
      else if (how === "engine::queue::enqueue")
        await w.ok("engine::queue::enqueue", { queue: "turns", function_id: fn, data: payload }, TRACE);
      else
        await w.ok(
          "state::set",
          { scope: `tr-q-${uuid()}`, key: "k", value: 1, enqueue: { function_id: fn, payload, queue: "turns" } },
          TRACE,
        );
      await eventually(() => attempts.length >= 2, 5_000);
      await sleep(50);
      expect(attempts).toHaveLength(2);
      for (const f of attempts) expect(f).toMatchObject({ ...IN_TRACE, data: payload });
    });
  }
});
