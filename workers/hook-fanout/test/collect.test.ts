// hook-fanout::publish_collect against the engine core served in-process
// (tests/support/node-engine.ts), the worker run alone in Node, subscribers registered with the
// unmodified iii-sdk as `durable:subscriber` triggers that answer with `stream::set` on
// agent::hook_reply. What a caller notices: how soon the collection ends (the expected replies,
// quiescence, the deadline), which replies it gets (de-duplicated), that the reply group is cleaned
// up, that bad input is refused — and that replies the trigger did not bring are still read once.
import { HOOK_REPLY_STREAM, PUBLISH_COLLECT, type HookEnvelope, type PublishCollectResponse } from "@iii-edge/protocol/harness";
import type { WorkerModule } from "@iii-edge/sdk-edge/worker";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import { eventually, until } from "@iii-edge/test-support/wait";
import { Collectors } from "../src/collector.ts";
import { publishCollect, worker } from "../src/index.ts";

let engine: NodeEngine;
let fanout: RunningWorkers;
let subs: IIIClient;
/** A collection that should end early must end this far before its deadline (the deadlines below
 * are 5 s: a loaded 2-core box still answers a local reply in well under a second). */
const EARLY_MS = 1_500;

type Sub = (env: HookEnvelope) => Promise<void> | void;
const handlers = new Map<string, Sub>();
const reply = (env: HookEnvelope, itemId: string, data: unknown) =>
  subs.trigger({ function_id: "stream::set", payload: { stream_name: env.reply_stream, group_id: env.event_id, item_id: itemId, data } });

/** A durable subscriber `fn` on `topic`, registered once; `handlers` says what it does. */
async function subscribe(fn: string, topic: string, handler: Sub): Promise<void> {
  handlers.set(fn, handler);
  subs.registerFunction(fn, async (env: HookEnvelope) => {
    await handlers.get(fn)!(env);
    return null;
  });
  subs.registerTrigger({ type: "durable:subscriber", function_id: fn, config: { topic } });
  await until(async () => {
    const r = (await subs.trigger({
      function_id: "engine::registered-triggers::list",
      payload: { trigger_type: "durable:subscriber", function_id: fn },
    })) as { registered_triggers: unknown[] };
    return r.registered_triggers.length > 0;
  }, `${fn} subscribed`);
}

const collect = (payload: Record<string, unknown>) =>
  fanout.client.trigger<unknown, PublishCollectResponse>({ function_id: PUBLISH_COLLECT, payload, timeoutMs: 30_000 });
const group = async (eventId: string) =>
  (
    (await subs.trigger({ function_id: "stream::list_items", payload: { stream_name: HOOK_REPLY_STREAM, group_id: eventId } })) as {
      items: { item_id: string; data: unknown }[];
    }
  ).items;

beforeAll(async () => {
  engine = await startNodeEngine();
  fanout = runWorkers(engine.wsUrl, [worker as WorkerModule<never>], { workerName: "hook-fanout-under-test" });
  subs = registerWorker(engine.wsUrl, { workerName: "hook-subscribers", otel: { enabled: false } });
  await until(async () => {
    const r = await fanout.client.trigger<unknown, { functions: { function_id: string }[] }>({
      function_id: "engine::functions::list",
      payload: { include_internal: true },
    });
    return r.functions.some((f) => f.function_id === PUBLISH_COLLECT) && r.functions.some((f) => f.function_id === "hook-fanout::on_reply");
  }, "hook-fanout registered");
});

afterAll(async () => {
  await Promise.allSettled([subs?.shutdown(), fanout?.shutdown()]);
  await engine?.stop();
});

