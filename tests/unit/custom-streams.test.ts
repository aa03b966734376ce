// Custom stream operations (protocol/README.md §7.3) on the engine core served in this process
// (@iii-edge/test-support/node-engine), with the unmodified iii-sdk 0.22.1 on both sides: a worker
// takes over a stream with `createStream` (it registers `stream::<op>(<stream_name>)`), another
// worker uses the ordinary `stream::*` functions and never sees the difference. The stream socket's
// pushes, which only `npm start` serves, are in tests/triggers-e2e/custom-streams.test.ts.
import { describe, expect, it } from "vitest";
import { startNodeEngine } from "@iii-edge/test-support/node-engine";
import { eventually } from "@iii-edge/test-support/wait";
import { functionIds, ownedStreamSuite } from "../triggers-e2e/custom-stream-owner.ts";

const suite = ownedStreamSuite(startNodeEngine);
const { stream } = suite;

describe("custom stream operations (stream::<op>(<stream_name>))", () => {
  it("set, get, list, list_groups, update and delete reach the owning worker; other streams stay in the engine", async () => {
    const at = { stream_name: stream, group_id: "g1", item_id: "c1" };
    expect(await suite.user.trigger({ function_id: "stream::set", payload: { ...at, data: { title: "first" } } })).toEqual({
      old_value: null,
      new_value: { title: "first" },
    });
    expect(suite.items.get("g1/c1")).toEqual({ title: "first" });
    // The operation gets the stream input as the caller gave it, without the engine's caller stamp.
    expect(suite.calls.at(-1)).toEqual({ op: "set", input: { ...at, data: { title: "first" } } });
    expect(await suite.user.trigger({ function_id: "stream::get", payload: at })).toEqual({ title: "first" });
    expect(await suite.user.trigger({ function_id: "stream::set", payload: { ...at, data: { title: "second" } } })).toEqual({
      old_value: { title: "first" },
      new_value: { title: "second" },
    });
    await suite.user.trigger({
      function_id: "stream::set",
      payload: { stream_name: stream, group_id: "g2", item_id: "c9", data: { title: "other group" } },
    });
    expect(await suite.user.trigger({ function_id: "stream::list", payload: { stream_name: stream, group_id: "g1" } })).toEqual([
      { title: "second" },
    ]);
    expect(await suite.user.trigger({ function_id: "stream::list_groups", payload: { stream_name: stream } })).toEqual(["g1", "g2"]);
    expect(
      await suite.user.trigger({
        function_id: "stream::update",
        payload: { ...at, ops: [{ type: "set", path: "title", value: "third" }] },
      }),
    ).toEqual({ old_value: { title: "second" }, new_value: { title: "third" } });
    expect(await suite.user.trigger({ function_id: "stream::delete", payload: at })).toEqual({ old_value: { title: "third" } });
    expect(suite.items.has("g1/c1")).toBe(false);
    expect(await suite.user.trigger({ function_id: "stream::get", payload: at })).toBeUndefined();

    // The engine stored none of it; a stream nobody took over is the engine's as before.
    await suite.user.trigger({
      function_id: "stream::set",
      payload: { stream_name: `${stream}-plain`, group_id: "g", item_id: "i", data: 1 },
    });
    const all = (await suite.user.trigger({ function_id: "stream::list_all", payload: {} })) as { stream: { id: string }[] };
    expect(all.stream.map((s) => s.id)).toContain(`${stream}-plain`);
    expect(all.stream.map((s) => s.id)).not.toContain(stream);
    expect(suite.calls.filter((c) => c.input.stream_name !== stream)).toEqual([]);
  });

  it("a failing or malformed custom operation is the caller's typed error", async () => {
    const bad = `${stream}-bad`;
    suite.owner.registerFunction(`stream::get(${bad})`, async () => {
      throw new Error("backend is down");
    });
    suite.owner.registerFunction(`stream::set(${bad})`, async () => "not a set result");
    await eventually(async () => (await functionIds(suite.user)).includes(`stream::set(${bad})`), 10_000, "bad operations registered");
    const err = await suite.user.trigger({ function_id: "stream::get", payload: { stream_name: bad, group_id: "g", item_id: "i" } }).then(
      () => undefined,
      (e: { code?: string; message?: string }) => e,
    );
    // The handler's own error, passed through (iii-sdk prefixes the message with the code).
    expect(err?.code).toBe("invocation_failed");
    expect(err?.message).toContain("backend is down");
    const shape = await suite.user
      .trigger({ function_id: "stream::set", payload: { stream_name: bad, group_id: "g", item_id: "i", data: 1 } })
      .then(
        () => undefined,
        (e: { code?: string; message?: string }) => e,
      );
    expect(shape?.code).toBe("invocation_failed");
    expect(shape?.message).toContain(`stream::set(${bad}) returned "not a set result"; it must return {old_value?, new_value}`);
  });

  it("once the owning worker is gone, the stream is the engine's own again", async () => {
    await suite.owner.shutdown();
    await eventually(
      async () => !(await functionIds(suite.user)).includes(`stream::get(${stream})`),
      10_000,
      "custom operations gone with their worker",
    );
    const at = { stream_name: stream, group_id: "g1", item_id: "after" };
    expect(await suite.user.trigger({ function_id: "stream::set", payload: { ...at, data: { title: "kept by the engine" } } })).toEqual({
      old_value: null,
      new_value: { title: "kept by the engine" },
    });
    expect(await suite.user.trigger({ function_id: "stream::get", payload: at })).toEqual({ title: "kept by the engine" });
    expect(suite.items.has("g1/after")).toBe(false);
  });
});
