// `turn::subscribe` against the engine core served in-process, the orchestrator run alone (support/harness.ts):
// what a follower of a run relies on (sub-agents' follow.ts does) — a notice for every write of
// the run's record, in write order, a failed one again before any later one — with real state
// trigger fires, and `run::status` answering what the run is.
import type { AgentEvent, RunStatus, TurnState, TurnStateChanged } from "@iii-edge/protocol/harness";
import { afterAll, beforeAll, expect, it } from "vitest";
import { until } from "@iii-edge/test-support/wait";
import { call, events, listed, startNodeHarness, start, stopHarness, waitState, type Harness } from "./support/harness.ts";
import { textAnswer } from "./support/stand-ins.ts";

let h: Harness;
/** Every call of the subscriber, failed ones included, in arrival order. */
const attempts: TurnStateChanged[] = [];
/** The notices it took. */
const heard: TurnStateChanged[] = [];

beforeAll(async () => {
  h = await startNodeHarness();
  h.client.client.registerFunction("test::on_run", async (raw: TurnStateChanged & { _caller_worker_id?: string }) => {
    // The engine stamps which connection called (the orchestrator's); the notice is the rest.
    const { _caller_worker_id: _, ...n } = raw;
    attempts.push(n);
    // The first notice fails once: the engine must deliver it again, and before the next.
    if (attempts.length === 1) throw new Error("not ready yet");
    heard.push(n);
    return { ok: true };
  });
  await until(async () => (await listed(h.client)).includes("test::on_run"), "the subscriber registered", 30_000);
});
afterAll(async () => {
  await stopHarness(h);
});

/** Runs of one state collapsed (checkpoints write the record without changing its state). */
const collapse = (states: (TurnState | null)[]) => states.filter((s, i) => i === 0 || s !== states[i - 1]);

it("a subscriber hears each change of a run in write order, a failed notice again before any later; unsubscribed, its binding is gone", {
  timeout: 90_000,
}, async () => {
  const sid = "followed";
  const model = "gpt-followed";
  h.scripts.set(model, () => textAnswer(model, "all done"));
  expect(await call(h, "turn::subscribe", { session_id: sid, function_id: "test::on_run", subscription_id: "test:followed" })).toEqual({
    subscription_id: "test:followed",
  });
  await start(h, sid, model);
  await waitState(h, sid, "stopped");
  await until(() => heard.at(-1)?.state === "stopped", "the notice of the run's end", 30_000);

  expect(attempts[0]).toEqual({ subscription_id: "test:followed", session_id: sid, event_type: "state:created", state: "provisioning" });
  expect(heard[0]).toEqual(attempts[0]);
  expect(heard.slice(1).every((n) => n.event_type === "state:updated" && n.session_id === sid)).toBe(true);
  // The same path the run's own stream reports, in the same order.
  const streamed = (await events(h, sid))
    .map((e) => e.data)
    .filter((d): d is Extract<AgentEvent, { type: "turn_state_changed" }> => d.type === "turn_state_changed")
    .map((d) => d.new_value.state);
  expect(collapse(heard.map((n) => n.state))).toEqual(collapse(streamed));
  expect(collapse(heard.map((n) => n.state))).toEqual(expect.arrayContaining(["provisioning", "assistant_streaming", "stopped"]));

  // What a follower reads on a notice.
  expect(await call<RunStatus>(h, "run::status", { session_id: sid })).toMatchObject({
    session_id: sid,
    state: "stopped",
    stop_requested: false,
    final_text: "all done",
  });

  expect(await call(h, "turn::unsubscribe", { subscription_id: "test:followed" })).toEqual({ removed: true });
  const bindings = await call<{ registered_triggers: { id: string }[] }>(h, "engine::registered-triggers::list", {
    function_id: "turn::notify_subscriber",
  });
  expect(bindings.registered_triggers.map((t) => t.id)).not.toContain("turn-subscription:test:followed");
  expect(await call(h, "turn::unsubscribe", { subscription_id: "test:followed" })).toEqual({ removed: false });
});
