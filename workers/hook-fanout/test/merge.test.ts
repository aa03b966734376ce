// The merge rules (docs/harness-contracts.md §6.3) and the collector's de-duplication, at the layer that owns
// them: pure functions and the in-process collector, no engine.
import { MERGE_RULES } from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";
import { Collectors, FINISHED_EVENTS_REMEMBERED, ReplyCollector } from "../src/collector.ts";
import { fieldMerge, firstBlockWins, merge, parseMergeRule, pipelineLastWins } from "../src/merge.ts";

describe("merge rule names", () => {
  it("parses the three names, nothing else", () => {
    for (const r of MERGE_RULES) expect(parseMergeRule(r)).toBe(r);
    for (const bad of ["", "FIRST_BLOCK_WINS", "first-block-wins", "last_wins", 3, null, undefined])
      expect(parseMergeRule(bad)).toBeUndefined();
  });
});

describe("first_block_wins", () => {
  it("the first blocking reply, kept whole; later blockers and non-blockers ignored", () => {
    const first = { block: true, reason: "no prod", denial: { rule: "r1" } };
    expect(firstBlockWins([{ block: false }, "junk", first, { block: true, reason: "second" }])).toBe(first);
  });
  it("no blocker (or only truthy non-`true` values) → {block:false}", () => {
    expect(firstBlockWins([])).toEqual({ block: false });
    expect(firstBlockWins([{ block: false }, { block: "yes" }, { block: 1 }, null, [{ block: true }]])).toEqual({ block: false });
  });
});

describe("field_merge", () => {
  const payload = { function_call: { id: "c1" }, content: [{ type: "text", text: "orig" }], details: { a: 1, b: 2 }, terminate: false };
  it("starts from the payload; content replaced, details shallow-merged, terminate overwritten, last writer wins", () => {
    const out = fieldMerge(payload, [
      { content: [{ type: "text", text: "first" }], details: { b: 20, c: 3 } },
      { details: { c: 30 }, terminate: true },
      { content: [{ type: "text", text: "last" }] },
    ]);
    expect(out).toEqual({
      function_call: { id: "c1" },
      content: [{ type: "text", text: "last" }],
      details: { a: 1, b: 20, c: 30 },
      terminate: true,
    });
    expect(payload.details).toEqual({ a: 1, b: 2 }); // the payload is not mutated
  });
  it("ignores replies that are not objects, non-object details and non-boolean terminate", () => {
    expect(fieldMerge(payload, ["x", 3, null, [1], { details: "str", terminate: "yes" }])).toEqual(payload);
  });
  it("no replies → the payload; a payload that is no object starts as {}", () => {
    expect(fieldMerge(payload, [])).toEqual(payload);
    expect(fieldMerge("text", [{ details: { x: 1 } }])).toEqual({ details: { x: 1 } });
    expect(fieldMerge({ details: "not an object" }, [{ details: { x: 1 } }])).toEqual({ details: { x: 1 } });
  });
});

describe("pipeline_last_wins", () => {
  const original = [{ role: "user", content: "hi" }];
  it("the last decodable list wins (an array or {messages})", () => {
    expect(pipelineLastWins({ messages: original }, [[{ n: 1 }], { messages: [{ n: 2 }] }, "junk", { messages: "no" }])).toEqual([
      { n: 2 },
    ]);
    expect(pipelineLastWins({ messages: original }, [{ messages: [{ n: 1 }] }, [{ n: 3 }]])).toEqual([{ n: 3 }]);
  });
  it("nothing decodable → the original list", () => {
    expect(pipelineLastWins({ messages: original }, ["junk", { block: true }])).toEqual(original);
    expect(pipelineLastWins(original, [])).toEqual(original);
    expect(pipelineLastWins("opaque", [])).toBe("opaque");
  });
});

describe("merge()", () => {
  it("dispatches by rule", () => {
    expect(merge("first_block_wins", {}, [{ block: true }])).toEqual({ block: true });
    expect(merge("field_merge", { a: 1 }, [{ terminate: true }])).toEqual({ a: 1, terminate: true });
    expect(merge("pipeline_last_wins", [1], [[2]])).toEqual([2]);
  });
});

describe("the collector", () => {
  it("de-duplicates by item id: an update replaces the reply in place, it does not count twice", async () => {
    const c = new ReplyCollector();
    c.add("hook-a", { v: 1 });
    c.add("hook-b", { v: 2 });
    c.add("hook-a", { v: 3 });
    expect([...c.replies.values()]).toEqual([{ v: 3 }, { v: 2 }]);
    expect(await c.wait(2, 1_000, 1_000)).toBe("expected");
  });

  it("routes replies by event id; a reply for a finished event is late, one for an unknown event is left alone", () => {
    const cs = new Collectors();
    const c = cs.open("e1");
    expect(cs.deliver("e1", "i", { ok: true })).toBe("collected");
    expect(cs.deliver("e2", "i", {})).toBe("unknown");
    cs.close("e1");
    expect(cs.deliver("e1", "j", {})).toBe("late");
    expect(c.replies.size).toBe(1);
    expect(cs.openCount).toBe(0);
  });

  it("remembers a bounded number of finished events", () => {
    const cs = new Collectors();
    for (let i = 0; i <= FINISHED_EVENTS_REMEMBERED; i++) {
      cs.open(`e${i}`);
      cs.close(`e${i}`);
    }
    expect(cs.deliver("e0", "i", {})).toBe("unknown");
    expect(cs.deliver(`e${FINISHED_EVENTS_REMEMBERED}`, "i", {})).toBe("late");
  });
});
