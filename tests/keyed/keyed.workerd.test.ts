// Keyed workers hosted in the Worker (sdk-edge WorkerHost + KeyedObjects, docs/keyed-workers.md):
// the conformance suite against the demo keyed counter, one Durable Object per user, and the keyed
// function as an ordinary catalog entry: listed with its key, called over HTTP, delivered from a
// queue, fired by a trigger, and traced.
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import type { DemoCounters } from "@iii-edge/demo-app/edge";
import { KEYED_METADATA_KEY, keyedInstanceName } from "@iii-edge/protocol";
import { beforeAll, describe, expect, it } from "vitest";
import { eventually } from "@iii-edge/test-support/wait";
import { RawWorker } from "../triggers/raw-worker.ts";
import { keyedConformance } from "./keyed.case.ts";

const ns = `keyed-${crypto.randomUUID().slice(0, 8)}`;
let w: RawWorker;
beforeAll(async () => {
  w = await RawWorker.connect(ns);
});
const instance = (key: string) => env.DEMO_COUNTERS.getByName(keyedInstanceName(ns, "counter::add", key));
const count = async (user_id: string) => ((await w.call("counter::get", { user_id })).result as { count: number }).count;
const uid = (what: string) => `${what}-${crypto.randomUUID().slice(0, 8)}`;

keyedConformance("Worker-hosted (a Durable Object per key)", () => ({
  prefix: "counter",
  call: (functionId, data) => w.call(functionId, data),
  evict: (key) => evictDurableObject(instance(key)),
  // The object's alarm handler, twice at once: the second must find the alarm claimed.
  wakeAlarms: async (key) => {
    const stub = instance(key);
    await Promise.all([0, 1].map(() => runInDurableObject(stub, (o: DemoCounters) => o.alarm())));
  },
}));

describe("a keyed function in the catalog", () => {
  it("is listed like any function, with the key field it is keyed by", async () => {
    const info = await w.call("engine::functions::info", { function_id: "counter::add" });
    expect(info.error).toBeUndefined();
    expect(info.result).toMatchObject({ function_id: "counter::add", metadata: { [KEYED_METADATA_KEY]: "user_id" } });
  });

  it("is called over HTTP (/_iii/invoke), and a call without the key is a 400 that runs nothing", async () => {
    const user_id = uid("http");
    const post = (payload: unknown) =>
      exports.default.fetch(`http://localhost/ns/${ns}/_iii/invoke`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ function_id: "counter::add", payload }),
      });
    const good = await post({ user_id, by: 2 });
    expect(good.status).toBe(200);
    expect(await good.json()).toMatchObject({ result: { user_id, count: 2 } });
    const bad = await post({ by: 2 });
    expect(bad.status).toBeGreaterThanOrEqual(400);
    expect(await bad.json()).toMatchObject({ error: { code: "invalid_arguments" } });
    expect(await count(user_id)).toBe(2);
  });

  it("is delivered from a durable queue to the instance of the message's key", async () => {
    const user_id = uid("queued");
    const r = await w.call("counter::add", { user_id, by: 7 }, { type: "enqueue", queue: "jobs" });
    expect(r.error).toBeUndefined();
    await eventually(async () => (await count(user_id)) === 7, 10_000, "the queued add");
  });

  it("is fired by a trigger: a subscription whose events carry the key", async () => {
    const user_id = uid("subscribed");
    const topic = uid("topic");
    const id = w.trigger("subscribe", "counter::add", { topic });
    await w.settle();
    expect(w.registrationErrors(id)).toEqual([]);
    // An event without the key reaches no instance (the engine refuses the fire and logs it).
    expect((await w.call("publish", { topic, data: { by: 100 } })).error).toBeUndefined();
    expect((await w.call("publish", { topic, data: { user_id, by: 3 } })).error).toBeUndefined();
    await eventually(async () => (await count(user_id)) === 3, 10_000, "the subscribed add");
  });

  it("is traced like any call: the caller's trace holds the keyed call's span", async () => {
    const traceId = crypto.randomUUID().replaceAll("-", "");
    const user_id = uid("traced");
    w.send({
      type: "invokefunction",
      invocation_id: crypto.randomUUID(),
      function_id: "counter::add",
      data: { user_id },
      traceparent: `00-${traceId}-b7ad6b7169203331-01`,
    });
    await eventually(async () => (await count(user_id)) === 1, 10_000, "the traced add");
    const spans = await eventually(async () => {
      const r = await w.call("engine::traces::list", { trace_id: traceId });
      const list = (r.result as { spans?: unknown[] } | undefined)?.spans ?? [];
      return list.some((s) => JSON.stringify(s).includes("counter::add")) ? list : undefined;
    }, 10_000);
    expect(spans.length).toBeGreaterThan(0);
  });
});
