// session-tree::compact / compactions / update_parts as the session-storage worker registers them
// (node:sqlite in memory): validation, atomicity, the path rules.
import type { AgentMessage } from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";
import { fakeEngine } from "./support/fake-engine.ts";

const user = (text: string): AgentMessage => ({ role: "user", content: [{ type: "text", text }], timestamp: 1 });
const result = (id: string, text: string): AgentMessage => ({
  role: "function_result",
  function_call_id: id,
  function_id: "f::g",
  content: [{ type: "text", text }],
  details: "raw",
  is_error: false,
  timestamp: 1,
});

async function seeded() {
  const e = fakeEngine();
  await e.call("session-tree::ensure", { session_id: "s" });
  await e.call("session-tree::append_many", {
    session_id: "s",
    entries: [
      { entry_id: "u1", message: user("one") },
      { entry_id: "r1", message: result("c1", "out") },
      { entry_id: "u2", message: user("two") },
    ],
  });
  return e;
}

describe("session-tree::compact", () => {
  it("appends under the leaf (it becomes the leaf), idempotent by entry id, hidden from messages", async () => {
    const e = await seeded();
    expect(
      await e.call("session-tree::compact", {
        session_id: "s",
        entry_id: "k1",
        summary: "S",
        tokens_before: 5,
        tail_start_id: "u2",
        details: { read_files: ["/a"], modified_files: [] },
      }),
    ).toEqual({ entry_id: "k1", appended: true });
    expect(await e.call("session-tree::compact", { session_id: "s", entry_id: "k1", summary: "other", tokens_before: 9 })).toEqual({
      entry_id: "k1",
      appended: false,
    });
    expect(await e.call("session-tree::get", { session_id: "s" })).toMatchObject({ leaf_id: "k1", entry_count: 4 });
    await e.call("session-tree::append", { session_id: "s", entry_id: "u3", message: user("three") });
    const msgs = (await e.call<{ messages: { entry_id: string }[] }>("session-tree::messages", { session_id: "s" })).messages.map(
      (m) => m.entry_id,
    );
    expect(msgs).toEqual(["u1", "r1", "u2", "u3"]);
    const withCustom = (
      await e.call<{ messages: { entry_id: string; message: AgentMessage }[] }>("session-tree::messages", {
        session_id: "s",
        include_custom: true,
      })
    ).messages;
    expect(withCustom.find((m) => m.entry_id === "k1")?.message).toMatchObject({
      role: "custom",
      custom_type: "compaction",
      content: { summary: "S", tail_start_id: "u2" },
    });
    expect(await e.call("session-tree::compactions", { session_id: "s" })).toEqual({
      compactions: [
        {
          entry_id: "k1",
          parent_id: "u2",
          after_message_id: "u2",
          summary: "S",
          tokens_before: 5,
          tail_start_id: "u2",
          details: { read_files: ["/a"], modified_files: [] },
          timestamp: expect.any(Number),
        },
      ],
    });
  });

  it("refuses a tail that is not a message on the path, an unknown parent or session, and writes nothing", async () => {
    const e = await seeded();
    await e.call("session-tree::append", { session_id: "s", entry_id: "side", parent_id: "u1", message: user("a branch") });
    await expect(
      e.call("session-tree::compact", { session_id: "s", summary: "S", tokens_before: 1, parent_id: "u2", tail_start_id: "side" }),
    ).rejects.toMatchObject({ code: "invalid_arguments" });
    await expect(
      e.call("session-tree::compact", { session_id: "s", summary: "S", tokens_before: 1, parent_id: "nope" }),
    ).rejects.toMatchObject({ code: "not_found" });
    await expect(e.call("session-tree::compact", { session_id: "nobody", summary: "S", tokens_before: 1 })).rejects.toMatchObject({
      code: "not_found",
    });
    await expect(e.call("session-tree::compact", { session_id: "s", summary: "", tokens_before: 1 })).rejects.toMatchObject({
      code: "invalid_arguments",
    });
    expect(await e.call("session-tree::compactions", { session_id: "s" })).toEqual({ compactions: [] });
    expect(await e.call("session-tree::get", { session_id: "s" })).toMatchObject({ leaf_id: "side" });
  });

  it("lists only the compactions on the chosen path", async () => {
    const e = await seeded();
    await e.call("session-tree::compact", { session_id: "s", entry_id: "k1", summary: "S1", tokens_before: 1 });
    await e.call("session-tree::append", { session_id: "s", entry_id: "alt", parent_id: "u1", message: user("alt") });
    expect((await e.call<{ compactions: unknown[] }>("session-tree::compactions", { session_id: "s" })).compactions).toEqual([]);
    expect(
      (
        await e.call<{ compactions: { entry_id: string }[] }>("session-tree::compactions", { session_id: "s", branch_leaf: "k1" })
      ).compactions.map((c) => c.entry_id),
    ).toEqual(["k1"]);
  });
});

describe("session-tree::update_parts", () => {
  it("replaces a function output, merges compacted_at, bumps the revision; a repeat changes nothing", async () => {
    const e = await seeded();
    const r = await e.call<{ updated: { entry_id: string; revision: number }[]; unchanged: string[] }>("session-tree::update_parts", {
      session_id: "s",
      parts: [{ entry_id: "r1" }],
    });
    expect(r).toEqual({ updated: [{ entry_id: "r1", revision: 1 }], unchanged: [], skipped: [] });
    const msgs = (
      await e.call<{ messages: { entry_id: string; message: AgentMessage; revision: number }[] }>("session-tree::messages", {
        session_id: "s",
      })
    ).messages;
    const r1 = msgs.find((m) => m.entry_id === "r1")!;
    expect(r1.message).toMatchObject({
      content: [{ type: "text", text: "[output pruned]" }],
      details: { compacted_at: expect.any(Number) },
    });
    expect(r1.revision).toBe(1);
    expect(await e.call("session-tree::update_parts", { session_id: "s", parts: [{ entry_id: "r1" }] })).toEqual({
      updated: [],
      unchanged: ["r1"],
      skipped: [],
    });
  });

  it("anything but existing function results is refused and nothing changes", async () => {
    const e = await seeded();
    await expect(
      e.call("session-tree::update_parts", { session_id: "s", parts: [{ entry_id: "r1" }, { entry_id: "u1" }] }),
    ).rejects.toMatchObject({ code: "invalid_arguments" });
    await expect(
      e.call("session-tree::update_parts", { session_id: "s", parts: [{ entry_id: "r1" }, { entry_id: "zz" }] }),
    ).rejects.toMatchObject({ code: "not_found" });
    await expect(e.call("session-tree::update_parts", { session_id: "s", parts: [] })).rejects.toMatchObject({ code: "invalid_arguments" });
    const r1 = (
      await e.call<{ messages: { entry_id: string; message: AgentMessage }[] }>("session-tree::messages", { session_id: "s" })
    ).messages.find((m) => m.entry_id === "r1")!;
    expect(r1.message).toMatchObject({ content: [{ type: "text", text: "out" }], details: "raw" });
  });
});
