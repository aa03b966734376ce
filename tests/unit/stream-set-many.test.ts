// `stream::set_many` on the engine core served in this process, over the raw wire: a batch is
// stored in one transaction and seen by subscribers and `stream` triggers exactly as the same
// sequence of `stream::set` calls would be seen; a batch with one bad item stores nothing; a
// session's stream refuses another principal's batch before writing any of it. The subscriber is
// the core's own stream-socket side (what engine-do/src/stream-sockets.ts hands each browser
// socket's messages to), with the socket's sends collected here.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_STREAM_SET_MANY_ITEMS, MAX_VALUE_BYTES, OPEN_GRANT, type Grant, type StreamSocketPush } from "@iii-edge/protocol";
import { Wires, eventually, functionIds, useNodeEngine, uuid, type Frame } from "./node-wire.ts";

const node = useNodeEngine();
const wires = new Wires();
afterAll(() => wires.closeAll());

/** Pushes per browser socket id, as the shell would send them. */
const pushed = new Map<string, StreamSocketPush[]>();
beforeAll(() => {
  node.engine().installed.streams.setSockets({
    send(socketId, message) {
      pushed.set(socketId, [...(pushed.get(socketId) ?? []), message]);
      return true;
    },
  });
});

/** A browser socket with `grant` joined to `stream/group`, once its sync is in. */
async function subscriber(stream: string, group: string, grant: Grant = OPEN_GRANT): Promise<() => StreamSocketPush[]> {
  const streams = node.engine().installed.streams;
  const id = `sock-${uuid()}`;
  streams.opened(id, grant);
  await streams.message(id, JSON.stringify({ type: "join", data: { subscriptionId: "s1", streamName: stream, groupId: group } }));
  const got = () => pushed.get(id) ?? [];
  expect(got().map((p) => p.event.type)).toEqual(["sync"]);
  return () => got().slice(1);
}

/** What a push or a trigger fire says about one change: its kind, item and value. */
const change = (p: { id: string | null; event: { type: string; data?: unknown } }) => [p.event.type, p.id, p.event.data];

/** Collects the `stream` trigger fires of `stream/group` on a fresh connection. */
async function fires(stream: string, group: string): Promise<() => StreamSocketPush[]> {
  const w = await wires.connect();
  const seen: StreamSocketPush[] = [];
  const fn = `ssm::on-${uuid()}`;
  w.serve(fn, (p) => void seen.push(p as StreamSocketPush));
  w.registerTrigger(`t-${uuid()}`, "stream", fn, { stream_name: stream, group_id: group });
  await eventually(async () => {
    const r = (await w.ok("engine::registered-triggers::list", { include_internal: true })) as {
      registered_triggers: { function_id: string }[];
    };
    return r.registered_triggers.some((t) => t.function_id === fn);
  });
  return () => seen;
}

const itemsOf = async (w: { ok(id: string, data: unknown): Promise<unknown> }, stream: string, group: string) =>
  ((await w.ok("stream::list_items", { stream_name: stream, group_id: group })) as { items: { item_id: string; data: unknown }[] }).items;

const codeOf = (r: Frame) => (r.error as { code?: string } | undefined)?.code;