describe("publish_collect", () => {
  it("nobody subscribed: answers at once, the rule's fallback merged", async () => {
    const t0 = Date.now();
    const r = await collect({ topic: "t::nobody", payload: { content: [] }, merge_rule: "field_merge", timeout_ms: 5_000 });
    expect(r).toMatchObject({ replies: [], merged: { content: [] }, publish: { ok: true, subscribers: 0 }, resolved_by: "no_subscribers" });
    expect(Date.now() - t0).toBeLessThan(EARLY_MS);
  });

  it("every subscriber answered → resolves at once (early exit), the envelope as §6.3 says, the replies merged", async () => {
    const seen: HookEnvelope[] = [];
    await subscribe("t1::gate_a", "t::early", (env) => {
      seen.push(env);
      return reply(env, "t1::gate_a", { block: false });
    });
    await subscribe("t1::gate_b", "t::early", (env) => reply(env, "t1::gate_b", { block: true, reason: "not on prod" }));
    const t0 = Date.now();
    const r = await collect({
      topic: "t::early",
      payload: { function_call: { id: "c1" } },
      merge_rule: "first_block_wins",
      timeout_ms: 5_000,
    });
    expect(Date.now() - t0).toBeLessThan(EARLY_MS);
    expect(r.resolved_by).toBe("expected");
    expect(r.publish).toEqual({ ok: true, subscribers: 2 });
    expect(r.replies).toHaveLength(2);
    expect(r.replies).toEqual(expect.arrayContaining([{ block: false }, { block: true, reason: "not on prod" }]));
    expect(r.merged).toEqual({ block: true, reason: "not on prod" });
    expect(seen[0]).toEqual({ event_id: r.event_id, reply_stream: HOOK_REPLY_STREAM, payload: { function_call: { id: "c1" } } });
    // The replies it read are gone from the stream.
    expect(await group(r.event_id)).toEqual([]);
  });

  it("quiescence: fewer replies than expected → resolves quiescence_ms after the last one, long before the deadline", async () => {
    await subscribe("t2::one", "t::quiet", (env) => reply(env, "t2::one", { details: { seen: true } }));
    const t0 = Date.now();
    const r = await collect({
      topic: "t::quiet",
      payload: { details: { a: 1 } },
      merge_rule: "field_merge",
      timeout_ms: 5_000,
      expected_replies: 3,
      quiescence_ms: 150,
    });
    const took = Date.now() - t0;
    expect(r.resolved_by).toBe("quiescence");
    expect(r.merged).toEqual({ details: { a: 1, seen: true } });
    expect(took).toBeGreaterThanOrEqual(150);
    expect(took).toBeLessThan(EARLY_MS);
  });

  it("deadline: a silent subscriber → the deadline with no reply, the fallback; with one of two answering → the deadline with it", async () => {
    await subscribe("t3::silent", "t::deadline", () => undefined);
    let t0 = Date.now();
    let r = await collect({ topic: "t::deadline", payload: [{ role: "user" }], merge_rule: "pipeline_last_wins", timeout_ms: 300 });
    expect(r).toMatchObject({ replies: [], merged: [{ role: "user" }], resolved_by: "deadline", publish: { ok: true, subscribers: 1 } });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);

    await subscribe("t3::talker", "t::deadline", (env) => reply(env, "t3::talker", { messages: [{ role: "assistant" }] }));
    t0 = Date.now();
    r = await collect({
      topic: "t::deadline",
      payload: [{ role: "user" }],
      merge_rule: "pipeline_last_wins",
      timeout_ms: 400,
      quiescence_ms: 400,
    });
    expect(r).toMatchObject({
      replies: [{ messages: [{ role: "assistant" }] }],
      merged: [{ role: "assistant" }],
      resolved_by: "deadline",
      publish: { subscribers: 2 },
    });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(400);
  });

  it("duplicate replies: a subscriber that writes its item again (or is delivered again) counts once, with its last value", async () => {
    let deliveries = 0;
    await subscribe("t4::dup", "t::dup", async (env) => {
      deliveries++;
      await reply(env, "t4::dup", { details: { n: 1 } });
      await reply(env, "t4::dup", { details: { n: 2 } });
      // The first delivery fails after replying: the durable queue delivers it again (backoff 1 s).
      if (deliveries === 1) throw new Error("crashed after replying");
    });
    const r = await collect({
      topic: "t::dup",
      payload: {},
      merge_rule: "field_merge",
      timeout_ms: 5_000,
      expected_replies: 2,
      quiescence_ms: 2_500,
    });
    expect(deliveries).toBe(2);
    expect(r.replies).toEqual([{ details: { n: 2 } }]);
    expect(r.merged).toEqual({ details: { n: 2 } });
  });

  it("a reply after the collection ended is deleted when it arrives (the stream does not grow)", async () => {
    const late: HookEnvelope[] = [];
    await subscribe("t5::late", "t::late", (env) => {
      late.push(env);
    });
    const r = await collect({ topic: "t::late", payload: {}, merge_rule: "first_block_wins", timeout_ms: 100 });
    expect(r.resolved_by).toBe("deadline");
    await eventually(() => late.length === 1, 10_000, "the subscriber delivered");
    await reply(late[0]!, "t5::late", { block: true });
    await eventually(async () => (await group(r.event_id)).length === 0, 10_000, "the late reply deleted");
  });

  it("replies the trigger did not bring here (another isolate's, or a lost fire) are read once at the end", async () => {
    await subscribe("t6::elsewhere", "t::elsewhere", (env) => reply(env, "t6::elsewhere", { block: true, reason: "read from the stream" }));
    // A collector set that no trigger feeds: only its final stream::list_items can find the reply.
    const orphan = new Collectors();
    const r = await publishCollect(fanout.client.trigger.bind(fanout.client), orphan, {
      topic: "t::elsewhere",
      payload: {},
      merge_rule: "first_block_wins",
      timeout_ms: 600,
      quiescence_ms: 200,
    });
    expect(r.resolved_by).toBe("deadline");
    expect(r.replies).toEqual([{ block: true, reason: "read from the stream" }]);
    expect(r.merged).toEqual({ block: true, reason: "read from the stream" });
    expect(await group(r.event_id)).toEqual([]);
  });

  it("bad input is invalid_input, and nothing is published", async () => {
    const published: string[] = [];
    await subscribe("t7::count", "t::bad", (env) => {
      published.push(env.event_id);
    });
    for (const bad of [
      { topic: "t::bad", payload: {}, merge_rule: "last_wins" },
      { topic: "", payload: {}, merge_rule: "field_merge" },
      { topic: "t::bad", payload: {}, merge_rule: "field_merge", timeout_ms: 10 },
      { topic: "t::bad", payload: {}, merge_rule: "field_merge", timeout_ms: 600_000 },
      { topic: "t::bad", payload: {}, merge_rule: "field_merge", expected_replies: 0 },
      { payload: {}, merge_rule: "field_merge" },
    ]) {
      await expect(collect(bad)).rejects.toMatchObject({ code: "invalid_input" });
    }
    // A valid one afterwards is the only delivery (the topic's durable queue keeps order).
    const ok = await collect({ topic: "t::bad", payload: {}, merge_rule: "field_merge", timeout_ms: 100 });
    await eventually(() => published.includes(ok.event_id), 10_000, "the valid publish delivered");
    expect(published).toEqual([ok.event_id]);
  });
});
