// Tail selection and prune thresholds (docs/harness-contracts.md §6.1) over counted messages.
import { PRUNED_OUTPUT_TEXT, type AgentMessage } from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";
import { selectPrune, selectTail, type Counted } from "../src/select.ts";

const user = (text: string): AgentMessage => ({ role: "user", content: [{ type: "text", text }], timestamp: 0 });
const assistant = (text: string, call?: string): AgentMessage => ({
  role: "assistant",
  content: call
    ? [{ type: "function_call", id: call, function_id: "agent_trigger", arguments: { function: "f::g" } }]
    : [{ type: "text", text }],
  stop_reason: call ? "function_call" : "end",
  model: "gpt-4o",
  provider: "openai",
  timestamp: 0,
});
const result = (call: string, fn = "f::g", text = "out"): AgentMessage => ({
  role: "function_result",
  function_call_id: call,
  function_id: fn,
  content: [{ type: "text", text }],
  details: null,
  is_error: false,
  timestamp: 0,
});

/** `spec`: one letter per message (u user, a assistant, c assistant with a call, r result) with its tokens. */
function msgs(...spec: [string, number][]): Counted[] {
  let call = 0;
  return spec.map(([kind, tokens], i) => {
    const m =
      kind === "u" ? user(`u${i}`) : kind === "a" ? assistant(`a${i}`) : kind === "c" ? assistant("", `c${++call}`) : result(`c${call}`);
    return { entry_id: `e${i}`, message: m, tokens };
  });
}

describe("selectTail", () => {
  it("keeps the last turns whole while they fit", () => {
    const m = msgs(["u", 100], ["a", 100], ["u", 100], ["a", 100], ["u", 100], ["a", 100]);
    expect(selectTail(m, 400, 2)).toEqual({ keep: 2, tail_tokens: 400 });
    // two turns only, even with room for three
    expect(selectTail(m, 10_000, 2)).toEqual({ keep: 2, tail_tokens: 400 });
  });

  it("the first turn that does not fit gives its longest fitting suffix, never starting at a result", () => {
    // turn 1: u0; turn 2: u1 c2 r3 c4 r5 a6 (the last turn, too big as a whole)
    const m = msgs(["u", 50], ["u", 100], ["c", 100], ["r", 500], ["c", 100], ["r", 100], ["a", 100]);
    // budget 350: a6 (100) + r5 (100) + c4 (100) = 300 fits and starts at an assistant
    expect(selectTail(m, 350, 2)).toEqual({ keep: 4, tail_tokens: 300 });
    // budget 150: only a6
    expect(selectTail(m, 150, 2)).toEqual({ keep: 6, tail_tokens: 100 });
    // budget 250: a6 + r5 = 200 fits but would start at a result → only a6
    expect(selectTail(m, 250, 2)).toEqual({ keep: 6, tail_tokens: 100 });
  });

  it("an older turn contributes a suffix after the newest one was kept whole", () => {
    const m = msgs(["u", 100], ["c", 100], ["r", 100], ["a", 100], ["u", 100], ["a", 100]);
    // the last turn (u4 a5, 200) whole; of the one before, a3 fits (300), r2 may not start a tail, c1 overflows
    expect(selectTail(m, 450, 2)).toEqual({ keep: 3, tail_tokens: 300 });
    expect(selectTail(m, 500, 2)).toEqual({ keep: 1, tail_tokens: 500 });
  });

  it("nothing fits, or everything would be kept → no tail (everything is the head)", () => {
    expect(selectTail(msgs(["u", 100], ["a", 5_000]), 1_000, 2)).toEqual({ keep: -1, tail_tokens: 0 });
    expect(selectTail(msgs(["u", 100], ["a", 100]), 1_000, 2)).toEqual({ keep: -1, tail_tokens: 0 });
    expect(selectTail([], 1_000, 2)).toEqual({ keep: -1, tail_tokens: 0 });
  });

  it("messages before the first user message (an earlier tail that began mid-turn) are a turn", () => {
    const m = msgs(["a", 100], ["c", 100], ["r", 100], ["u", 100], ["a", 100]);
    expect(selectTail(m, 250, 2)).toEqual({ keep: 3, tail_tokens: 200 });
  });
});

describe("selectPrune", () => {
  const stub = () => 10;
  const opts = { protect: 1_000, minFree: 500, skipTurns: 2, protectedTools: [] as string[], stubTokens: stub };
  // three user turns, outputs of 800 tokens each in the old ones
  const m = (): Counted[] =>
    msgs(
      ["u", 10],
      ["c", 10],
      ["r", 800],
      ["c", 10],
      ["r", 800],
      ["c", 10],
      ["r", 800],
      ["u", 10],
      ["c", 10],
      ["r", 800],
      ["u", 10],
      ["a", 10],
    );

  it("skips the last two user turns, protects the newest outputs' first `protect` tokens, queues the rest", () => {
    // scanned outside the last two turns: r6 (800, protected), r4 (1600 > 1000 → queued), r2 (queued)
    expect(selectPrune(m(), opts)).toEqual({ entry_ids: ["e4", "e2"], freed: 1_580, scanned: 3 });
  });

  it("frees nothing when the queue frees less than minFree", () => {
    expect(selectPrune(m(), { ...opts, minFree: 2_000 })).toEqual({ entry_ids: [], freed: 0, scanned: 3 });
  });

  it("protected functions and already-pruned outputs are never queued; too few user turns → nothing", () => {
    const x = m();
    (x[2].message as { function_id: string }).function_id = "skills::get";
    x[4].message = {
      ...(x[4].message as Extract<AgentMessage, { role: "function_result" }>),
      content: [{ type: "text", text: PRUNED_OUTPUT_TEXT }],
    };
    expect(selectPrune(x, { ...opts, protect: 0, minFree: 0, protectedTools: ["skills::get"] })).toEqual({
      entry_ids: ["e6"],
      freed: 790,
      scanned: 2,
    });
    expect(selectPrune(msgs(["u", 10], ["c", 10], ["r", 5_000], ["u", 10]), { ...opts, protect: 0, minFree: 0 })).toEqual({
      entry_ids: [],
      freed: 0,
      scanned: 0,
    });
  });
});
