// The pipeline against an in-memory engine with the real session-storage worker: prune first,
// summarise the head (updating the previous summary), persist, the lease, the per-turn path.
import {
  COMPACTION_SUMMARY_TAG,
  PRUNED_OUTPUT_TEXT,
  type AgentMessage,
  type CompactionRecord,
  type CompactNowResult,
} from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";
import { tryLease, COMPACTION_LEASE_SCOPE } from "../src/lease.ts";
import { counterFor } from "../src/tokens.ts";
import { fakeEngine } from "./support/fake-engine.ts";
import { said, TINY } from "./support/fixtures.ts";

/** TINY's limits as a caller names them (support/fixtures.ts has what they give). */
const MODEL = { id: TINY.id, providerID: "openai", limit: { context: 4_000, output: 500 } };

const words = (marker: string, n: number) => `${marker}:${" alpha".repeat(n)}`;
const user = (text: string): AgentMessage => ({ role: "user", content: [{ type: "text", text }], timestamp: 1 });
const calls = (id: string, fn: string): AgentMessage => ({
  role: "assistant",
  content: [{ type: "function_call", id, function_id: "agent_trigger", arguments: { function: fn, payload: { path: `/src/${id}.ts` } } }],
  stop_reason: "function_call",
  model: TINY.id,
  provider: "openai",
  timestamp: 1,
});
const output = (id: string, fn: string, text: string): AgentMessage => ({
  role: "function_result",
  function_call_id: id,
  function_id: fn,
  content: [{ type: "text", text }],
  details: { size: text.length },
  is_error: false,
  timestamp: 1,
});

type Engine = ReturnType<typeof fakeEngine>;
async function session(e: Engine, sid: string, entries: [string, AgentMessage][]): Promise<void> {
  await e.call("session-tree::ensure", { session_id: sid });
  await append(e, sid, entries);
}
const append = (e: Engine, sid: string, entries: [string, AgentMessage][]) =>
  e.call("session-tree::append_many", { session_id: sid, entries: entries.map(([entry_id, message]) => ({ entry_id, message })) });
const compactNow = (e: Engine, sid: string, extra: Record<string, unknown> = {}) =>
  e.call<CompactNowResult>("context-compaction::compact_now", { session_id: sid, model: MODEL, ...extra });
const compactions = async (e: Engine, sid: string) =>
  (await e.call<{ compactions: CompactionRecord[] }>("session-tree::compactions", { session_id: sid })).compactions;
const pathOf = async (e: Engine, sid: string) =>
  (await e.call<{ messages: { entry_id: string; message: AgentMessage }[] }>("session-tree::messages", { session_id: sid })).messages;

/** Turn k: a user message and an answer of ~`n` tokens, each marked `U<k>` / `A<k>`. */
const turn = (k: number, n = 800): [string, AgentMessage][] => [
  [`u${k}`, user(words(`U${k}`, 20))],
  [`a${k}`, said(words(`A${k}`, n))],
];

