// The comparison of a recorded turn with its replay (src/cassettes/diff.ts): each kind of difference
// a person is told about, and none when the two agree.
import type { CassetteCall, CassetteStep } from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";
import { diffTurns, reportOf, type TurnOutcome } from "../src/cassettes/diff.ts";
import { turnOf } from "../src/cassettes/turn.ts";

const call = (id: string, over: Partial<CassetteCall> = {}): CassetteCall => ({
  function_call_id: id,
  function_id: "app::send",
  arguments: { to: "ada" },
  result: { content: [{ type: "text", text: "sent" }], details: { ok: true } },
  is_error: false,
  gate: { policy: "allow", policy_version: "v1" },
  ...over,
});
const step = (text: string, calls: CassetteCall[] = [], model = "gpt-4o"): CassetteStep => ({
  message: {
    role: "assistant",
    content: [{ type: "text", text }],
    stop_reason: calls.length ? "function_call" : "end",
    model,
    provider: "openai",
    timestamp: 0,
  },
  calls,
});
const outcome = (steps: CassetteStep[], final_state = "stopped"): TurnOutcome => ({
  steps,
  final_state,
  final_text: steps.at(-1) ? String((steps.at(-1)!.message.content[0] as { text: string }).text) : "",
});
const recorded = outcome([step("", [call("c1")]), step("done")]);

describe("diffTurns", () => {
  it("finds nothing when the replay decided and answered as recorded (a new policy version alone is no difference)", () => {
    const again = outcome([step("", [call("c1", { gate: { policy: "allow", policy_version: "v2" } })]), step("done")]);
    expect(diffTurns(recorded, again)).toEqual([]);
    expect(reportOf([])).toMatch(/^no difference/);
  });

  it("a call now denied, with the denial's result not reported a second time", () => {
    const denied = call("c1", {
      gate: { policy: "deny" },
      is_error: true,
      result: { content: [{ type: "text", text: "no" }], details: {} },
    });
    const d = diffTurns(recorded, outcome([step("", [denied]), step("done")]));
    expect(d).toEqual([expect.objectContaining({ kind: "call_denied", step: 1, function_call_id: "c1" })]);
    expect(reportOf(d)).toBe("- step 1, call c1 to app::send: was allowed by the policy, now denied by the policy");
  });

  it("a call now waiting for a person, one now allowed outright, a person's decision changed", () => {
    const asks = diffTurns(recorded, outcome([step("", [call("c1", { gate: { policy: "needs_approval" } })]), step("done")]));
    expect(asks.map((x) => x.kind)).toEqual(["call_needs_approval"]);
    const approved = outcome([step("", [call("c1", { gate: { policy: "needs_approval", approval: "allow" } })]), step("done")]);
    expect(diffTurns(approved, recorded).map((x) => x.kind)).toEqual(["call_allowed"]);
    const refused = outcome([step("", [call("c1", { gate: { policy: "needs_approval", approval: "deny" } })]), step("done")]);
    expect(diffTurns(approved, refused).map((x) => x.kind)).toEqual(["approval_changed"]);
  });

  it("changed arguments and results, calls and steps added or missing, another model, final text and state", () => {
    const other = outcome(
      [
        step(
          "",
          [
            call("c1", { arguments: { to: "bob" }, result: { content: [{ type: "text", text: "bounced" }], details: {} }, is_error: true }),
            call("c2"),
          ],
          "gpt-5",
        ),
        step("sent twice"),
        step("and more"),
      ],
      "failed",
    );
    expect(diffTurns(recorded, other).map((x) => [x.kind, x.step ?? null, x.function_call_id ?? null])).toEqual([
      ["model_changed", 1, null],
      ["argument_changed", 1, "c1"],
      ["result_changed", 1, "c1"],
      ["call_added", 1, "c2"],
      ["step_added", 3, null],
      ["final_text_changed", null, null],
      ["final_state_changed", null, null],
    ]);
    expect(diffTurns(recorded, outcome([step("", [])])).map((x) => x.kind)).toEqual(["call_missing", "step_missing", "final_text_changed"]);
  });

  it("a recording without gates reports no decision change", () => {
    const old = outcome([step("", [call("c1", { gate: undefined })]), step("done")]);
    expect(diffTurns(old, outcome([step("", [call("c1", { gate: { policy: "deny" } })]), step("done")]))).toEqual([]);
  });
});

describe("turnOf", () => {
  it("takes one run's seeds, steps and results from the transcript, agent_trigger unwrapped", () => {
    const entries = [
      { entry_id: "e_r0_user_0", message: { role: "user" as const, content: [{ type: "text" as const, text: "old" }], timestamp: 0 } },
      { entry_id: "e_r1_user_0", message: { role: "user" as const, content: [{ type: "text" as const, text: "hi" }], timestamp: 0 } },
      {
        entry_id: "e_r1_1_assistant",
        message: {
          ...step("").message,
          content: [
            {
              type: "function_call" as const,
              id: "c1",
              function_id: "agent_trigger",
              arguments: '{"function":"app::send","payload":{"to":"ada"}}',
            },
          ],
        },
      },
      {
        entry_id: "e_r1_c1",
        message: {
          role: "function_result" as const,
          function_call_id: "c1",
          function_id: "app::send",
          content: [{ type: "text" as const, text: "sent" }],
          details: { ok: true },
          is_error: false,
          timestamp: 0,
          gate: { policy: "allow" as const },
        },
      },
      { entry_id: "e_r1_2_assistant", message: step("done").message },
    ];
    const t = turnOf(entries, "r1")!;
    expect(t.input).toHaveLength(1);
    expect(t.steps).toHaveLength(2);
    expect(t.steps[0]!.calls).toEqual([
      {
        function_call_id: "c1",
        function_id: "app::send",
        arguments: { to: "ada" },
        result: { content: [{ type: "text", text: "sent" }], details: { ok: true } },
        is_error: false,
        gate: { policy: "allow" },
      },
    ]);
    expect(turnOf(entries, "r9")).toBeUndefined();
  });
});
