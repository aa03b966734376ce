// The pure parts of iii's harness surface and typed outputs: the contract's refusals, iii's status of
// each of our states, the steering watermark, and how a typed turn's answer is judged (the native
// `response_format` vs the `submit_result` tool, validation, nudges, giving up after two).
import {
  IDEMPOTENCY_TTL_MS,
  MAX_VALIDATION_RETRIES,
  SUBMIT_RESULT_TOOL,
  harnessSendRequest,
  harnessSpawnRequest,
  harnessStatusResponse,
  type AssistantMessage,
  type PreparedCall,
  type TurnStateRecord,
} from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";
import { claimKey } from "../src/surface.ts";
import { judgeFinalAnswer, outputRequestFields, parseJsonAnswer, validateOutput } from "../src/output-contract.ts";
import { consumeSubmitResult, deferMergedMessages, hasUnfoldedMerge, markWatermark, userAfterWatermark } from "../src/turn-end.ts";
import { resultOf, turnStatusOf } from "../src/turn-events.ts";

const schema = { type: "object", properties: { city: { type: "string" }, temp: { type: "number" } }, required: ["city", "temp"] };
const contract = { type: "json" as const, schema };
const answer = (text: string): AssistantMessage => ({
  role: "assistant",
  content: [{ type: "text", text }],
  stop_reason: "end",
  model: "m",
  provider: "openai",
  timestamp: 0,
});
const record = (over: Partial<TurnStateRecord> = {}): TurnStateRecord => ({
  session_id: "s",
  state: "steering_check",
  step: 3,
  turn_count: 1,
  last_assistant: null,
  function_results: [],
  turn_end_emitted: false,
  started_at_ms: 0,
  updated_at_ms: 0,
  run_id: "r1",
  ...over,
});
const entry = (entry_id: string, role: "user" | "assistant") => ({
  entry_id,
  message: role === "user" ? { role, content: [{ type: "text" as const, text: entry_id }], timestamp: 0 } : answer(entry_id),
});

describe("harness::send's contract", () => {
  it("takes iii's SendRequest, a string message being a user text", () => {
    const r = harnessSendRequest.safeParse({
      message: "hi",
      model: "gpt-4o",
      provider: "openai",
      idempotency_key: "tg-1",
      options: { output: { type: "json", schema }, max_turns: 4, functions: { allow: ["a::*"] } },
    });
    expect(r.success).toBe(true);
  });

  it.each([
    ["no model", { message: "hi" }],
    ["an empty message", { message: "", model: "m" }],
    ["an assistant message", { message: { role: "assistant", content: [] }, model: "m" }],
    ["an unknown output type", { message: "hi", model: "m", options: { output: { type: "xml" } } }],
    ["an unknown option", { message: "hi", model: "m", options: { temperature: 2 } }],
    ["a session id with a slash", { session_id: "a/b", message: "hi", model: "m" }],
  ])("refuses %s", (_what, payload) => {
    expect(harnessSendRequest.safeParse(payload).success).toBe(false);
  });

  it("StatusResponse is null for an unknown session", () => {
    expect(harnessStatusResponse.safeParse(null).success).toBe(true);
  });
});

describe("iii's TurnStatus of our states", () => {
  it.each([
    ["provisioning", false, "running"],
    ["assistant_streaming", false, "running"],
    ["steering_check", false, "running"],
    ["function_execute", false, "awaiting_functions"],
    ["function_awaiting_approval", false, "awaiting_functions"],
    ["stopped", false, "completed"],
    ["stopped", true, "cancelled"],
    ["failed", false, "failed"],
  ] as const)("%s (stop asked: %s) is %s", (state, stop_requested, want) => {
    expect(turnStatusOf({ state, stop_requested })).toBe(want);
  });

  it("a text turn's result is its final text; a json turn's is the validated value or result_error", () => {
    expect(resultOf(record({ state: "stopped", last_assistant: answer("done") }))).toEqual({ result: "done" });
    expect(resultOf(record({ state: "stopped", output: contract, result: { city: "Oslo", temp: 3 } }))).toEqual({
      result: { city: "Oslo", temp: 3 },
    });
    expect(resultOf(record({ state: "stopped", output: contract, result: "x", result_error: "bad" }))).toEqual({
      result: "x",
      result_error: "bad",
    });
  });
});

