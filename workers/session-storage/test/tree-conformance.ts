// The branching side of the session store (src/tree.ts), as one suite run over every SqlStore
// (node:sqlite and D1 in workerd, from store-conformance.ts): fork from any entry, idempotent
// copies, clone, switching the active leaf, branch tips, the nested tree, one entry, export.
import { sessionCompactRequest, type AgentMessage, type TreeBranch } from "@iii-edge/protocol/harness";
import { beforeAll, describe, expect, it } from "vitest";
import { callingRound } from "@iii-edge/test-support/agent-messages";
import { CompactionStore } from "../src/compaction-store.ts";
import { SessionStore } from "../src/session-store.ts";
import type { SqlStore } from "../src/sql-store.ts";
import { copyEntryId, derivedSessionId, MAX_TREE_NESTING, SessionTreeStore } from "../src/tree.ts";

const user = (text: string): AgentMessage => ({ role: "user", content: [{ type: "text", text }], timestamp: 1 });
const assistant = (text: string): AgentMessage => ({
  role: "assistant",
  content: [{ type: "text", text }],
  stop_reason: "end",
  model: "m",
  provider: "p",
  timestamp: 1,
});
const textOf = (m: AgentMessage): string => (m as { content: { text?: string }[] }).content[0]?.text ?? "";

async function rejects(p: Promise<unknown>, code: string): Promise<void> {
  await expect(p).rejects.toMatchObject({ code });
}

/** How deep a JSON value nests (the engine refuses frames deeper than 128). */
function jsonDepth(v: unknown): number {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(jsonDepth));
  if (v && typeof v === "object") return 1 + Math.max(0, ...Object.values(v).map(jsonDepth));
  return 0;
}

/** Every entry id of a nested tree, in depth-first order. */
function idsOf(branches: TreeBranch[]): string[] {
  return branches.flatMap((b) => [...b.entries.map((e) => e.entry_id), ...idsOf(b.children)]);
}

