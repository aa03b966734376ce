// Custom stream operations (protocol/README.md §7.3) against `npm start`, with the unmodified
// iii-sdk 0.22.1 on both sides: a worker takes over a stream with `createStream`, another worker
// changes it with the ordinary `stream::*` functions, and a browser-style subscriber on the stream
// socket (`/_iii/streams`, served by the Worker) sees the changes pushed as if the engine held the
// stream. The operations themselves, their errors and the hand-back when the owner leaves run on
// the engine core in tests/unit/custom-streams.test.ts.
import { describe, expect, it } from "vitest";
import { startEngine } from "@iii-edge/test-support/engine-server";
import { eventually } from "@iii-edge/test-support/wait";
import { ownedStreamSuite } from "./custom-stream-owner.ts";

const suite = ownedStreamSuite(() => startEngine());
const { stream } = suite;

describe("custom stream operations (stream::<op>(<stream_name>))", () => {
  it("changes made through the custom operations are pushed to subscribers and fire stream triggers", async () => {
    suite.items.set("live/a", { title: "already there" });
    const ws = new WebSocket(`${suite.engine.wsUrl}/_iii/streams`);
    const pushes: { event: { type: string; data?: unknown }; id: string | null }[] = [];
    ws.onmessage = (m) => pushes.push(JSON.parse(String(m.data)));
    await new Promise((r, j) => ((ws.onopen = r), (ws.onerror = j)));
    ws.send(JSON.stringify({ type: "join", data: { subscriptionId: "s1", streamName: stream, groupId: "live" } }));
    await eventually(() => pushes.length === 1, 5_000, "sync");
    // The subscription's first state comes from the owning worker's list.
    expect(pushes[0]?.event).toEqual({ type: "sync", data: [{ title: "already there" }] });
    suite.fired.length = 0;
    await suite.user.trigger({
      function_id: "stream::set",
      payload: { stream_name: stream, group_id: "live", item_id: "b", data: { title: "new" } },
    });
    await suite.user.trigger({
      function_id: "stream::set",
      payload: { stream_name: stream, group_id: "live", item_id: "b", data: { title: "newer" } },
    });
    await suite.user.trigger({ function_id: "stream::delete", payload: { stream_name: stream, group_id: "live", item_id: "b" } });
    // Deleting what is not there changes nothing and pushes nothing.
    await suite.user.trigger({ function_id: "stream::delete", payload: { stream_name: stream, group_id: "live", item_id: "never" } });
    await eventually(() => pushes.length === 4, 5_000, "three changes pushed");
    expect(pushes.slice(1).map((p) => [p.event.type, p.id, p.event.data])).toEqual([
      ["create", "b", { title: "new" }],
      ["update", "b", { title: "newer" }],
      ["delete", "b", { title: "newer" }],
    ]);
    await eventually(() => suite.fired.length === 3, 5_000, "stream trigger fired three times");
    expect(suite.fired.map((f) => [f.event.type, f.id])).toEqual([
      ["create", "b"],
      ["update", "b"],
      ["delete", "b"],
    ]);
    ws.close();
  });
});
