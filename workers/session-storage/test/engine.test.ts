// session-tree::* and session-inbox::* through the engine core served in-process (tests/support/node-engine.ts), the worker run alone in Node
// over its node:sqlite file (what `npm run worker -- session-storage` runs). A caller triggers the
// functions as the orchestrator would.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { AgentMessage } from "@iii-edge/protocol/harness";
import type { WorkerModule } from "@iii-edge/sdk-edge/worker";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import { until } from "@iii-edge/test-support/wait";
import { worker } from "../src/node.ts";

let engine: NodeEngine;
let storage: RunningWorkers;
let caller: RunningWorkers;

const call = <T>(function_id: string, payload: unknown) => caller.client.trigger<unknown, T>({ function_id, payload });
const user = (text: string): AgentMessage => ({ role: "user", content: [{ type: "text", text }], timestamp: 1 });
type Page = { messages: { entry_id: string; message: AgentMessage }[]; next_cursor: string | null };
const textOf = (m: AgentMessage) => ((m as { content: { text: string }[] }).content[0] as { text: string }).text;

beforeAll(async () => {
  engine = await startNodeEngine();
  const dbFile = path.join(mkdtempSync(path.join(tmpdir(), "iii-sessions-e2e-")), "sessions.sqlite");
  storage = runWorkers(engine.wsUrl, [worker as WorkerModule<never>], { env: { SESSIONS_DB_PATH: dbFile } });
  caller = runWorkers(engine.wsUrl, [], { workerName: "session-test-caller" });
  await until(async () => {
    const r = await call<{ functions: { function_id: string }[] }>("engine::functions::list", {});
    const ids = r.functions.map((f) => f.function_id);
    return ["session-tree::append_many", "session-inbox::drain"].every((id) => ids.includes(id));
  }, "session-storage registered");
});

afterAll(async () => {
  await caller?.shutdown();
  await storage?.shutdown();
  await engine?.stop();
});