export function sessionTreeConformance(open: () => SqlStore): void {
  describe("the session tree: fork, clone, branches, export", () => {
    let store: SessionStore;
    let tree: SessionTreeStore;
    let clock = 50_000;
    beforeAll(() => {
      const sql = open();
      const now = () => ++clock;
      store = new SessionStore(sql, { now });
      tree = new SessionTreeStore(sql, { now });
    });

    const texts = async (sid: string, branch_leaf?: string) =>
      (await store.messages(sid, branch_leaf ? { branch_leaf } : {})).messages.map((m) => textOf(m.message));
    const ids = async (sid: string) => (await store.messages(sid)).messages.map((m) => m.entry_id);

    /** u1 a1 u2 a2 u3 a3, deterministic ids like the orchestrator's. */
    async function threeTurns(sid: string): Promise<void> {
      await store.ensure(sid, { display_name: "Trip", cwd: "/work" });
      for (const k of [1, 2, 3]) {
        await store.appendMany(sid, [
          { entry_id: `e_m${k}_user_0`, message: user(`question ${k}`) },
          { entry_id: `e_m${k}_1_assistant`, message: assistant(`answer ${k}`) },
        ]);
      }
    }

    it("fork from entry k: a new session with the path up to k, ids remapped deterministically; the source untouched", async () => {
      await threeTurns("t-src");
      const before = await store.get("t-src");
      const fork = await tree.fork("t-src", "e_m2_1_assistant");
      expect(fork).toMatchObject({
        kind: "fork",
        source_session_id: "t-src",
        from_entry_id: "e_m2_1_assistant",
        entry_count: 4,
        created: true,
        leaf_id: "e_m2_1_assistant~3",
      });
      expect(fork.session_id).toBe(await derivedSessionId("fork", "t-src", "e_m2_1_assistant", undefined));
      expect(await texts(fork.session_id)).toEqual(["question 1", "answer 1", "question 2", "answer 2"]);
      expect(await ids(fork.session_id)).toEqual(["e_m1_user_0~0", "e_m1_1_assistant~1", "e_m2_user_0~2", "e_m2_1_assistant~3"]);
      expect((await tree.entry(fork.session_id, "e_m2_user_0~2"))?.parent_id).toBe("e_m1_1_assistant~1");
      expect(await store.get(fork.session_id)).toMatchObject({
        display_name: "Trip (fork)",
        cwd: "/work",
        entry_count: 4,
        branch_count: 1,
        leaf_id: "e_m2_1_assistant~3",
        last_message_summary: "answer 2",
        origin: { kind: "fork", source_session_id: "t-src", from_entry_id: "e_m2_1_assistant" },
      });
      // The source is as it was.
      expect(await store.get("t-src")).toEqual(before);
      expect(await texts("t-src")).toEqual(["question 1", "answer 1", "question 2", "answer 2", "question 3", "answer 3"]);
      // Each goes on independently: an append to the fork hangs under its leaf.
      await store.append(fork.session_id, { entry_id: "f1", message: user("fork only") });
      await store.append("t-src", { entry_id: "s1", message: user("source only") });
      expect(await texts(fork.session_id)).toEqual(["question 1", "answer 1", "question 2", "answer 2", "fork only"]);
      expect((await texts("t-src")).at(-1)).toBe("source only");
      expect(await texts("t-src")).not.toContain("fork only");
    });

    it("forking twice with the same request answers the same copy; another request key makes another", async () => {
      await threeTurns("t-idem");
      const first = await tree.fork("t-idem", "e_m1_1_assistant");
      const again = await tree.fork("t-idem", "e_m1_1_assistant");
      expect(again).toEqual({ ...first, created: false });
      expect((await store.get(first.session_id))?.entry_count).toBe(2);
      const other = await tree.fork("t-idem", "e_m1_1_assistant", { request_key: "second try" });
      expect(other.session_id).not.toBe(first.session_id);
      expect(other.created).toBe(true);
      // Concurrent identical forks make one copy.
      const racing = await Promise.all(Array.from({ length: 5 }, () => tree.fork("t-idem", "e_m3_user_0")));
      expect(new Set(racing.map((r) => r.session_id)).size).toBe(1);
      expect(racing.filter((r) => r.created)).toHaveLength(1);
      expect(await ids(racing[0]!.session_id)).toHaveLength(5);
      // A named copy; the name taken by a session that is not this copy is refused, nothing changes.
      expect(await tree.fork("t-idem", "e_m2_user_0", { new_session_id: "t-idem-named", display_name: "Named" })).toMatchObject({
        session_id: "t-idem-named",
        created: true,
      });
      expect(await tree.fork("t-idem", "e_m2_user_0", { new_session_id: "t-idem-named" })).toMatchObject({ created: false });
      await rejects(tree.fork("t-idem", "e_m3_user_0", { new_session_id: "t-idem-named" }), "session_exists");
      await store.ensure("t-plain");
      await rejects(tree.fork("t-idem", "e_m1_user_0", { new_session_id: "t-plain" }), "session_exists");
      expect(await store.get("t-plain")).toMatchObject({ entry_count: 0 });
      expect(await store.get("t-plain")).not.toHaveProperty("origin");
      expect(await store.get("t-idem-named")).toMatchObject({ display_name: "Named", entry_count: 3 });
    });

    it("fork refuses an unknown source or entry, and a copy onto its source; nothing is written", async () => {
      await threeTurns("t-err");
      await rejects(tree.fork("t-nope", "e_m1_user_0"), "not_found");
      await rejects(tree.fork("t-err", "ghost"), "not_found");
      await rejects(tree.fork("t-err", "e_m1_user_0", { new_session_id: "t-err" }), "invalid_arguments");
      expect(await store.get(await derivedSessionId("fork", "t-err", "ghost", undefined))).toBeNull();
      expect(await store.get("t-err")).toMatchObject({ entry_count: 6 });
    });

    it("fork from any entry, also off the active branch; a fork of a fork keeps short ids", async () => {
      await store.ensure("t-any");
      await store.append("t-any", { entry_id: "r", message: user("root") });
      await store.append("t-any", { entry_id: "a", message: assistant("first answer") });
      await store.append("t-any", { entry_id: "b", message: assistant("second answer") }, "r");
      const offBranch = await tree.fork("t-any", "a");
      expect(await texts(offBranch.session_id)).toEqual(["root", "first answer"]);
      const root = await tree.fork("t-any", "r");
      expect(await texts(root.session_id)).toEqual(["root"]);
      const twice = await tree.fork(offBranch.session_id, "a~1");
      expect(await ids(twice.session_id)).toEqual(["r~0", "a~1"]);
      expect(copyEntryId("e_x~7~9", 2)).toBe("e_x~2");
      expect(copyEntryId("x".repeat(300), 12)).toBe(`${"x".repeat(200)}~12`);
    });

    it("a copied compaction names the copy of its tail start", async () => {
      await threeTurns("t-comp");
      const compaction = new CompactionStore(open(), { now: () => ++clock });
      await compaction.compact(
        sessionCompactRequest.parse({
          session_id: "t-comp",
          entry_id: "c1",
          summary: "they talked",
          tokens_before: 900,
          tail_start_id: "e_m3_user_0",
        }),
      );
      await store.append("t-comp", { entry_id: "after", message: user("after compaction") });
      const fork = await tree.fork("t-comp", "after");
      const copied = await tree.entry(fork.session_id, "c1~6");
      expect(copied).toMatchObject({ kind: "compaction", parent_id: "e_m3_1_assistant~5" });
      expect((copied?.data as { content: { tail_start_id: string } } | undefined)?.content.tail_start_id).toBe("e_m3_user_0~4");
      const listed = await new CompactionStore(open()).compactions({ session_id: fork.session_id });
      expect(listed.compactions.map((c) => [c.entry_id, c.tail_start_id])).toEqual([["c1~6", "e_m3_user_0~4"]]);
    });

    it("clone copies every branch with remapped ids and keeps the active leaf", async () => {
      await store.ensure("t-clone", { display_name: "Orig" });
      await store.append("t-clone", { entry_id: "r", message: user("root") });
      await store.append("t-clone", { entry_id: "a", message: assistant("A") });
      await store.append("t-clone", { entry_id: "b", message: assistant("B") }, "r");
      const clone = await tree.clone("t-clone");
      expect(clone).toMatchObject({
        kind: "clone",
        source_session_id: "t-clone",
        from_entry_id: null,
        entry_count: 3,
        created: true,
        leaf_id: "b~3",
      });
      expect(await store.get(clone.session_id)).toMatchObject({
        display_name: "Orig (copy)",
        branch_count: 2,
        entry_count: 3,
        origin: { kind: "clone", from_entry_id: null },
      });
      expect(await texts(clone.session_id)).toEqual(["root", "B"]);
      expect(await texts(clone.session_id, "a~2")).toEqual(["root", "A"]);
      const ids = idsOf((await tree.tree(clone.session_id)).roots);
      expect(ids.sort()).toEqual(["a~2", "b~3", "r~1"]);
      expect(await tree.clone("t-clone")).toEqual({ ...clone, created: false });
      // A clone is not a fork: the same name is refused for the other kind.
      await rejects(tree.fork("t-clone", "r", { new_session_id: clone.session_id }), "session_exists");
    });

    it("set_active_leaf switches branch: the path and the next append follow it", async () => {
      await store.ensure("t-leaf");
      await store.append("t-leaf", { entry_id: "r", message: user("root") });
      await store.append("t-leaf", { entry_id: "a1", message: assistant("a1") });
      await store.append("t-leaf", { entry_id: "a2", message: user("a2") });
      await store.append("t-leaf", { entry_id: "b1", message: assistant("b1") }, "r");
      expect(await texts("t-leaf")).toEqual(["root", "b1"]);
      expect(await tree.setActiveLeaf("t-leaf", "a2")).toEqual({
        session_id: "t-leaf",
        leaf_id: "a2",
        previous_leaf_id: "b1",
        changed: true,
      });
      expect(await texts("t-leaf")).toEqual(["root", "a1", "a2"]);
      expect(await tree.setActiveLeaf("t-leaf", "a2")).toMatchObject({ changed: false });
      // An inner entry: the next append starts a branch under it.
      await tree.setActiveLeaf("t-leaf", "a1");
      await store.append("t-leaf", { entry_id: "c2", message: user("c2") });
      expect(await texts("t-leaf")).toEqual(["root", "a1", "c2"]);
      expect(await store.get("t-leaf")).toMatchObject({ branch_count: 3, leaf_id: "c2" });
      // A compare-and-set that lost changes nothing.
      await rejects(tree.setActiveLeaf("t-leaf", "b1", "a2"), "leaf_conflict");
      expect((await store.get("t-leaf"))?.leaf_id).toBe("c2");
      expect(await tree.setActiveLeaf("t-leaf", "b1", "c2")).toMatchObject({ leaf_id: "b1", previous_leaf_id: "c2" });
      await rejects(tree.setActiveLeaf("t-leaf", "ghost"), "not_found");
      await rejects(tree.setActiveLeaf("t-nope", "r"), "not_found");
      expect((await store.get("t-leaf"))?.leaf_id).toBe("b1");
      // No leaf: the next append is a second root (re-asking the first message).
      await tree.setActiveLeaf("t-leaf", null);
      expect(await texts("t-leaf")).toEqual([]);
      await store.append("t-leaf", { entry_id: "r2", message: user("root, edited") });
      expect(await texts("t-leaf")).toEqual(["root, edited"]);
      expect((await tree.entry("t-leaf", "r2"))?.parent_id).toBeNull();
      expect((await tree.tree("t-leaf")).roots.map((b) => b.entries[0]!.entry_id)).toEqual(["r", "r2"]);
    });

    it("branches lists every tip newest first with where it left the others", async () => {
      await store.ensure("t-tips");
      await store.append("t-tips", { entry_id: "r", message: user("root") });
      await store.append("t-tips", { entry_id: "a", message: assistant("answer A") });
      await store.append("t-tips", {
        entry_id: "a2",
        message: {
          role: "assistant",
          content: [
            { type: "function_call", id: "c1", function_id: "agent_trigger", arguments: { function: "weather::forecast", payload: {} } },
          ],
          stop_reason: "function_call",
          model: "m",
          provider: "p",
          timestamp: 1,
        },
      });
      await store.append("t-tips", { entry_id: "b", message: assistant("answer   B\nsecond line") }, "r");
      await store.append("t-tips", { entry_id: "c", message: user("C") }, "a");
      const b = await tree.branches("t-tips");
      expect(b).toMatchObject({ session_id: "t-tips", leaf_id: "c", total: 3 });
      expect(b.branches.map((x) => [x.leaf_id, x.fork_point_id, x.active])).toEqual([
        ["c", "a", true],
        ["b", "r", false],
        ["a2", "a", false],
      ]);
      expect(b.branches[1]).toMatchObject({ role: "assistant", preview: "answer B second line", depth: 1 });
      expect(b.branches[2]).toMatchObject({ call: "weather::forecast" });
      expect(b.branches[2]).not.toHaveProperty("preview");
      await store.ensure("t-one");
      await store.append("t-one", { entry_id: "only", message: user("only") });
      expect((await tree.branches("t-one")).branches).toMatchObject([{ leaf_id: "only", fork_point_id: null, active: true }]);
      expect(await tree.branches("t-nothing-yet").catch((e: unknown) => (e as { code: string }).code)).toBe("not_found");
    });

    it("tree nests branches (not entries): a long path is one branch, children start at fork points", async () => {
      await store.ensure("t-tree");
      await store.appendMany(
        "t-tree",
        Array.from({ length: 60 }, (_, i) => ({ entry_id: `l${i}`, message: i % 2 ? assistant(`reply ${i}`) : user(`say ${i}`) })),
      );
      await store.appendMany(
        "t-tree",
        Array.from({ length: 60 }, (_, i) => ({ entry_id: `m${i}`, message: user(`more ${i}`) })),
      );
      await store.append("t-tree", { entry_id: "side", message: user("a side <branch>") }, "l29");
      const t = await tree.tree("t-tree");
      expect(t).toMatchObject({ session_id: "t-tree", leaf_id: "side", entry_count: 121 });
      expect(t.roots).toHaveLength(1);
      const [root] = t.roots;
      expect(root!.entries.map((e) => e.entry_id)).toEqual(Array.from({ length: 30 }, (_, i) => `l${i}`));
      expect(root!.entries.at(-1)).toMatchObject({ entry_id: "l29", child_count: 2, active: true, role: "assistant", preview: "reply 29" });
      expect(root!.children.map((c) => [c.entries[0]!.entry_id, c.entries.length])).toEqual([
        ["l30", 90],
        ["side", 1],
      ]);
      expect(root!.children[0]!.entries.every((e) => e.active === undefined)).toBe(true);
      expect(root!.children[1]!.entries[0]).toMatchObject({ active: true, preview: "a side <branch>", child_count: 0 });
      expect(jsonDepth(t)).toBeLessThan(12);
      // A subtree.
      const sub = await tree.tree("t-tree", "m58");
      expect(sub.roots.map((b) => b.entries.map((e) => e.entry_id))).toEqual([["m58", "m59"]]);
      await rejects(tree.tree("t-tree", "ghost"), "not_found");
      await rejects(tree.tree("t-nope"), "not_found");
      await store.ensure("t-empty");
      expect(await tree.tree("t-empty")).toEqual({ session_id: "t-empty", leaf_id: null, entry_count: 0, roots: [] });
    });

    it(`tree stops nesting at ${MAX_TREE_NESTING} branch levels (the frame depth bound) and goes on from the truncated branch`, async () => {
      await store.ensure("t-deep");
      await store.append("t-deep", { entry_id: "n0", message: user("n0") });
      const levels = MAX_TREE_NESTING + 5;
      for (let i = 1; i <= levels; i++) {
        await store.append("t-deep", { entry_id: `s${i}`, message: user(`side ${i}`) }, `n${i - 1}`);
        await store.append("t-deep", { entry_id: `n${i}`, message: user(`n${i}`) }, `n${i - 1}`);
      }
      const t = await tree.tree("t-deep");
      expect(jsonDepth({ result: t })).toBeLessThan(128);
      let b = t.roots[0]!;
      let nesting = 1;
      while (b.children.length > 0) {
        b = b.children.find((c) => c.entries[0]!.entry_id.startsWith("n"))!;
        nesting++;
      }
      expect(nesting).toBe(MAX_TREE_NESTING);
      expect(b.truncated).toBe(true);
      const last = b.entries.at(-1)!.entry_id;
      const rest = await tree.tree("t-deep", last);
      expect(idsOf(rest.roots)).toContain(`n${levels}`);
    });

    it("get_entry answers one entry or null", async () => {
      await threeTurns("t-entry");
      expect(await tree.entry("t-entry", "e_m2_user_0")).toMatchObject({
        entry_id: "e_m2_user_0",
        parent_id: "e_m1_1_assistant",
        kind: "message",
        depth: 2,
        child_count: 1,
        revision: 0,
        message: { role: "user" },
      });
      expect(await tree.entry("t-entry", "ghost")).toBeNull();
      expect(await tree.entry("t-nope", "e_m2_user_0")).toBeNull();
    });

    it("export renders every message on the path; HTML escapes text and attributes", async () => {
      const sid = "t-export";
      await store.ensure(sid, { display_name: "Q&A <demo>" });
      await store.append(sid, { entry_id: 'e_"<x>"', message: user(`<script>alert("x")</script> & 'quoted'`) });
      await store.append(sid, {
        entry_id: "e2",
        message: callingRound(
          { type: "text", text: "Let me check." },
          { id: "c1", function: "files::read", payload: { path: "/a" } },
          { model: "gpt-4o", provider: "openai", timestamp: 1 },
        ),
      });
      await store.append(sid, {
        entry_id: "e3",
        message: {
          role: "function_result",
          function_call_id: "c1",
          function_id: "files::read",
          content: [{ type: "text", text: "```\nfenced ``` inside\n```" }],
          details: null,
          is_error: false,
          timestamp: 1,
        },
      });
      await store.append(sid, {
        entry_id: "e4",
        message: { role: "custom", custom_type: "note", content: { x: 1 }, display: "a note <b>", timestamp: 1 },
      });
      await store.append(sid, { entry_id: "e5", message: assistant("It says <nothing>.") });
      await store.append(sid, { entry_id: "other", message: user("the other branch") }, "e2");
      await tree.setActiveLeaf(sid, "e5");

      const html = await tree.export(sid, "html");
      expect(html).toMatchObject({ format: "html", content_type: "text/html; charset=utf-8", leaf_id: "e5", entry_count: 5 });
      expect(html.content).toMatch(/^<!doctype html>/);
      expect(html.content).not.toContain("<script>");
      expect(html.content).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;quoted&#39;");
      expect(html.content).toContain('id="entry-e_&quot;&lt;x&gt;&quot;"');
      expect(html.content).toContain("<title>Q&amp;A &lt;demo&gt;</title>");
      for (const t of ["Let me check.", "files::read", "fenced ``` inside", "a note &lt;b&gt;", "It says &lt;nothing&gt;."])
        expect(html.content).toContain(t);
      expect(html.content).not.toContain("the other branch");

      const md = await tree.export(sid, "markdown");
      expect(md.content_type).toBe("text/markdown; charset=utf-8");
      for (const t of [
        `<script>alert("x")</script> & 'quoted'`,
        "Let me check.",
        "It says <nothing>.",
        "a note <b>",
        "## Function result: files::read",
      ])
        expect(md.content).toContain(t);
      // The fence around a result that holds ``` is longer, so the block holds it whole.
      expect(md.content).toContain("````text\n```\nfenced ``` inside\n```\n````");

      const json = JSON.parse((await tree.export(sid, "json")).content) as {
        display_name: string;
        entries: { entry_id: string; message: AgentMessage }[];
      };
      expect(json.display_name).toBe("Q&A <demo>");
      expect(json.entries.map((e) => e.entry_id)).toEqual(['e_"<x>"', "e2", "e3", "e4", "e5"]);

      const other = await tree.export(sid, "markdown", "other");
      expect(other.content).toContain("the other branch");
      expect(other.content).not.toContain("It says");
      await rejects(tree.export(sid, "html", "ghost"), "not_found");
      await rejects(tree.export("t-nope", "html"), "not_found");
      await store.ensure("t-export-empty");
      expect(await tree.export("t-export-empty", "json")).toMatchObject({ entry_count: 0, leaf_id: null });
    });
  });
}