describe("compact_now", () => {
  it("a request that fits is left alone (exact count, no summariser call)", async () => {
    const e = fakeEngine({ models: [TINY] });
    await session(e, "s", [...turn(1, 100), ...turn(2, 100)]);
    const r = await compactNow(e, "s", { system_prompt: "You are terse.", tools: [] });
    expect(r.status).toBe("fits");
    const c = await counterFor({ id: TINY.id, provider: "openai" });
    const path = await pathOf(e, "s");
    expect(r).toEqual({
      status: "fits",
      tokens: c.request({ system: "You are terse.", messages: path.map((p) => p.message), tools: [] }),
      usable: 3_100,
    });
    expect(e.summaries).toHaveLength(0);
  });

  it("summarises the head, keeps the tail verbatim, and the next compaction updates that summary", async () => {
    const e = fakeEngine({ models: [TINY] });
    await session(e, "s", [...turn(1), ...turn(2), ...turn(3), ...turn(4)]);
    e.script.push({ text: "## Goal\n- SUMMARY-ONE" });
    const r1 = await compactNow(e, "s");
    expect(r1).toMatchObject({
      status: "ok",
      tail_start_id: "u4",
      auto_continued: false,
      summary_text: "## Goal\n- SUMMARY-ONE",
      pruned_parts: 0,
    });
    if (r1.status !== "ok") throw new Error("no compaction");
    expect(r1.tokens_after).toBeLessThan(3_100);
    expect(r1.tokens_before).toBeGreaterThanOrEqual(3_100);
    // The summariser: the session's model, no tools, a fresh summary of turns 1–3 only.
    expect(e.summaries).toHaveLength(1);
    const [first] = e.summaries;
    expect(first.model).toBe(TINY.id);
    expect(first.system_prompt).toContain("Create a new summary");
    for (const section of ["## Goal", "## Constraints & Preferences", "### In Progress", "## Relevant Files"])
      expect(first.system_prompt).toContain(section);
    expect(first.user_prompt).toMatch(/^<conversation>\n\[user\] U1:/);
    expect(first.user_prompt).toContain("[assistant] A3:");
    expect(first.user_prompt).not.toContain("U4:");
    expect(first.max_tokens).toBe(620);
    // Stored: one compaction entry (the new leaf), the raw path untouched.
    const [c1] = await compactions(e, "s");
    expect(c1).toMatchObject({
      entry_id: r1.compaction_entry_id,
      summary: "## Goal\n- SUMMARY-ONE",
      tail_start_id: "u4",
      after_message_id: "a4",
      tokens_before: r1.tokens_before,
    });
    expect((await pathOf(e, "s")).map((p) => p.entry_id)).toEqual(["u1", "a1", "u2", "a2", "u3", "a3", "u4", "a4"]);
    expect((e.state.get(`last_compaction_at\u0000s`) as { entry_id: string }).entry_id).toBe(r1.compaction_entry_id);

    // Three more turns: the window (summary + turns 4–7) overflows again.
    await append(e, "s", [...turn(5), ...turn(6), ...turn(7)]);
    e.script.push({ text: "## Goal\n- SUMMARY-TWO" });
    const r2 = await compactNow(e, "s");
    expect(r2).toMatchObject({ status: "ok", tail_start_id: "u7", summary_text: "## Goal\n- SUMMARY-TWO" });
    const second = e.summaries[1];
    // Update, not re-summarise: the previous summary and only the messages after its tail start.
    expect(second.system_prompt).toContain("Update that previous summary");
    expect(second.system_prompt).toContain("<previous-summary>\n## Goal\n- SUMMARY-ONE\n</previous-summary>");
    expect(second.user_prompt).toContain("[user] U4:");
    expect(second.user_prompt).toContain("[assistant] A6:");
    expect(second.user_prompt).not.toContain("U1:");
    expect(second.user_prompt).not.toContain("A3:");
    expect(second.user_prompt).not.toContain("U7:");
    const all = await compactions(e, "s");
    expect(all.map((c) => c.summary)).toEqual(["## Goal\n- SUMMARY-ONE", "## Goal\n- SUMMARY-TWO"]);
  });

  it("prunes large old outputs first; when that is enough no summary is made", async () => {
    const e = fakeEngine({ models: [TINY] });
    const big = " alpha".repeat(1_000);
    await session(e, "p", [
      ["u1", user("U1: read the files")],
      ["c1", calls("k1", "files::read")],
      ["r1", output("k1", "files::read", `R1:${big}`)],
      ["c2", calls("k2", "files::read")],
      ["r2", output("k2", "files::read", `R2:${big}`)],
      ["c3", calls("k3", "files::read")],
      ["r3", output("k3", "files::read", `R3:${big}`)],
      ["a1", said("A1: read three")],
      ["u2", user("U2: next")],
      ["a2", said("A2: ok")],
      ["u3", user("U3: and now")],
      ["a3", said("A3: sure")],
    ]);
    const r = await compactNow(e, "p");
    // r3 is within the newest 1 240 output tokens (protected); r2 and r1 are pruned.
    expect(r).toMatchObject({ status: "pruned", pruned_parts: 2 });
    if (r.status !== "pruned") throw new Error("not pruned");
    expect(r.tokens_after).toBeLessThanOrEqual(0.75 * 3_100);
    expect(e.summaries).toHaveLength(0);
    const byId = new Map((await pathOf(e, "p")).map((m) => [m.entry_id, m.message]));
    const r1 = byId.get("r1") as Extract<AgentMessage, { role: "function_result" }>;
    expect(r1.content).toEqual([{ type: "text", text: PRUNED_OUTPUT_TEXT }]);
    expect(r1.details).toMatchObject({ size: `R1:${big}`.length, compacted_at: expect.any(Number) });
    expect((byId.get("r3") as Extract<AgentMessage, { role: "function_result" }>).content[0]).toMatchObject({
      text: expect.stringMatching(/^R3:/),
    });
    expect(await compactions(e, "p")).toEqual([]);
  });

  it("the request being answered summarised away → a continue prompt quoting it, under the compaction entry", async () => {
    const e = fakeEngine({ models: [TINY] });
    const rounds: [string, AgentMessage][] = [];
    for (let k = 1; k <= 6; k++)
      rounds.push([`c${k}`, calls(`k${k}`, "files::write")], [`r${k}`, output(`k${k}`, "files::write", `R${k}:${" alpha".repeat(500)}`)]);
    await session(e, "one", [["u1", user("U1: refactor the parser")], ...rounds]);
    const r = await compactNow(e, "one", { last_user_message_id: "u1", system_prompt: "sys" });
    expect(r).toMatchObject({ status: "ok", auto_continued: true });
    if (r.status !== "ok") throw new Error("no compaction");
    // The tail starts inside the one long turn, at an assistant message (never at a result).
    expect(r.tail_start_id).toMatch(/^c\d$/);
    const path = await pathOf(e, "one");
    const last = path.at(-1)!;
    expect(last.entry_id).toBe(`${r.compaction_entry_id}-continue`);
    expect(JSON.stringify(last.message)).toContain("U1: refactor the parser");
    expect(last.message).toMatchObject({ role: "user", origin: { synthetic: true } });
    // Modified files of the summarised calls are carried in the entry's details.
    const [c] = await compactions(e, "one");
    expect(c.details.modified_files).toContain("/src/k1.ts");
  });

  it("one compaction per session: the lease has exactly one winner; compact_now answers busy past its wait", async () => {
    const e = fakeEngine({ models: [TINY], config: { busyTimeoutMs: 0 } });
    const trigger = <I, O>(r: { function_id: string; payload?: I }) => e.call<O>(r.function_id, r.payload);
    const leases = await Promise.all(Array.from({ length: 8 }, () => tryLease(trigger, COMPACTION_LEASE_SCOPE, "l")));
    expect(leases.filter(Boolean)).toHaveLength(1);
    await session(e, "l", [...turn(1), ...turn(2), ...turn(3), ...turn(4)]);
    expect(await compactNow(e, "l")).toEqual({ status: "busy" });
    await leases.find(Boolean)!.release();
    expect((await compactNow(e, "l")).status).toBe("ok");
  });

  it("a window that cannot fit even compacted is an overflow", async () => {
    const e = fakeEngine({ models: [TINY] });
    await session(e, "o", [...turn(1), ...turn(2), ...turn(3), ...turn(4)]);
    const r = await compactNow(e, "o", { system_prompt: " alpha".repeat(3_600) });
    expect(r).toMatchObject({ status: "overflow", limit: 3_500 });
    expect(e.summaries).toHaveLength(0); // nothing a summary could fix: the model is not asked
  });

  it("the summariser is retried once for a transient error; a permanent one fails and appends nothing", async () => {
    const e = fakeEngine({ models: [TINY] });
    await session(e, "t", [...turn(1), ...turn(2), ...turn(3), ...turn(4)]);
    e.script.push({ error: "transient" }, { text: "S" });
    expect((await compactNow(e, "t")).status).toBe("ok");
    expect(e.summaries).toHaveLength(2);
    const e2 = fakeEngine({ models: [TINY] });
    await session(e2, "t", [...turn(1), ...turn(2), ...turn(3), ...turn(4)]);
    e2.script.push({ error: "auth_expired" });
    await expect(compactNow(e2, "t")).rejects.toMatchObject({ code: "summary_failed" });
    expect(e2.summaries).toHaveLength(1);
    expect(await compactions(e2, "t")).toEqual([]);
    // and the lease was released: the next attempt runs
    expect((await compactNow(e2, "t")).status).toBe("ok");
  });

  it("bad input is a typed error and changes nothing", async () => {
    const e = fakeEngine({ models: [TINY] });
    await expect(e.call("context-compaction::compact_now", { session_id: "x" })).rejects.toMatchObject({ code: "invalid_input" });
    await expect(e.call("context-compaction::compact_now", { session_id: "a/b", model: MODEL })).rejects.toMatchObject({
      code: "invalid_input",
    });
  });
});