describe("the steering watermark", () => {
  it("counts user messages after the last entry the generate step read, by position", () => {
    const read = [entry("u1", "user"), entry("a1", "assistant")];
    const rec = record({ merge_seq: 2 });
    markWatermark(rec, read);
    expect(rec).toMatchObject({ watermark_entry_id: "a1", folded_seq: 2 });
    expect(hasUnfoldedMerge(rec)).toBe(false);
    rec.merge_seq = 3;
    expect(hasUnfoldedMerge(rec)).toBe(true);
    const now = [...read, entry("a2", "assistant"), entry("u2", "user")];
    expect(userAfterWatermark(now, "a1").map((m) => m.content)).toEqual([[{ type: "text", text: "u2" }]]);
    expect(userAfterWatermark(read, "a1")).toEqual([]);
  });
});

describe("typed outputs", () => {
  it("OpenAI-compatible providers get response_format; Anthropic gets the submit_result tool", () => {
    expect(outputRequestFields(contract, "openai", [])).toEqual({ tools: [], response_format: { type: "json", schema } });
    expect(outputRequestFields({ type: "json" }, "openai", [])).toEqual({ tools: [], response_format: { type: "json" } });
    const a = outputRequestFields(contract, "anthropic", []);
    expect(a.response_format).toBeUndefined();
    expect(a.tools).toEqual([expect.objectContaining({ name: SUBMIT_RESULT_TOOL, parameters: schema })]);
    // A non-object schema is wrapped: Anthropic's tool input must be an object.
    const arr = outputRequestFields({ type: "json", schema: { type: "array" } }, "anthropic", []);
    expect(arr.tools[0]!.parameters).toEqual({ type: "object", properties: { result: { type: "array" } }, required: ["result"] });
    expect(outputRequestFields({ type: "text" }, "openai", [])).toEqual({ tools: [] });
  });

  it("validates against the JSON Schema and says what is wrong", () => {
    expect(validateOutput(contract, { city: "Oslo", temp: 3 })).toEqual({ ok: true, value: { city: "Oslo", temp: 3 } });
    const bad = validateOutput(contract, { city: "Oslo", temp: "warm" });
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.error).toContain("temp");
    expect(validateOutput({ type: "json" }, [1, 2])).toEqual({ ok: true, value: [1, 2] });
  });

  it("reads JSON from the whole answer or a fenced block", () => {
    expect(parseJsonAnswer('{"a":1}')).toEqual({ ok: true, value: { a: 1 } });
    expect(parseJsonAnswer('```json\n{"a":1}\n```')).toEqual({ ok: true, value: { a: 1 } });
    expect(parseJsonAnswer("sure! here it is").ok).toBe(false);
  });

  it("nudges an invalid answer twice, then gives up with result_error", () => {
    expect(judgeFinalAnswer(contract, answer('{"city":"Oslo","temp":3}'), 0, "openai")).toEqual({
      kind: "accept",
      value: { city: "Oslo", temp: 3 },
    });
    const first = judgeFinalAnswer(contract, answer("it is cold"), 0, "openai");
    expect(first).toMatchObject({ kind: "nudge" });
    expect(first.kind === "nudge" && first.text).toContain("JSON value alone");
    expect(judgeFinalAnswer(contract, answer("{}"), 1, "anthropic")).toMatchObject({
      kind: "nudge",
      text: expect.stringContaining(SUBMIT_RESULT_TOOL),
    });
    expect(judgeFinalAnswer(contract, answer("{}"), MAX_VALIDATION_RETRIES, "openai")).toMatchObject({ kind: "give_up", raw: "{}" });
  });

  it("consumes submit_result: a valid call is the result and ends the batch, an invalid one is an error the model sees", () => {
    const plan = (args: unknown): PreparedCall[] => [
      { route: "synthetic", call: { id: "c1", function_id: SUBMIT_RESULT_TOOL, arguments: args }, result: { content: [], details: {} } },
    ];
    const ok = record({ output: contract });
    const [accepted] = consumeSubmitResult(ok, plan({ city: "Oslo", temp: 3 }));
    expect(ok.result).toEqual({ city: "Oslo", temp: 3 });
    expect(accepted).toMatchObject({ route: "synthetic", is_error: false, result: { terminate: true } });

    const bad = record({ output: contract });
    const [nudged] = consumeSubmitResult(bad, plan({ city: 1 }));
    expect(bad).toMatchObject({ validation_retries: 1 });
    expect(bad.result).toBeUndefined();
    expect(nudged).toMatchObject({ is_error: true });
    expect((nudged as { result: { terminate?: boolean } }).result.terminate).toBeUndefined();

    const last = record({ output: contract, validation_retries: MAX_VALIDATION_RETRIES });
    const [gaveUp] = consumeSubmitResult(last, plan({ city: 1 }));
    expect(last.result_error).toContain("no valid result");
    expect(gaveUp).toMatchObject({ is_error: true, result: { terminate: true } });

    // Without a json contract a submit_result call is left as the unknown tool it is.
    const plain = plan({});
    expect(consumeSubmitResult(record(), plain)).toBe(plain);
  });
});

