// One conformance suite for the session store, run over every SqlStore implementation
// (node:sqlite here, D1 in workerd through Miniflare): the same behaviour, whatever holds the rows.
import type { AgentMessage } from "@iii-edge/protocol/harness";
import { beforeAll, describe, expect, it } from "vitest";
import { MAX_INBOX_ITEMS, MAX_MESSAGE_BYTES, SessionStore } from "../src/session-store.ts";
import type { SqlStore } from "../src/sql-store.ts";
import { sessionTreeConformance } from "./tree-conformance.ts";

const user = (text: string): AgentMessage => ({ role: "user", content: [{ type: "text", text }], timestamp: 1 });
const custom = (text: string): AgentMessage => ({ role: "custom", custom_type: "note", content: text, timestamp: 1 });
const textOf = (m: AgentMessage): string => {
  const c = (m as { content: unknown }).content;
  return Array.isArray(c) ? (c[0] as { text: string }).text : String(c);
};

async function allMessages(
  store: SessionStore,
  sessionId: string,
  opts: { branch_leaf?: string; limit?: number; include_custom?: boolean } = {},
) {
  const out: { entry_id: string; text: string }[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 1000; pages++) {
    const page = await store.messages(sessionId, { ...opts, cursor });
    out.push(...page.messages.map((m) => ({ entry_id: m.entry_id, text: textOf(m.message) })));
    if (page.next_cursor === null) return out;
    cursor = page.next_cursor;
  }
  throw new Error("pagination did not end");
}

async function rejects(p: Promise<unknown>, code: string): Promise<void> {
  await expect(p).rejects.toMatchObject({ code });
}

