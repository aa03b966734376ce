// Custom stream operations (protocol/README.md §7.3) against `npm start`, with the unmodified
// iii-sdk 0.22.1 on both sides: a worker takes over a stream with `createStream` (it registers
// `stream::<op>(<stream_name>)`), another worker and a browser-style subscriber use the ordinary
// `stream::*` functions and the stream socket, and never see the difference.
import { registerWorker, type IIIClient } from "iii-sdk";
import { createStream } from "iii-sdk/helpers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { eventually } from "@iii-edge/test-support/wait";

interface Card {
  title: string;
  n?: number;
}

let engine: EngineServer;
/** The worker that owns the custom stream (its items live in this Map, not in the engine). */
let owner: IIIClient;
/** Another worker, a plain user of stream::*. */
let user: IIIClient;
const stream = `ledger-${Date.now()}`;
const items = new Map<string, Card>();
const calls: { op: string; input: Record<string, unknown> }[] = [];
const key = (i: { group_id: string; item_id: string }) => `${i.group_id}/${i.item_id}`;
const fired: { event: { type: string; data?: unknown }; id: string | null }[] = [];

const sdk = (name: string) => registerWorker(engine.wsUrl, { workerName: name, otel: { enabled: false }, enableMetricsReporting: false });

async function functionIds(): Promise<string[]> {
  const out = (await user.trigger({ function_id: "engine::functions::list", payload: { include_internal: true } })) as {
    functions: { function_id: string }[];
  };
  return out.functions.map((f) => f.function_id);
}

beforeAll(async () => {
  engine = await startEngine();
  owner = sdk("custom-stream-owner");
  user = sdk("custom-stream-user");
  createStream<Card>(owner, stream, {
    get: async (input) => {
      calls.push({ op: "get", input: { ...input } });
      return items.get(key(input)) ?? null;
    },
    set: async (input) => {
      calls.push({ op: "set", input: { ...input } });
      const old = items.get(key(input));
      items.set(key(input), input.data as Card);
      return { old_value: old, new_value: input.data as Card };
    },
    delete: async (input) => {
      calls.push({ op: "delete", input: { ...input } });
      const old = items.get(key(input));
      items.delete(key(input));
      return { old_value: old };
    },
    list: async (input) => [...items].filter(([k]) => k.startsWith(`${input.group_id}/`)).map(([, v]) => v),
    listGroups: async () => [...new Set([...items.keys()].map((k) => k.split("/")[0]!))].sort(),
    update: async () => {
      throw new Error("not used: iii-sdk's createStream registers no update");
    },
  });
  // iii-sdk's createStream registers five operations; `update` can be taken over by hand (as iii allows).
  owner.registerFunction(
    `stream::update(${stream})`,
    async (input: { group_id: string; item_id: string; ops: { type: string; path: string; value: unknown }[] }) => {
      calls.push({ op: "update", input: { ...input } });
      const old = items.get(key(input));
      const next: Card = { ...(old ?? { title: "" }) };
      for (const op of input.ops) if (op.type === "set" && op.path === "title") next.title = String(op.value);
      items.set(key(input), next);
      return { old_value: old, new_value: next };
    },
  );
  owner.registerFunction("custom-streams::on-change", async (p: { event: { type: string; data?: unknown }; id: string | null }) => {
    fired.push(p);
  });
  owner.registerTrigger({ type: "stream", function_id: "custom-streams::on-change", config: { stream_name: stream } });
  await eventually(async () => (await functionIds()).includes(`stream::update(${stream})`), 15_000, "custom stream operations registered");
});

afterAll(async () => {
  await owner?.shutdown();
  await user?.shutdown();
  await engine?.stop();
});