describe("once per turn: on_turn_end → compact_async", () => {
  const envelope = (sid: string, id: string, usage: { input: number; output: number }, startedAt: number) => ({
    type: "stream",
    timestamp: startedAt + 10,
    streamName: "agent::turn_end",
    groupId: sid,
    id,
    event: { type: "create", data: { type: "turn_end", message: { ...said("done"), usage, timestamp: startedAt }, function_results: [] } },
  });

  it("usage past the usable window compacts in the background and writes compaction_done right after the turn_end", async () => {
    let clock = 1_000;
    const e = fakeEngine({ models: [TINY], now: () => clock });
    await session(e, "a", [...turn(1), ...turn(2), ...turn(3), ...turn(4)]);
    // under the threshold: nothing happens
    await e.call("context-compaction::on_turn_end", envelope("a", "a-000000000007", { input: 2_000, output: 100 }, 900));
    await e.settled();
    expect(e.calls).not.toContain("context-compaction::compact_async");
    // past it
    clock = 2_000;
    await e.call("context-compaction::on_turn_end", envelope("a", "a-000000000012", { input: 3_050, output: 100 }, 1_500));
    await e.settled();
    expect(e.summaries).toHaveLength(1);
    const done = e.streams.find((s) => s.stream_name === "agent::events");
    expect(done).toMatchObject({
      group_id: "a",
      item_id: "a-0000000000121",
      data: { type: "compaction_done", mode: "async", compaction_entry_id: "cmp_a-000000000012", tail_start_id: "u4" },
    });
    expect((done!.data as { tokens_before: number }).tokens_before).toBeGreaterThanOrEqual(3_150);
    expect(done!.item_id > "a-000000000012" && done!.item_id < "a-000000000013").toBe(true);
    // a turn whose round began before that compaction reports a window that no longer exists
    clock = 3_000;
    await e.call("context-compaction::on_turn_end", envelope("a", "a-000000000020", { input: 3_050, output: 100 }, 1_900));
    await e.settled();
    expect(e.summaries).toHaveLength(1);
    // non-turn_end frames and frames without usage are ignored
    expect(
      await e.call("context-compaction::on_turn_end", {
        ...envelope("a", "a-1", { input: 9_999, output: 1 }, 1),
        event: { type: "delete", data: null },
      }),
    ).toBeNull();
    const noUsage = envelope("a", "a-2", { input: 9_999, output: 1 }, 5_000);
    delete (noUsage.event.data.message as { usage?: unknown }).usage;
    expect(await e.call("context-compaction::on_turn_end", noUsage)).toBeNull();
    await e.settled();
    expect(e.calls.filter((c) => c === "context-compaction::compact_async")).toHaveLength(2);
  });

  it("a manual /compact always summarises and anchors its event on the last turn_end", async () => {
    const e = fakeEngine({ models: [TINY] });
    await session(e, "m", [...turn(1, 100), ...turn(2, 100), ...turn(3, 100)]);
    await e.call("stream::set", { stream_name: "agent::turn_end", group_id: "m", item_id: "m-000000000003", data: { type: "turn_end" } });
    const r = await e.call<CompactNowResult>("context-compaction::compact_session", { session_id: "m" });
    expect(r.status).toBe("ok");
    expect(e.streams.find((s) => s.stream_name === "agent::events")).toMatchObject({
      item_id: "m-0000000000032",
      data: { type: "compaction_done" },
    });
  });
});

describe("the view the model reads", () => {
  it("is the summary then the path from the tail; with no tail, the path after the compaction entry", async () => {
    const e = fakeEngine({ models: [TINY] });
    await session(e, "v", [...turn(1), ...turn(2)]);
    await e.call("session-tree::compact", { session_id: "v", summary: "S1", tokens_before: 10, tail_start_id: null });
    await append(e, "v", turn(3, 10));
    const { compactionView } = await import("@iii-edge/protocol/harness");
    const [latest] = await compactions(e, "v");
    const view = compactionView(await pathOf(e, "v"), latest);
    expect(view.summary?.message).toMatchObject({
      role: "assistant",
      content: [{ type: "text", text: `<${COMPACTION_SUMMARY_TAG}>\nS1\n</${COMPACTION_SUMMARY_TAG}>` }],
    });
    expect(view.messages.map((m) => m.entry_id)).toEqual(["u3", "a3"]);
  });
});