describe("session-tree through the engine", () => {
  it("ensure, then appends form the active path; a replayed entry id appends nothing", async () => {
    expect(await call("session-tree::ensure", { session_id: "e2e-1", display_name: "demo" })).toEqual({
      session_id: "e2e-1",
      created: true,
    });
    expect(await call("session-tree::ensure", { session_id: "e2e-1" })).toEqual({ session_id: "e2e-1", created: false });
    expect(await call("session-tree::append", { session_id: "e2e-1", entry_id: "e_run1_0_user", message: user("hello") })).toEqual({
      entry_id: "e_run1_0_user",
      appended: true,
    });
    expect(
      await call("session-tree::append_many", {
        session_id: "e2e-1",
        entries: [
          {
            entry_id: "e_run1_1_assistant",
            message: {
              role: "assistant",
              content: [{ type: "text", text: "hi" }],
              stop_reason: "end",
              model: "m",
              provider: "p",
              timestamp: 2,
            },
          },
          {
            entry_id: "e_run1_call_1",
            message: {
              role: "function_result",
              function_call_id: "call_1",
              function_id: "f",
              content: [{ type: "text", text: "42" }],
              details: null,
              is_error: false,
              timestamp: 3,
            },
          },
        ],
      }),
    ).toEqual({ entry_ids: ["e_run1_1_assistant", "e_run1_call_1"], appended: 2 });
    // The step is redelivered after a crash: the same deterministic ids change nothing.
    expect(await call("session-tree::append", { session_id: "e2e-1", entry_id: "e_run1_0_user", message: user("hello") })).toEqual({
      entry_id: "e_run1_0_user",
      appended: false,
    });
    expect(
      await call("session-tree::append_many", {
        session_id: "e2e-1",
        entries: [
          { entry_id: "e_run1_1_assistant", message: user("x") },
          { entry_id: "e_run1_call_1", message: user("y") },
        ],
      }),
    ).toEqual({ entry_ids: ["e_run1_1_assistant", "e_run1_call_1"], appended: 0 });
    const page = await call<Page>("session-tree::messages", { session_id: "e2e-1" });
    expect(page.messages.map((m) => [m.entry_id, m.message.role])).toEqual([
      ["e_run1_0_user", "user"],
      ["e_run1_1_assistant", "assistant"],
      ["e_run1_call_1", "function_result"],
    ]);
    expect(page.next_cursor).toBeNull();
    expect(await call("session-tree::get", { session_id: "e2e-1" })).toMatchObject({
      session_id: "e2e-1",
      display_name: "demo",
      entry_count: 3,
      leaf_id: "e_run1_call_1",
      branch_count: 1,
    });
    const listed = await call<{ sessions: { session_id: string }[]; total: number }>("session-tree::list", {});
    expect(listed.sessions.map((s) => s.session_id)).toContain("e2e-1");
  });

  it("messages pages through a long path with its cursor", async () => {
    await call("session-tree::ensure", { session_id: "e2e-pages" });
    const texts = Array.from({ length: 30 }, (_, i) => `m${i}`);
    await call("session-tree::append_many", { session_id: "e2e-pages", entries: texts.map((t) => ({ message: user(t) })) });
    const seen: string[] = [];
    let cursor: string | null | undefined;
    let pages = 0;
    do {
      const page: Page = await call<Page>("session-tree::messages", { session_id: "e2e-pages", limit: 8, ...(cursor ? { cursor } : {}) });
      seen.push(...page.messages.map((m) => textOf(m.message)));
      cursor = page.next_cursor;
      pages++;
    } while (cursor);
    expect(seen).toEqual(texts);
    expect(pages).toBe(4);
  });

  it("update_message replaces in place", async () => {
    expect(
      await call("session-tree::update_message", { session_id: "e2e-1", entry_id: "e_run1_call_1", message: user("[output pruned]") }),
    ).toEqual({ ok: true, revision: 1 });
    const page = await call<Page>("session-tree::messages", { session_id: "e2e-1" });
    expect(textOf(page.messages[2].message)).toBe("[output pruned]");
  });

  it("bad input is invalid_arguments, an unknown session not_found, and nothing is written", async () => {
    await expect(call("session-tree::append", { session_id: "a/b", message: user("x") })).rejects.toMatchObject({
      code: "invalid_arguments",
    });
    await expect(call("session-tree::append", { session_id: "e2e-1", message: { role: "robot" } })).rejects.toMatchObject({
      code: "invalid_arguments",
    });
    await expect(call("session-tree::messages", { session_id: "e2e-1", limit: 0 })).rejects.toMatchObject({ code: "invalid_arguments" });
    await expect(call("session-tree::append", { session_id: "never-ensured", message: user("x") })).rejects.toMatchObject({
      code: "not_found",
    });
    await expect(call("session-tree::append", { session_id: "e2e-1", parent_id: "ghost", message: user("x") })).rejects.toMatchObject({
      code: "not_found",
    });
    // A null result reaches the caller as no result at all.
    expect((await call("session-tree::get", { session_id: "never-ensured" })) ?? null).toBeNull();
    expect(await call("session-tree::get", { session_id: "e2e-1" })).toMatchObject({ entry_count: 3 });
  });
});

