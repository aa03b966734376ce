// Crash safety: the engine restarts while a function call the model asked for is executing. The
// per-call checkpoint (`triggered` before the target is invoked) means the redelivered step never
// invokes it again: the call ran once, the transcript closes it with an "interrupted" result, and
// the run still ends cleanly with no duplicate entries.
import type { AgentEvent, FunctionResultMessage } from "@iii-edge/protocol/harness";
import { runWorkers } from "@iii-edge/sdk-edge/worker-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import { until } from "@iii-edge/test-support/wait";
import { events, startHarness, start, stopHarness, textOf, transcript, waitState } from "./support/harness.ts";
import { worker } from "../src/index.ts";
import { callAnswer, FAST_RECONNECT, sessionOf, textAnswer } from "./support/stand-ins.ts";

let h: Awaited<ReturnType<typeof startHarness>>;

// After a restart the engine keeps the lease of the delivery that was running (its handler may
// still be going on a worker) for the queue's timeout_ms + 5 s before it delivers the step again;
// a short deadline keeps this suite's wait short (production: 360 s).
const STEP_TIMEOUT_MS = 10_000;

beforeAll(async () => {
  h = await startHarness({ reconnect: true, turnStep: { timeout_ms: STEP_TIMEOUT_MS } });
});
afterAll(async () => {
  await stopHarness(h);
});

/** Engine restart (wrangler dev boot on a busy 2-core box), the lease, and the redelivery. */
const RECOVERY_MS = 90_000;

async function agentEvents(sid: string): Promise<AgentEvent[]> {
  return until(
    async () => {
      const all = (await events(h, sid)).map((e) => e.data);
      return all.some((e) => e.type === "agent_end") ? all : undefined;
    },
    "agent_end on the stream",
    20_000,
  );
}

/** The session's transcript once the turn ended: the call `callId` answered "interrupted" (at most
 * once), then the model's reply to that; every entry written once. */
async function interruptedTranscript(sid: string, callId: string) {
  const t = await transcript(h, sid);
  expect(t.map((e) => e.message.role)).toEqual(["user", "assistant", "function_result", "assistant"]);
  expect(new Set(t.map((e) => e.entry_id)).size).toBe(t.length);
  const result = t[2].message as FunctionResultMessage;
  expect(result).toMatchObject({ function_call_id: callId, is_error: true, details: { error: "interrupted", at_most_once: true } });
  return { t, result };
}

it("an engine restart while a call executes: the call ran once, its result says interrupted, the run stops", {
  timeout: 180_000,
}, async () => {
  const sid = "crash";
  const model = "gpt-crash";
  h.scripts.set(model, (_req, n) =>
    n === 0 ? callAnswer(model, [{ id: "k1", fn: "test::block", payload: { effect: "write-once" } }]) : textAnswer(model, "recovered"),
  );
  await start(h, sid, model);
  const blockCalls = () => h.targets.calls.filter((c) => c.fn === "test::block" && sessionOf(c) === sid);
  await until(() => blockCalls().length === 1, "the call is executing", 20_000);

  await h.engine.restart();
  // The target finishes only now; its answer goes to a connection that no longer exists.
  h.targets.gate.release();

  await waitState(h, sid, "stopped", RECOVERY_MS);
  expect(blockCalls()).toHaveLength(1);

  const { t, result } = await interruptedTranscript(sid, "k1");
  expect(textOf(result)).toContain("interrupted");
  expect(textOf(t[3].message)).toBe("recovered");

  const evs = await agentEvents(sid);
  expect(evs.filter((e) => e.type === "agent_end")).toHaveLength(1);
  expect(evs.filter((e) => e.type === "message_complete")).toHaveLength(2);
});

it("the orchestrator dies with the engine: the step delivered again finds the call triggered and does not invoke it again", {
  timeout: 180_000,
}, async () => {
  const sid = "crash-2";
  const model = "gpt-crash-2";
  h.targets.gate.rearm();
  h.scripts.set(model, (_req, n) =>
    n === 0 ? callAnswer(model, [{ id: "k2", fn: "test::block", payload: { effect: "charge-card" } }]) : textAnswer(model, "carried on"),
  );
  await start(h, sid, model);
  const blockCalls = () => h.targets.calls.filter((c) => c.fn === "test::block" && sessionOf(c) === sid);
  await until(() => blockCalls().length === 1, "the call is executing", 20_000);
  // The checkpoint says `triggered` before the target ran.
  expect(await h.client.client.trigger({ function_id: "state::get", payload: { scope: "turn_state", key: sid } })).toMatchObject({
    state: "function_execute",
    work: { calls: { k2: "triggered" } },
  });

  // The orchestrator process is gone (its handler with it), and the engine restarts.
  await h.orchestrator.shutdown();
  await h.engine.restart();
  h.targets.gate.release();
  h.orchestrator = runWorkers(h.engine.wsUrl, [worker], FAST_RECONNECT);
  h.conns.push(h.orchestrator);

  await waitState(h, sid, "stopped", RECOVERY_MS);
  expect(blockCalls()).toHaveLength(1);
  const { result } = await interruptedTranscript(sid, "k2");
  expect(textOf(result)).toContain("the harness stopped while it ran");
  const evs = await agentEvents(sid);
  expect(evs.filter((e) => e.type === "agent_end")).toHaveLength(1);
});