describe("custom stream operations (stream::<op>(<stream_name>))", () => {
  it("set, get, list, list_groups, update and delete reach the owning worker; other streams stay in the engine", async () => {
    const at = { stream_name: stream, group_id: "g1", item_id: "c1" };
    expect(await user.trigger({ function_id: "stream::set", payload: { ...at, data: { title: "first" } } })).toEqual({
      old_value: null,
      new_value: { title: "first" },
    });
    expect(items.get("g1/c1")).toEqual({ title: "first" });
    // The operation gets the stream input as the caller gave it, without the engine's caller stamp.
    expect(calls.at(-1)).toEqual({ op: "set", input: { ...at, data: { title: "first" } } });
    expect(await user.trigger({ function_id: "stream::get", payload: at })).toEqual({ title: "first" });
    expect(await user.trigger({ function_id: "stream::set", payload: { ...at, data: { title: "second" } } })).toEqual({
      old_value: { title: "first" },
      new_value: { title: "second" },
    });
    await user.trigger({
      function_id: "stream::set",
      payload: { stream_name: stream, group_id: "g2", item_id: "c9", data: { title: "other group" } },
    });
    expect(await user.trigger({ function_id: "stream::list", payload: { stream_name: stream, group_id: "g1" } })).toEqual([
      { title: "second" },
    ]);
    expect(await user.trigger({ function_id: "stream::list_groups", payload: { stream_name: stream } })).toEqual(["g1", "g2"]);
    expect(
      await user.trigger({ function_id: "stream::update", payload: { ...at, ops: [{ type: "set", path: "title", value: "third" }] } }),
    ).toEqual({ old_value: { title: "second" }, new_value: { title: "third" } });
    expect(await user.trigger({ function_id: "stream::delete", payload: at })).toEqual({ old_value: { title: "third" } });
    expect(items.has("g1/c1")).toBe(false);
    expect(await user.trigger({ function_id: "stream::get", payload: at })).toBeUndefined();

    // The engine stored none of it; a stream nobody took over is the engine's as before.
    await user.trigger({ function_id: "stream::set", payload: { stream_name: `${stream}-plain`, group_id: "g", item_id: "i", data: 1 } });
    const all = (await user.trigger({ function_id: "stream::list_all", payload: {} })) as { stream: { id: string }[] };
    expect(all.stream.map((s) => s.id)).toContain(`${stream}-plain`);
    expect(all.stream.map((s) => s.id)).not.toContain(stream);
    expect(calls.filter((c) => c.input.stream_name !== stream)).toEqual([]);
  });

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

  it("a failing or malformed custom operation is the caller's typed error", async () => {
    const bad = `${stream}-bad`;
    owner.registerFunction(`stream::get(${bad})`, async () => {
      throw new Error("backend is down");
    });
    owner.registerFunction(`stream::set(${bad})`, async () => "not a set result");
    await eventually(async () => (await functionIds()).includes(`stream::set(${bad})`), 10_000, "bad operations registered");
    const err = await user.trigger({ function_id: "stream::get", payload: { stream_name: bad, group_id: "g", item_id: "i" } }).then(
      () => undefined,
      (e: { code?: string; message?: string }) => e,
    );
    // The handler's own error, passed through (iii-sdk prefixes the message with the code).
    expect(err?.code).toBe("invocation_failed");
    expect(err?.message).toContain("backend is down");
    const shape = await user
      .trigger({ function_id: "stream::set", payload: { stream_name: bad, group_id: "g", item_id: "i", data: 1 } })
      .then(
        () => undefined,
        (e: { code?: string; message?: string }) => e,
      );
    expect(shape?.code).toBe("invocation_failed");
    expect(shape?.message).toContain(`stream::set(${bad}) returned "not a set result"; it must return {old_value?, new_value}`);
  });

  it("once the owning worker is gone, the stream is the engine's own again", async () => {
    await owner.shutdown();
    await eventually(
      async () => !(await functionIds()).includes(`stream::get(${stream})`),
      10_000,
      "custom operations gone with their worker",
    );
    const at = { stream_name: stream, group_id: "g1", item_id: "after" };
    expect(await user.trigger({ function_id: "stream::set", payload: { ...at, data: { title: "kept by the engine" } } })).toEqual({
      old_value: null,
      new_value: { title: "kept by the engine" },
    });
    expect(await user.trigger({ function_id: "stream::get", payload: at })).toEqual({ title: "kept by the engine" });
    expect(items.has("g1/after")).toBe(false);
  });
});