describe("the branching functions through the engine", () => {
  it("fork, tree, branches, set_active_leaf and export answer within the frame bounds; bad input is refused", async () => {
    const sid = "e2e-tree";
    await call("session-tree::ensure", { session_id: sid, display_name: "deep" });
    // 300 entries in a line and a branch near the end: nested by branch, never by entry.
    for (let i = 0; i < 300; i += 60) {
      await call("session-tree::append_many", {
        session_id: sid,
        entries: Array.from({ length: 60 }, (_, j) => ({ entry_id: `d${i + j}`, message: user(`step ${i + j}`) })),
      });
    }
    await call("session-tree::append", { session_id: sid, entry_id: "alt", parent_id: "d297", message: user("<i>alt</i>") });
    const tree = await call<{ roots: { entries: { entry_id: string }[]; children: { entries: { entry_id: string }[] }[] }[] }>(
      "session-tree::tree",
      { session_id: sid },
    );
    expect(tree.roots[0]!.entries).toHaveLength(298);
    expect(tree.roots[0]!.children.map((c) => c.entries.map((e) => e.entry_id))).toEqual([["d298", "d299"], ["alt"]]);
    const branches = await call<{ branches: { leaf_id: string; fork_point_id: string | null; active: boolean }[] }>(
      "session-tree::branches",
      { session_id: sid },
    );
    expect(branches.branches.map((b) => [b.leaf_id, b.fork_point_id, b.active])).toEqual([
      ["alt", "d297", true],
      ["d299", "d297", false],
    ]);

    const fork = await call<{ session_id: string; leaf_id: string; created: boolean }>("session-tree::fork", {
      source_session_id: sid,
      from_entry_id: "d299",
    });
    expect(fork).toMatchObject({ leaf_id: "d299~299", created: true });
    expect(await call("session-tree::fork", { source_session_id: sid, from_entry_id: "d299" })).toMatchObject({
      session_id: fork.session_id,
      created: false,
    });
    expect(await call("session-tree::get", { session_id: fork.session_id })).toMatchObject({
      entry_count: 300,
      display_name: "deep (fork)",
      origin: { kind: "fork", source_session_id: sid },
    });
    const page = await call<Page>("session-tree::messages", { session_id: fork.session_id, limit: 1000 });
    expect(page.messages.map((m) => textOf(m.message)).at(-1)).toBe("step 299");

    expect(await call("session-tree::set_active_leaf", { session_id: sid, entry_id: "d299" })).toMatchObject({
      leaf_id: "d299",
      previous_leaf_id: "alt",
      changed: true,
    });
    expect(await call("session-tree::get_entry", { session_id: sid, entry_id: "alt" })).toMatchObject({
      parent_id: "d297",
      message: { role: "user" },
    });
    expect((await call("session-tree::get_entry", { session_id: sid, entry_id: "ghost" })) ?? null).toBeNull();
    const html = await call<{ html: string }>("session-tree::export_html", { session_id: sid, branch_leaf: "alt" });
    expect(html.html).toContain("&lt;i&gt;alt&lt;/i&gt;");
    expect(html.html).not.toContain("<i>alt</i>");
    const md = await call<{ content: string; entry_count: number }>("session-tree::export", { session_id: sid, format: "markdown" });
    expect(md.entry_count).toBe(300);
    expect(md.content).toContain("step 299");

    await expect(call("session-tree::fork", { source_session_id: sid, from_entry_id: "ghost" })).rejects.toMatchObject({
      code: "not_found",
    });
    await expect(call("session-tree::fork", { source_session_id: "a/b", from_entry_id: "d1" })).rejects.toMatchObject({
      code: "invalid_arguments",
    });
    await expect(call("session-tree::export", { session_id: sid, format: "pdf" })).rejects.toMatchObject({ code: "invalid_arguments" });
    await expect(call("session-tree::set_active_leaf", { session_id: sid, entry_id: "alt", expected_leaf_id: "d1" })).rejects.toMatchObject(
      { code: "leaf_conflict" },
    );
  });
});

describe("session-inbox through the engine", () => {
  it("push, peek, drain", async () => {
    expect(await call("session-inbox::push", { name: "steering", session_id: "e2e-in", item: { text: "stop and summarise" } })).toEqual({
      ok: true,
      size: 1,
    });
    expect(await call("session-inbox::peek", { name: "steering", session_id: "e2e-in" })).toEqual({
      items: [{ text: "stop and summarise" }],
    });
    expect(await call("session-inbox::drain", { name: "steering", session_id: "e2e-in" })).toEqual({
      items: [{ text: "stop and summarise" }],
    });
    expect(await call("session-inbox::drain", { name: "steering", session_id: "e2e-in" })).toEqual({ items: [] });
  });

  it("concurrent drains through the engine: no item twice, none lost", async () => {
    const items = Array.from({ length: 40 }, (_, i) => `steer-${i}`);
    const drained: unknown[] = [];
    const drain = async () =>
      drained.push(...(await call<{ items: unknown[] }>("session-inbox::drain", { name: "steering", session_id: "e2e-race" })).items);
    const work: Promise<unknown>[] = [];
    items.forEach((item, i) => {
      work.push(call("session-inbox::push", { name: "steering", session_id: "e2e-race", item }));
      if (i % 5 === 4) work.push(drain(), drain(), drain());
    });
    await Promise.all(work);
    await drain();
    expect(drained).toHaveLength(items.length);
    expect(new Set(drained)).toEqual(new Set(items));
  });
});