export function sessionStoreConformance(name: string, open: () => Promise<SqlStore>): void {
  describe(`session store over ${name}`, () => {
    let sql: SqlStore;
    let store: SessionStore;
    let clock = 1_000;
    let ids = 0;
    beforeAll(async () => {
      sql = await open();
      store = new SessionStore(sql, { now: () => ++clock, newId: () => `gen-${++ids}` });
    });

    it("ensure creates a session once and get reads it back", async () => {
      expect(await store.ensure("s-ensure", { display_name: "First" })).toEqual({ session_id: "s-ensure", created: true });
      expect(await store.ensure("s-ensure", { display_name: "Second" })).toEqual({ session_id: "s-ensure", created: false });
      const meta = await store.get("s-ensure");
      expect(meta).toMatchObject({ session_id: "s-ensure", display_name: "First", entry_count: 0, branch_count: 0, leaf_id: null });
      expect(await store.get("s-missing")).toBeNull();
    });

    it("append to an unknown session is not_found and writes nothing", async () => {
      await rejects(store.append("s-nope", { message: user("x") }), "not_found");
      await rejects(store.appendMany("s-nope", []), "not_found");
      expect(await store.get("s-nope")).toBeNull();
    });

    it("appends form a linear active path, oldest first", async () => {
      await store.ensure("s-linear");
      for (const t of ["one", "two", "three"]) await store.append("s-linear", { message: user(t) });
      expect((await allMessages(store, "s-linear")).map((m) => m.text)).toEqual(["one", "two", "three"]);
      const meta = await store.get("s-linear");
      expect(meta).toMatchObject({ entry_count: 3, branch_count: 1, last_message_summary: "three" });
    });

    it("an existing entry id appends nothing (a replayed step is harmless)", async () => {
      await store.ensure("s-idem");
      expect(await store.append("s-idem", { entry_id: "e1", message: user("first") })).toEqual({ entry_id: "e1", appended: true });
      expect(await store.append("s-idem", { entry_id: "e2", message: user("second") })).toEqual({ entry_id: "e2", appended: true });
      // Replayed: same id, even with other content and another parent → nothing changes.
      expect(await store.append("s-idem", { entry_id: "e1", message: user("changed") })).toEqual({ entry_id: "e1", appended: false });
      expect(await store.append("s-idem", { entry_id: "e2", message: user("second") }, "e1")).toEqual({ entry_id: "e2", appended: false });
      expect((await allMessages(store, "s-idem")).map((m) => [m.entry_id, m.text])).toEqual([
        ["e1", "first"],
        ["e2", "second"],
      ]);
      expect(await store.get("s-idem")).toMatchObject({ entry_count: 2, leaf_id: "e2" });
    });

    it("branching: a parent_id starts a branch, the path follows the newest leaf, branch_leaf reads another", async () => {
      await store.ensure("s-branch");
      await store.append("s-branch", { entry_id: "root", message: user("root") });
      await store.append("s-branch", { entry_id: "a1", message: user("a1") });
      await store.append("s-branch", { entry_id: "a2", message: user("a2") });
      await store.append("s-branch", { entry_id: "b1", message: user("b1") }, "root");
      expect((await allMessages(store, "s-branch")).map((m) => m.entry_id)).toEqual(["root", "b1"]);
      expect((await allMessages(store, "s-branch", { branch_leaf: "a2" })).map((m) => m.entry_id)).toEqual(["root", "a1", "a2"]);
      // The default parent is the active leaf: the next append continues branch b.
      await store.append("s-branch", { entry_id: "b2", message: user("b2") });
      expect((await allMessages(store, "s-branch")).map((m) => m.entry_id)).toEqual(["root", "b1", "b2"]);
      expect(await store.get("s-branch")).toMatchObject({ entry_count: 5, branch_count: 2, leaf_id: "b2" });
    });

    it("an unknown parent or branch leaf is not_found, and nothing is written", async () => {
      await store.ensure("s-parent");
      await store.append("s-parent", { entry_id: "p1", message: user("p1") });
      await rejects(store.append("s-parent", { entry_id: "p2", message: user("p2") }, "ghost"), "not_found");
      await rejects(store.appendMany("s-parent", [{ entry_id: "p3", message: user("p3") }], "ghost"), "not_found");
      await rejects(store.messages("s-parent", { branch_leaf: "ghost" }), "not_found");
      await rejects(store.messages("s-nope"), "not_found");
      expect(await store.get("s-parent")).toMatchObject({ entry_count: 1, leaf_id: "p1" });
    });

    it("append_many chains its entries in one step, and a replay appends only what is new", async () => {
      await store.ensure("s-many");
      await store.append("s-many", { entry_id: "m0", message: user("m0") });
      const batch = [
        { entry_id: "m1", message: user("m1") },
        { entry_id: "m2", message: user("m2") },
        { entry_id: "m3", message: user("m3") },
      ];
      expect(await store.appendMany("s-many", batch)).toMatchObject({ entry_ids: ["m1", "m2", "m3"], appended: 3 });
      expect(await store.appendMany("s-many", batch)).toMatchObject({ entry_ids: ["m1", "m2", "m3"], appended: 0 });
      // A step that crashed after m1..m3 and replays with one more entry adds just that one.
      expect(await store.appendMany("s-many", [...batch, { entry_id: "m4", message: user("m4") }])).toMatchObject({ appended: 1 });
      expect((await allMessages(store, "s-many")).map((m) => m.entry_id)).toEqual(["m0", "m1", "m2", "m3", "m4"]);
      expect(await store.get("s-many")).toMatchObject({ entry_count: 5, branch_count: 1, leaf_id: "m4" });
      // Generated ids when none is given; an explicit parent puts the chain there.
      const gen = await store.appendMany("s-many", [{ message: user("g1") }, { message: user("g2") }], "m1");
      expect(gen.entry_ids).toHaveLength(2);
      expect((await allMessages(store, "s-many")).map((m) => m.text)).toEqual(["m0", "m1", "g1", "g2"]);
      await rejects(
        store.appendMany("s-many", [
          { entry_id: "dup", message: user("a") },
          { entry_id: "dup", message: user("b") },
        ]),
        "invalid_arguments",
      );
    });

    it("concurrent appends to one session form a single chain", async () => {
      await store.ensure("s-race");
      const n = 20;
      await Promise.all(Array.from({ length: n }, (_, i) => store.append("s-race", { entry_id: `r${i}`, message: user(`r${i}`) })));
      const path = await allMessages(store, "s-race");
      expect(path).toHaveLength(n);
      expect(new Set(path.map((m) => m.entry_id)).size).toBe(n);
      expect(await store.get("s-race")).toMatchObject({ entry_count: n, branch_count: 1 });
    });

    it("messages pages with an opaque cursor: every message once, in order", async () => {
      await store.ensure("s-page");
      const texts = Array.from({ length: 25 }, (_, i) => `msg ${i}`);
      await store.appendMany(
        "s-page",
        texts.slice(0, 13).map((t) => ({ message: user(t) })),
      );
      await store.appendMany(
        "s-page",
        texts.slice(13).map((t) => ({ message: user(t) })),
      );
      const first = await store.messages("s-page", { limit: 10 });
      expect(first.messages.map((m) => textOf(m.message))).toEqual(texts.slice(0, 10));
      expect(first.next_cursor).toEqual(expect.any(String));
      // Appends between pages do not disturb the pages already promised (the cursor pins its path).
      await store.append("s-page", { message: user("late") });
      const second = await store.messages("s-page", { limit: 10, cursor: first.next_cursor! });
      expect(second.messages.map((m) => textOf(m.message))).toEqual(texts.slice(10, 20));
      const third = await store.messages("s-page", { limit: 10, cursor: second.next_cursor! });
      expect(third.messages.map((m) => textOf(m.message))).toEqual(texts.slice(20));
      expect(third.next_cursor).toBeNull();
      expect((await allMessages(store, "s-page", { limit: 7 })).map((m) => m.text)).toEqual([...texts, "late"]);
      // Exactly a page's worth: no empty trailing page.
      const exact = await store.messages("s-page", { limit: 26 });
      expect(exact.messages).toHaveLength(26);
      expect(exact.next_cursor).toBeNull();
      await rejects(store.messages("s-page", { cursor: "not-a-cursor" }), "invalid_arguments");
      await rejects(store.messages("s-linear", { cursor: first.next_cursor! }), "invalid_arguments");
    });

    it("custom messages stay off the path unless include_custom", async () => {
      await store.ensure("s-custom");
      await store.append("s-custom", { message: user("before") });
      await store.append("s-custom", { message: custom("note") });
      await store.append("s-custom", { message: user("after") });
      expect((await allMessages(store, "s-custom")).map((m) => m.text)).toEqual(["before", "after"]);
      expect((await allMessages(store, "s-custom", { include_custom: true })).map((m) => m.text)).toEqual(["before", "note", "after"]);
      expect((await allMessages(store, "s-custom", { limit: 1 })).map((m) => m.text)).toEqual(["before", "after"]);
    });

    it("update_message replaces in place and bumps the revision", async () => {
      await store.ensure("s-update");
      await store.append("s-update", { entry_id: "u1", message: user("old") });
      await store.append("s-update", { entry_id: "u2", message: user("next") });
      expect(await store.updateMessage("s-update", "u1", user("new"))).toEqual({ ok: true, revision: 1 });
      expect(await store.updateMessage("s-update", "u1", user("newer"))).toEqual({ ok: true, revision: 2 });
      const page = await store.messages("s-update");
      expect(page.messages.map((m) => [m.entry_id, textOf(m.message), m.revision])).toEqual([
        ["u1", "newer", 2],
        ["u2", "next", 0],
      ]);
      await rejects(store.updateMessage("s-update", "ghost", user("x")), "not_found");
    });

    it("a message over the size bound is value_too_large", async () => {
      await store.ensure("s-big");
      await rejects(store.append("s-big", { message: user("x".repeat(MAX_MESSAGE_BYTES)) }), "value_too_large");
      expect(await store.get("s-big")).toMatchObject({ entry_count: 0 });
    });

    it("list pages sessions by last update with their summaries", async () => {
      const before = await store.list({ limit: 1000 });
      await store.ensure("s-list-a", { display_name: "A" });
      await store.ensure("s-list-b");
      await store.append("s-list-a", { message: user("latest words") });
      const all = await store.list({ limit: 1000 });
      expect(all.total).toBe(before.total + 2);
      expect(all.sessions[0]).toMatchObject({
        session_id: "s-list-a",
        display_name: "A",
        entry_count: 1,
        last_message_summary: "latest words",
      });
      expect(all.sessions[1]).toMatchObject({ session_id: "s-list-b", entry_count: 0 });
      expect(all.sessions[1]).not.toHaveProperty("display_name");
      const asc = await store.list({ order: "asc", limit: 1000 });
      expect(asc.sessions.map((s) => s.session_id)).toEqual(all.sessions.map((s) => s.session_id).reverse());
      const page = await store.list({ limit: 1, offset: 1 });
      expect(page.sessions.map((s) => s.session_id)).toEqual(["s-list-b"]);
      expect(page.total).toBe(all.total);
    });

    it("inboxes: push, peek and drain in order, per session and name", async () => {
      expect(await store.push("s-inbox", "steering", { text: "a" })).toEqual({ ok: true, size: 1 });
      expect(await store.push("s-inbox", "steering", "b")).toEqual({ ok: true, size: 2 });
      expect(await store.push("s-inbox", "followup", 3)).toEqual({ ok: true, size: 1 });
      expect(await store.push("s-other", "steering", "elsewhere")).toEqual({ ok: true, size: 1 });
      expect(await store.peek("s-inbox", "steering")).toEqual({ items: [{ text: "a" }, "b"] });
      expect(await store.drain("s-inbox", "steering")).toEqual({ items: [{ text: "a" }, "b"] });
      expect(await store.drain("s-inbox", "steering")).toEqual({ items: [] });
      expect(await store.peek("s-inbox", "followup")).toEqual({ items: [3] });
      expect(await store.peek("s-other", "steering")).toEqual({ items: ["elsewhere"] });
    });

    it("a full inbox refuses the push and keeps what it holds", async () => {
      await Promise.all(Array.from({ length: MAX_INBOX_ITEMS }, (_, i) => store.push("s-full", "steering", i)));
      expect(await store.push("s-full", "steering", "one too many")).toEqual({ ok: false, size: MAX_INBOX_ITEMS, error: "inbox_full" });
      const { items } = await store.drain("s-full", "steering");
      expect(items).toHaveLength(MAX_INBOX_ITEMS);
      expect(await store.push("s-full", "steering", "room again")).toEqual({ ok: true, size: 1 });
    });

    it("concurrent drains and pushes: no item twice, none lost", async () => {
      const pushed = Array.from({ length: 60 }, (_, i) => `item-${i}`);
      const drained: unknown[] = [];
      const drain = async () => drained.push(...(await store.drain("s-drain", "steering")).items);
      const work: Promise<unknown>[] = [];
      pushed.forEach((item, i) => {
        work.push(store.push("s-drain", "steering", item));
        if (i % 6 === 5) work.push(drain(), drain());
      });
      await Promise.all(work);
      await drain();
      expect(drained).toHaveLength(pushed.length);
      expect(new Set(drained)).toEqual(new Set(pushed));
    });

    it("a second store over the same database finds the tables (created once, IF NOT EXISTS)", async () => {
      const again = new SessionStore(sql);
      expect(await again.get("s-linear")).toMatchObject({ entry_count: 3 });
    });

    sessionTreeConformance(() => sql);
  });
}
