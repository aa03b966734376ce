// The agent screen's transcript after a provider failover (src/screens/agent/model.ts): the switch is
// a notice saying which model gave up, why, and which took the step, and the step's reply says
// which provider served it.
import type { AgentEvent, AssistantMessage } from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";
import { emptyView, itemsToShow, withEvents, withHistory } from "../src/screens/agent/model.ts";

const reply = (provider: string, model: string, text: string): AssistantMessage => ({
  role: "assistant",
  content: [{ type: "text", text }],
  stop_reason: "end",
  model,
  provider,
  timestamp: 1_700_000_000_000,
});

const failover: AgentEvent = {
  type: "provider_failover",
  from: { provider: "openai", model: "gpt-4o-mini" },
  to: { provider: "anthropic", model: "claude-sonnet-4" },
  reason: "rate_limited",
  message: "429 Too Many Requests",
};

describe("a failover in the transcript", () => {
  it("shows the switch, then the reply labelled with the provider that served it", () => {
    const view = withEvents(emptyView(), [
      { item_id: "s-00000001", data: failover },
      { item_id: "s-00000002", data: { type: "message_complete", message: reply("anthropic", "claude-sonnet-4", "hi") } },
    ]);
    const items = itemsToShow(view);
    expect(items.map((i) => i.kind)).toEqual(["failover", "assistant"]);
    expect(items[0]).toMatchObject({
      from: "openai:gpt-4o-mini",
      to: "anthropic:claude-sonnet-4",
      reason: "rate_limited",
      text: "openai:gpt-4o-mini was rate-limited; anthropic:claude-sonnet-4 takes this step",
    });
    expect(items[1]).toMatchObject({ provider: "anthropic", model: "claude-sonnet-4", text: "hi" });
  });

  it("says why for each reason a step moves on", () => {
    const text = (reason: "transient" | "circuit_open") =>
      itemsToShow(withEvents(emptyView(), [{ item_id: "s-1", data: { ...failover, reason } }]))[0];
    expect(text("transient")).toMatchObject({ text: expect.stringContaining("failed before answering") });
    expect(text("circuit_open")).toMatchObject({ text: expect.stringContaining("paused by its circuit breaker") });
  });

  it("a switch read again after a reconnect shows once, and stays after the stored transcript is read", () => {
    let view = withEvents(emptyView(), [{ item_id: "s-00000001", data: failover }]);
    view = withEvents(view, [{ item_id: "s-00000001", data: failover }]);
    view = { ...view, lastItemId: null };
    view = withEvents(view, [{ item_id: "s-00000001", data: failover }]);
    view = withHistory(view, [{ entry_id: "e_r_1_assistant", message: reply("anthropic", "claude-sonnet-4", "hi") }]);
    const items = itemsToShow(view);
    expect(items.filter((i) => i.kind === "failover")).toHaveLength(1);
    expect(items.find((i) => i.kind === "assistant")).toMatchObject({ provider: "anthropic" });
  });
});