describe("stream::set_many", () => {
  it("stores every item in one call and pushes and fires per item, in the order the same sets would", async () => {
    const w = await wires.connect();
    const stream = `ssm-${uuid()}`;
    // The same sequence twice: once as separate stream::set calls, once as one batch. An item set
    // twice in it is created, then updated; one that existed before is updated.
    const sequence = [
      { item_id: "a", data: { n: 1 } },
      { item_id: "b", data: { n: 2 } },
      { item_id: "c", data: null },
      { item_id: "a", data: { n: 3 } },
    ];
    const seenBy = async (group: string, write: () => Promise<void>) => {
      await w.ok("stream::set", { stream_name: stream, group_id: group, item_id: "b", data: { n: 0 } });
      const pushes = await subscriber(stream, group);
      const fired = await fires(stream, group);
      await write();
      expect(await eventually(() => fired().length === sequence.length)).toBe(true);
      return { pushes: pushes().map(change), fires: fired().map(change), items: await itemsOf(w, stream, group) };
    };
    const bySets = await seenBy("by-sets", async () => {
      for (const it of sequence) await w.ok("stream::set", { stream_name: stream, group_id: "by-sets", ...it });
    });
    const byBatch = await seenBy("by-batch", async () => {
      expect(await w.ok("stream::set_many", { stream_name: stream, group_id: "by-batch", items: sequence })).toEqual({ count: 4 });
    });
    expect(byBatch).toEqual(bySets);
    expect(byBatch.pushes).toEqual([
      ["create", "a", { n: 1 }],
      ["update", "b", { n: 2 }],
      ["create", "c", null],
      ["update", "a", { n: 3 }],
    ]);
    expect(byBatch.items).toEqual([
      { item_id: "a", data: { n: 3 } },
      { item_id: "b", data: { n: 2 } },
      { item_id: "c", data: null },
    ]);
  });

  it("a batch with one bad item stores none of it, pushes nothing and answers a typed error", async () => {
    const w = await wires.connect();
    const stream = `ssm-bad-${uuid()}`;
    const at = { stream_name: stream, group_id: "g" };
    await w.ok("stream::set", { ...at, item_id: "a", data: "before" });
    const pushes = await subscriber(stream, "g");
    const good = [
      { item_id: "a", data: "after" },
      { item_id: "b", data: 1 },
    ];
    // A value past MAX_VALUE_BYTES cannot share a frame with anything (the frame bound is the same),
    // so it comes in as a call made inside the engine, which no frame carries.
    const tooBig = await node.engine().core.invoke({
      function_id: "stream::set_many",
      data: { ...at, items: [...good, { item_id: "c", data: "x".repeat(MAX_VALUE_BYTES) }] },
    });
    expect(tooBig.ok ? undefined : tooBig.error.code).toBe("value_too_large");
    expect(tooBig.ok ? undefined : tooBig.error.message).toContain("items[2] (c)");
    // An item id stream::set would refuse, and one item past the bound: refused as input.
    expect(codeOf(await w.call("stream::set_many", { ...at, items: [...good, { item_id: "", data: 1 }] }))).toBe("deserialization_error");
    expect(codeOf(await w.call("stream::set_many", { ...at, items: [...good, { data: 1 }] }))).toBe("deserialization_error");
    const many = Array.from({ length: MAX_STREAM_SET_MANY_ITEMS + 1 }, (_, i) => ({ item_id: `m${String(i).padStart(4, "0")}`, data: i }));
    expect(codeOf(await w.call("stream::set_many", { ...at, items: many }))).toBe("deserialization_error");
    expect(await itemsOf(w, stream, "g")).toEqual([{ item_id: "a", data: "before" }]);

    // At the bound it is stored, and a following change is the next push: none came before it.
    expect(await w.ok("stream::set_many", { ...at, items: many.slice(1) })).toEqual({ count: MAX_STREAM_SET_MANY_ITEMS });
    expect(pushes()).toHaveLength(MAX_STREAM_SET_MANY_ITEMS);
    expect(pushes()[0]).toMatchObject({ id: "m0001", event: { type: "create", data: 1 } });
    expect(await w.ok("stream::set_many", { ...at, items: [] })).toEqual({ count: 0 });
    expect((await itemsOf(w, stream, "g")).map((i) => i.item_id)).toEqual(["a", ...many.slice(1, 100).map((m) => m.item_id)]);
  });

  it("a session's stream refuses another principal's batch before writing any of it", async () => {
    const op = await wires.connect();
    const alice = `ssm-alice-${uuid()}`;
    const bobs = `ssm-bob-${uuid()}`;
    await op.ok("state::set", { scope: "session_owner", key: alice, value: { sub: "alice" } });
    await op.ok("state::set", { scope: "session_owner", key: bobs, value: { sub: "bob" } });
    const bob = await wires.connect("/", { sub: "bob", ns: ["*"], call: ["*"] });
    const ev = { stream_name: "agent::events", group_id: alice, items: [{ item_id: `${alice}-1`, data: { type: "agent_start" } }] };
    const refused = await bob.call("stream::set_many", ev);
    expect(codeOf(refused)).toBe("forbidden");
    expect(await itemsOf(op, "agent::events", alice)).toEqual([]);
    // agent::sessions is owned item by item: his own session's item goes nowhere with Alice's.
    const sessions = `ssm-sessions-${uuid()}`;
    const mixed = await bob.call("stream::set_many", {
      stream_name: "agent::sessions",
      group_id: sessions,
      items: [
        { item_id: bobs, data: { title: "mine" } },
        { item_id: alice, data: { title: "hers" } },
      ],
    });
    expect(codeOf(mixed)).toBe("forbidden");
    expect(await itemsOf(op, "agent::sessions", sessions)).toEqual([]);
    // The owner's own batch goes through.
    const owner = await wires.connect("/", { sub: "alice", ns: ["*"], call: ["*"] });
    expect(await owner.ok("stream::set_many", ev)).toEqual({ count: 1 });
    expect(await itemsOf(op, "agent::events", alice)).toEqual([{ item_id: `${alice}-1`, data: { type: "agent_start" } }]);
  });

  it("a stream whose set a worker took over gets one call of it per item, in order, each pushed", async () => {
    const w = await wires.connect();
    const owner = await wires.connect();
    const stream = `ssm-custom-${uuid()}`;
    const calls: unknown[] = [];
    owner.serve(`stream::set(${stream})`, (input) => {
      calls.push(input);
      return { new_value: (input as { data: unknown }).data };
    });
    expect(await eventually(async () => (await functionIds(w)).includes(`stream::set(${stream})`))).toBe(true);
    const pushes = await subscriber(stream, "g");
    const items = [
      { item_id: "x", data: 1 },
      { item_id: "y", data: 2 },
    ];
    expect(await w.ok("stream::set_many", { stream_name: stream, group_id: "g", items })).toEqual({ count: 2 });
    expect(calls).toEqual(items.map((it) => ({ stream_name: stream, group_id: "g", ...it })));
    expect(pushes().map(change)).toEqual([
      ["create", "x", 1],
      ["create", "y", 2],
    ]);
  });
});
