// Custom stream operations (protocol/README.md §7.3) against `npm start`, with the unmodified
// iii-sdk 0.22.1 on both sides: a worker takes over a stream with `createStream`, another worker
// changes it with the ordinary `stream::*` functions, and a browser-style subscriber on the stream
// socket (`/_iii/streams`, served by the Worker) sees the changes pushed as if the engine held the
// stream. The operations themselves, their errors and the hand-back when the owner leaves run on
// the engine core in tests/unit/custom-streams.test.ts.
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { eventually } from "@iii-edge/test-support/wait";
import { functionIds, ownStream, type OwnedStream } from "./custom-stream-owner.ts";

let engine: EngineServer;
/** The worker that owns the custom stream (its items live in a Map, not in the engine). */
let owner: IIIClient;
/** Another worker, a plain user of stream::*. */
let user: IIIClient;
const stream = `ledger-${Date.now()}`;
let items: OwnedStream["items"];
let fired: OwnedStream["fired"];

const sdk = (name: string) => registerWorker(engine.wsUrl, { workerName: name, otel: { enabled: false }, enableMetricsReporting: false });

beforeAll(async () => {
  engine = await startEngine();
  owner = sdk("custom-stream-owner");
  user = sdk("custom-stream-user");
  ({ items, fired } = ownStream(owner, stream));
  await eventually(
    async () => (await functionIds(user)).includes(`stream::update(${stream})`),
    15_000,
    "custom stream operations registered",
  );
});

afterAll(async () => {
  await owner?.shutdown();
  await user?.shutdown();
  await engine?.stop();
});

describe("custom stream operations (stream::<op>(<stream_name>))", () => {
  it("changes made through the custom operations are pushed to subscribers and fire stream triggers", async () => {
    items.set("live/a", { title: "already there" });
    const ws = new WebSocket(`${engine.wsUrl}/_iii/streams`);
    const pushes: { event: { type: string; data?: unknown }; id: string | null }[] = [];
    ws.onmessage = (m) => pushes.push(JSON.parse(String(m.data)));
    await new Promise((r, j) => ((ws.onopen = r), (ws.onerror = j)));
    ws.send(JSON.stringify({ type: "join", data: { subscriptionId: "s1", streamName: stream, groupId: "live" } }));
    await eventually(() => pushes.length === 1, 5_000, "sync");
    // The subscription's first state comes from the owning worker's list.
    expect(pushes[0]?.event).toEqual({ type: "sync", data: [{ title: "already there" }] });
    fired.length = 0;
    await user.trigger({
      function_id: "stream::set",
      payload: { stream_name: stream, group_id: "live", item_id: "b", data: { title: "new" } },
    });
    await user.trigger({
      function_id: "stream::set",
      payload: { stream_name: stream, group_id: "live", item_id: "b", data: { title: "newer" } },
    });
    await user.trigger({ function_id: "stream::delete", payload: { stream_name: stream, group_id: "live", item_id: "b" } });
    // Deleting what is not there changes nothing and pushes nothing.
    await user.trigger({ function_id: "stream::delete", payload: { stream_name: stream, group_id: "live", item_id: "never" } });
    await eventually(() => pushes.length === 4, 5_000, "three changes pushed");
    expect(pushes.slice(1).map((p) => [p.event.type, p.id, p.event.data])).toEqual([
      ["create", "b", { title: "new" }],
      ["update", "b", { title: "newer" }],
      ["delete", "b", { title: "newer" }],
    ]);
    await eventually(() => fired.length === 3, 5_000, "stream trigger fired three times");
    expect(fired.map((f) => [f.event.type, f.id])).toEqual([
      ["create", "b"],
      ["update", "b"],
      ["delete", "b"],
    ]);
    ws.close();
  });
});
