// What the budget is asked around a round (src/budget.ts): the hold before the call is priced by the
// run's own model — the one the round asks first — and the record after it by the model that
// served the round, which after a failover is a fallback.
import type { AssistantMessage, TurnStateRecord } from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";
import { checkBudget, recordBudgetSpend } from "../src/budget.ts";
import type { Trigger } from "../src/calls.ts";
import type { StoredRunRequest } from "../src/run-request.ts";

const rec = { session_id: "s1", run_id: "r1", turn_count: 2 } as TurnStateRecord;
const req: StoredRunRequest = {
  provider: "openai",
  model: "gpt-4o",
  mode: null,
  system_prompt: "be brief",
  function_schemas: [],
  budget_id: "b1",
  run_id: "r1",
  requested_at_ms: 0,
  fallback_models: ["anthropic:claude-sonnet-4-5"],
};

function recording(answer: unknown): { trigger: Trigger; calls: { function_id: string; payload: Record<string, unknown> }[] } {
  const calls: { function_id: string; payload: Record<string, unknown> }[] = [];
  const trigger = (async (r: { function_id: string; payload: unknown }) => {
    calls.push({ function_id: r.function_id, payload: r.payload as Record<string, unknown> });
    return answer;
  }) as Trigger;
  return { trigger, calls };
}

describe("the budget around a round with fallback models", () => {
  it("holds the estimate at the run's own model's price, under the round's id", async () => {
    const { trigger, calls } = recording({ allowed: true });
    const refused = await checkBudget(trigger, rec, req, [{ role: "user", content: [{ type: "text", text: "hi" }], timestamp: 0 }]);
    expect(refused).toBeUndefined();
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({
      function_id: "budget::check",
      payload: { budget_id: "b1", hold_id: "r1:2", estimate: { provider: "openai", model: "gpt-4o" } },
    });
  });

  it("records the round at the price of the model that served it, settling the same hold", async () => {
    const { trigger, calls } = recording({ recorded: true });
    const served: AssistantMessage = {
      role: "assistant",
      content: [{ type: "text", text: "ok" }],
      stop_reason: "end",
      usage: { input: 1000, output: 100 },
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      timestamp: 0,
    };
    await recordBudgetSpend(trigger, rec, req, served);
    expect(calls[0]).toMatchObject({
      function_id: "budget::record",
      payload: { record_id: "r1:2", provider: "anthropic", model: "claude-sonnet-4-5", usage: { input: 1000, output: 100 } },
    });
  });
});