describe("a message merged while calls were open", () => {
  it("goes to the model after the batch's results, in arrival order otherwise", () => {
    const call = (id: string) => ({
      entry_id: `a-${id}`,
      message: { ...answer(""), content: [{ type: "function_call" as const, id, function_id: "agent_trigger", arguments: {} }] },
    });
    const result = (id: string) => ({
      entry_id: `r-${id}`,
      message: {
        role: "function_result" as const,
        function_call_id: id,
        function_id: "f",
        content: [],
        details: null,
        is_error: false,
        timestamp: 0,
      },
    });
    const stored = [entry("u1", "user"), call("c1"), entry("u2", "user"), result("c1"), entry("u3", "user")];
    expect(deferMergedMessages(stored).map((e) => e.entry_id)).toEqual(["u1", "a-c1", "r-c1", "u2", "u3"]);
    // A batch still open at the end (the results not written yet): the message stays last.
    expect(deferMergedMessages([call("c2"), entry("u4", "user")]).map((e) => e.entry_id)).toEqual(["a-c2", "u4"]);
  });
});

describe("harness::spawn's request", () => {
  it("takes iii's SpawnRequest: a message task becomes its text, options carry the output contract", () => {
    const r = harnessSpawnRequest.parse({
      task: { role: "user", content: [{ type: "text", text: "Count to three." }] },
      options: { output: { type: "json", schema: { type: "array" } }, max_turns: 4, fallback_models: ["openai:gpt-4o"] },
    });
    expect(r.task).toBe("Count to three.");
    expect(r.options?.output).toEqual({ type: "json", schema: { type: "array" } });
    // Our own callers' shape still parses.
    expect(harnessSpawnRequest.parse({ task: "Count.", max_turns: 2 })).toMatchObject({ task: "Count.", max_turns: 2 });
  });

  it("refuses what it cannot do rather than ignoring it", () => {
    expect(harnessSpawnRequest.safeParse({ task: "x", session_id: "fork-1" }).success).toBe(false);
    expect(harnessSpawnRequest.safeParse({ task: { role: "user", content: "  " } }).success).toBe(false);
    expect(harnessSpawnRequest.safeParse({ task: "x", options: { output: { type: "json", schema: "no" } } }).success).toBe(false);
  });
});

describe("idempotency keys (injected clock)", () => {
  /** The engine's state::get and compare-and-set state::update, in memory. */
  function memoryState() {
    const rows = new Map<string, unknown>();
    const writes: unknown[] = [];
    const trigger = (async (req: { function_id: string; payload: Record<string, unknown> }) => {
      const k = `${req.payload.scope}/${req.payload.key}`;
      if (req.function_id === "state::get") return rows.get(k) ?? null;
      if (req.function_id === "state::update") {
        if (JSON.stringify(rows.get(k) ?? null) !== JSON.stringify(req.payload.expected ?? null))
          throw Object.assign(new Error("conflict"), { code: "state_conflict" });
        const [op] = req.payload.ops as { value: unknown }[];
        rows.set(k, op!.value);
        writes.push(op!.value);
        return {};
      }
      throw new Error(`unexpected ${req.function_id}`);
    }) as unknown as Parameters<typeof claimKey>[0];
    return { trigger, rows, writes };
  }
  const HOUR = 3_600_000;

  it("a key answers its first send for 24 h; past that it is claimed anew", async () => {
    const { trigger, rows, writes } = memoryState();
    const t0 = 1_800_000_000_000;
    expect(await claimKey(trigger, "tg-1", "s1", t0)).toMatchObject({ claimed: true });
    // The first send finished: its turn is on the record.
    const [key] = [...rows.keys()];
    rows.set(key!, { session_id: "s1", turn_id: "r1", ts: t0 });
    const repeat = await claimKey(trigger, "tg-1", "s2", t0 + 23 * HOUR);
    expect(repeat).toEqual({ claimed: false, record: { session_id: "s1", turn_id: "r1", ts: t0 } });
    expect(writes).toHaveLength(1); // the repeat wrote nothing
    expect(await claimKey(trigger, "tg-1", "s3", t0 + IDEMPOTENCY_TTL_MS + 1)).toMatchObject({ claimed: true });
    expect(rows.get(key!)).toEqual({ session_id: "s3", turn_id: null, ts: t0 + IDEMPOTENCY_TTL_MS + 1 });
    // Another key is another send.
    expect(await claimKey(trigger, "tg-2", "s4", t0)).toMatchObject({ claimed: true });
  });
});
