// Streams: stream::* in SQLite, `stream` triggers, and browser subscriptions over /_iii/streams
// (join → sync, then create/update/delete/event pushes; stream:join can reject; stream:leave
// fires), surviving hibernation of the engine object.
import { evictDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { StreamSocketMessage, StreamSocketPush } from "@iii-edge/protocol";
import { RawWorker, eventually } from "./raw-worker.ts";

async function subscriber(ns: string) {
  const res = await exports.default.fetch(`http://localhost/ns/${ns}/_iii/streams`, { headers: { Upgrade: "websocket" } });
  expect(res.status).toBe(101);
  const ws = res.webSocket!;
  ws.accept();
  // The socket's messages as protocol's streams.ts has them (read as such; the test checks them).
  const got: StreamSocketPush[] = [];
  ws.addEventListener("message", (e) => got.push(JSON.parse(String(e.data)) as StreamSocketPush));
  return { ws, got, send: (m: StreamSocketMessage) => ws.send(JSON.stringify(m)) };
}

/** Close a socket and wait for the engine's answering close frame: the engine has handled it. */
function closed(ws: WebSocket): Promise<void> {
  return new Promise((resolve) => {
    ws.addEventListener("close", () => resolve());
    ws.close(1000, "done");
  });
}

describe("streams", () => {
  it("implements stream::* with the §7.3 results", async () => {
    const w = await RawWorker.connect("st-fns");
    const key = { stream_name: "chat", group_id: "room1", item_id: "m1" };
    expect((await w.call("stream::set", { ...key, data: { text: "hi" } })).result).toEqual({ old_value: null, new_value: { text: "hi" } });
    expect((await w.call("stream::get", key)).result).toEqual({ text: "hi" });
    expect(
      (
        await w.call("stream::update", {
          ...key,
          ops: [
            { type: "set", path: "text", value: "yo" },
            { type: "increment", path: "n", by: 2 },
          ],
        })
      ).result,
    ).toEqual({ old_value: { text: "hi" }, new_value: { text: "yo", n: 2 } });
    await w.call("stream::set", { stream_name: "chat", group_id: "room2", item_id: "m9", data: 1 });
    expect((await w.call("stream::list", { stream_name: "chat", group_id: "room1" })).result).toEqual([{ text: "yo", n: 2 }]);
    expect((await w.call("stream::list_groups", { stream_name: "chat" })).result).toEqual(["room1", "room2"]);
    expect((await w.call("stream::list_all", {})).result).toEqual({ stream: [{ id: "chat", groups: ["room1", "room2"] }], count: 1 });
    expect((await w.call("stream::delete", key)).result).toEqual({ old_value: { text: "yo", n: 2 } });
    expect((await w.call("stream::get", key)).result).toBeUndefined();
    expect((await w.call("stream::set", { stream_name: "chat" })).error?.code).toBe("deserialization_error");
    await w.close();
  });

  it("stream::list_items pages a group's items with their ids after a cursor (a follower's catch-up)", async () => {
    const w = await RawWorker.connect("st-items");
    for (let i = 1; i <= 5; i++)
      await w.call("stream::set", { stream_name: "ev", group_id: "s1", item_id: `s1-${String(i).padStart(8, "0")}`, data: { n: i } });
    await w.call("stream::set", { stream_name: "ev", group_id: "s2", item_id: "s2-00000001", data: { n: 99 } });
    const page1 = (await w.call("stream::list_items", { stream_name: "ev", group_id: "s1", limit: 2 })).result as {
      items: { item_id: string; data: { n: number } }[];
      next: string | null;
    };
    expect(page1).toEqual({
      items: [
        { item_id: "s1-00000001", data: { n: 1 } },
        { item_id: "s1-00000002", data: { n: 2 } },
      ],
      next: "s1-00000002",
    });
    const rest = (await w.call("stream::list_items", { stream_name: "ev", group_id: "s1", after: page1.next })).result as {
      items: { item_id: string }[];
      next: string | null;
    };
    expect(rest.items.map((i) => i.item_id)).toEqual(["s1-00000003", "s1-00000004", "s1-00000005"]);
    expect(rest.next).toBeNull();
    expect((await w.call("stream::list_items", { stream_name: "ev", group_id: "s1", after: "s1-00000005" })).result).toEqual({
      items: [],
      next: null,
    });
    expect((await w.call("stream::list_items", { stream_name: "ev", group_id: "s1", limit: 0 })).error?.code).toBe("deserialization_error");
    await w.close();
  });

  it("stream::set_many: one call, then a push and a trigger fire per item in order, as the same sets", async () => {
    const ns = "st-many";
    const w = await RawWorker.connect(ns);
    const fired: { id: string | null; event: { type: string; data?: unknown } }[] = [];
    w.fn("st::many", (p) => void fired.push(p as never));
    w.trigger("stream", "st::many", { stream_name: "ev", group_id: "g" });
    await w.settle();
    await w.call("stream::set", { stream_name: "ev", group_id: "g", item_id: "b", data: 0 });
    const s = await subscriber(ns);
    s.send({ type: "join", data: { subscriptionId: "sub-m", streamName: "ev", groupId: "g" } });
    await eventually(() => s.got.length === 1, 5000, "sync");
    const items = [
      { item_id: "a", data: 1 },
      { item_id: "b", data: 2 },
      { item_id: "a", data: 3 },
    ];
    expect((await w.call("stream::set_many", { stream_name: "ev", group_id: "g", items })).result).toEqual({ count: 3 });
    // A bad item refuses the batch: nothing stored, nothing pushed.
    const bad = await w.call("stream::set_many", { stream_name: "ev", group_id: "g", items: [{ item_id: "c", data: 4 }, { item_id: "" }] });
    expect(bad.error?.code).toBe("deserialization_error");
    await w.call("stream::set", { stream_name: "ev", group_id: "g", item_id: "z", data: 9 });
    await eventually(() => s.got.length === 5 && fired.length === 5, 5000, "four pushes and five fires");
    const expected = [
      ["create", "a", 1],
      ["update", "b", 2],
      ["update", "a", 3],
      ["create", "z", 9],
    ];
    expect(s.got.slice(1).map((m) => [m.event.type, m.id, (m.event as { data?: unknown }).data])).toEqual(expected);
    expect(fired.slice(1).map((e) => [e.event.type, e.id, e.event.data])).toEqual(expected);
    expect((await w.call("stream::list", { stream_name: "ev", group_id: "g" })).result).toEqual([3, 2, 9]);
    await Promise.all([closed(s.ws), w.close()]);
  });

  it("fires stream triggers with the §8.6 payload for create/update/delete/event", async () => {
    const w = await RawWorker.connect("st-trig");
    const events: { type: string; streamName: string; groupId: string; id: string | null; event: { type: string } }[] = [];
    w.fn("st::on", (p) => void events.push(p as never));
    w.trigger("stream", "st::on", { stream_name: "todo", group_id: "g" });
    const bad = w.trigger("stream", "st::on", {});
    await w.settle();
    expect(w.registrationErrors(bad)[0]?.code).toBe("trigger_registration_failed");
    const k = { stream_name: "todo", group_id: "g", item_id: "1" };
    await w.call("stream::set", { ...k, data: { done: false } });
    await w.call("stream::set", { ...k, data: { done: true } });
    await w.call("stream::set", { stream_name: "todo", group_id: "other", item_id: "1", data: 0 });
    await w.call("stream::send", { stream_name: "todo", group_id: "g", type: "ping", data: { x: 1 } });
    await w.call("stream::delete", k);
    await eventually(() => events.length === 4, 5000, "four events");
    expect(events.map((e) => e.event.type)).toEqual(["create", "update", "event", "delete"]);
    expect(events[0]).toMatchObject({
      type: "stream",
      streamName: "todo",
      groupId: "g",
      id: "1",
      event: { type: "create", data: { done: false } },
    });
    expect(events[2]).toMatchObject({ id: null, event: { type: "event", event: { type: "ping", data: { x: 1 } } } });
    await w.close();
  });

  it("pushes live changes to a browser subscriber: sync on join, then changes; join can reject; leave fires", async () => {
    const ns = "st-live";
    const w = await RawWorker.connect(ns);
    const joins: unknown[] = [];
    const leaves: unknown[] = [];
    w.fn("st::join", (p) => {
      joins.push(p);
      return (p as { group_id: string }).group_id === "secret" ? { unauthorized: true } : null;
    });
    w.fn("st::leave", (p) => void leaves.push(p));
    w.trigger("stream:join", "st::join", {});
    w.trigger("stream:leave", "st::leave", {});
    await w.call("stream::set", { stream_name: "chat", group_id: "room", item_id: "a", data: { text: "first" } });
    const s = await subscriber(ns);
    s.send({ type: "join", data: { subscriptionId: "sub-1", streamName: "chat", groupId: "room" } });
    s.send({ type: "join", data: { subscriptionId: "sub-2", streamName: "chat", groupId: "secret" } });
    await eventually(() => s.got.length === 2, 5000, "sync + unauthorized");
    expect(s.got.find((m) => m.groupId === "room")).toMatchObject({
      type: "stream",
      streamName: "chat",
      groupId: "room",
      id: null,
      event: { type: "sync", data: [{ text: "first" }] },
    });
    expect(s.got.find((m) => m.groupId === "secret")?.event.type).toBe("unauthorized");
    expect(joins).toContainEqual({ subscription_id: "sub-1", stream_name: "chat", group_id: "room" });

    // The engine object hibernates; the subscription (in SQLite + the socket attachment) survives.
    await evictDurableObject(env.ENGINE.getByName(ns), { webSockets: "hibernate" });
    await w.call("stream::set", { stream_name: "chat", group_id: "room", item_id: "b", data: { text: "second" } });
    await w.call("stream::update", {
      stream_name: "chat",
      group_id: "room",
      item_id: "a",
      ops: [{ type: "set", path: "text", value: "edited" }],
    });
    await w.call("stream::send", { stream_name: "chat", group_id: "room", type: "typing", data: { who: "ann" } });
    await w.call("stream::delete", { stream_name: "chat", group_id: "room", item_id: "b" });
    await w.call("stream::set", { stream_name: "chat", group_id: "secret", item_id: "x", data: 1 });
    await eventually(() => s.got.length === 6, 5000, "four pushes");
    expect(s.got.slice(2).map((m) => [m.event.type, m.id])).toEqual([
      ["create", "b"],
      ["update", "a"],
      ["event", null],
      ["delete", "b"],
    ]);

    s.send({ type: "leave", data: { subscriptionId: "sub-1", streamName: "chat", groupId: "room" } });
    await eventually(() => leaves.length === 1, 5000, "leave trigger");
    expect(leaves[0]).toEqual({ subscription_id: "sub-1", stream_name: "chat", group_id: "room" });
    await w.call("stream::set", { stream_name: "chat", group_id: "room", item_id: "c", data: 3 });
    // A change after it on a group still joined: pushes on one socket arrive in order, so once this
    // one is here, a push for the group left would have come before it.
    s.send({ type: "join", data: { subscriptionId: "sub-3", streamName: "chat", groupId: "lobby" } });
    await eventually(() => s.got.length === 7, 5000, "sync of the lobby");
    await w.call("stream::set", { stream_name: "chat", group_id: "lobby", item_id: "z", data: 4 });
    await eventually(() => s.got.length === 8, 5000, "the lobby's change");
    expect(s.got.slice(6).map((m) => [m.groupId, m.event.type])).toEqual([
      ["lobby", "sync"],
      ["lobby", "create"],
    ]);
    await Promise.all([closed(s.ws), w.close()]);
  });
});
