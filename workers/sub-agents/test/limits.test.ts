// The sub-agents' rules as plain logic: child ids are deterministic (one spawn, one child), the
// depth bound, who may act on whose children, a budget share, and which results park a call.
import { HARNESS_JOIN, HARNESS_SPAWN, isJoinPending, SUB_AGENT_MAX_DEPTH } from "@iii-edge/protocol/harness";
import { subAgentMessageId, subAgentSessionId } from "../src/ids.ts";
import { describe, expect, it } from "vitest";
import { allotment, childBudgetId } from "../src/budget.ts";
import { childDepth, parentOf } from "../src/index.ts";

const codeOf = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    return (e as { code?: string }).code;
  }
  return undefined;
};

describe("child session ids", () => {
  it("are the same for the same spawn, and differ for another call, another run or another parent", async () => {
    const a = await subAgentSessionId("chat-1", "run-1", "call_1");
    expect(await subAgentSessionId("chat-1", "run-1", "call_1")).toBe(a);
    const others = await Promise.all([
      subAgentSessionId("chat-1", "run-1", "call_2"),
      subAgentSessionId("chat-1", "run-2", "call_1"),
      subAgentSessionId("chat-2", "run-1", "call_1"),
    ]);
    expect(new Set([a, ...others]).size).toBe(4);
    expect(a).toMatch(/^chat-1~[0-9a-f]{20}$/);
  });

  it("fit a session id (≤ 128, no '/') however deep and however long the parent's id", async () => {
    let id = "r".repeat(128);
    for (let depth = 1; depth <= SUB_AGENT_MAX_DEPTH; depth++) {
      const next = await subAgentSessionId(id, "run", "call");
      expect(next.length).toBeLessThanOrEqual(128);
      expect(next).not.toContain("/");
      expect(next).not.toBe(id);
      id = next;
    }
    // Cut parents that share a head still name different children (the digest covers the whole id).
    expect(await subAgentSessionId(`${"x".repeat(128)}`, "r", "c")).not.toBe(await subAgentSessionId(`${"x".repeat(127)}y`, "r", "c"));
  });

  it("a child's run id and budget id follow from its session id", async () => {
    const child = await subAgentSessionId("p", "r", "c");
    expect(await subAgentMessageId(child)).toBe(await subAgentMessageId(child));
    expect(await subAgentMessageId(child)).toMatch(/^sa_[0-9a-f]{20}$/);
    expect(await childBudgetId(child)).toMatch(/^sa-[0-9a-f]{24}$/);
  });
});

describe("depth", () => {
  it(`a root's child is depth 1; depth ${SUB_AGENT_MAX_DEPTH} is the deepest; deeper is depth_exceeded with what to do`, () => {
    expect(childDepth(undefined)).toBe(1);
    expect(childDepth({ depth: SUB_AGENT_MAX_DEPTH - 1 })).toBe(SUB_AGENT_MAX_DEPTH);
    expect(codeOf(() => childDepth({ depth: SUB_AGENT_MAX_DEPTH }))).toBe("depth_exceeded");
    expect(() => childDepth({ depth: SUB_AGENT_MAX_DEPTH })).toThrow(/at most 3 deep.*do this part of the task yourself/);
  });
});

describe("whose children", () => {
  it("a model acts on its own session's children; a worker names the parent; a mismatch is forbidden", () => {
    const model = { session_id: "s1" };
    expect(parentOf({}, HARNESS_SPAWN, model)).toBe("s1");
    expect(parentOf({ parent_session_id: "s1" }, HARNESS_SPAWN, model)).toBe("s1");
    expect(parentOf({ parent_session_id: "p" }, HARNESS_SPAWN)).toBe("p");
    expect(codeOf(() => parentOf({ parent_session_id: "s2" }, HARNESS_SPAWN, model))).toBe("forbidden");
    expect(codeOf(() => parentOf({}, HARNESS_SPAWN))).toBe("invalid_input");
  });
});

describe("budget share", () => {
  const parent = { ok: true as const, budget_id: "b1", remaining_micros: 1_000_000, period: "day" };
  const sibling = (allotted: number, ended = false) => ({
    child_session_id: `c${allotted}`,
    run_id: "r",
    created_at_ms: 0,
    ended,
    allotted_micros: allotted,
  });

  it("is a share of what the parent has left minus what live siblings hold", () => {
    expect(allotment(parent, 0.5, [])).toBe(500_000);
    expect(allotment(parent, 0.5, [sibling(600_000)])).toBe(200_000);
    expect(allotment(parent, 0.5, [sibling(600_000, true)])).toBe(500_000); // an ended sibling gave its part back
  });

  it("nothing left is budget_exhausted", () => {
    expect(codeOf(() => allotment(parent, 1, [sibling(1_000_000)]))).toBe("budget_exhausted");
    expect(codeOf(() => allotment({ ...parent, remaining_micros: -5 }, 1, []))).toBe("budget_exhausted");
  });
});

describe("which results park a call", () => {
  const p = { pending: true, held_by: HARNESS_JOIN, child_session_id: "c", state: "assistant_streaming", message: "…" };
  it("only harness::join's own pending answer", () => {
    expect(isJoinPending(HARNESS_JOIN, p)).toBe(true);
    expect(isJoinPending("my::function", p)).toBe(false); // no other function can get itself called twice
    expect(isJoinPending(HARNESS_JOIN, { ...p, pending: false })).toBe(false);
    expect(isJoinPending(HARNESS_JOIN, { state: "stopped", final_message: "done" })).toBe(false);
    expect(isJoinPending(HARNESS_JOIN, null)).toBe(false);
  });
});
