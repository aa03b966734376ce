// The orchestrator's spans when it runs as a Node process (runWorkers): they go as binary frames on
// its control socket and land in the engine's trace store (the core served in-process, its spans in
// an in-memory D1: tests/support/node-engine.ts), under one trace per turn — invoke_agent
// from run::start to the end, one span per queued step under it, the step's calls under the step.
// (The same module inside the Worker, with the whole chain, is tests/harness/trace.test.ts.)
import type { Span, TracesListOutput } from "@iii-edge/protocol/telemetry";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "@iii-edge/test-support/wait";
import { call, start, startNodeHarness, stopHarness, waitState, type Harness } from "./support/harness.ts";
import { textAnswer } from "./support/stand-ins.ts";

let h: Harness;
beforeAll(async () => {
  h = await startNodeHarness({ tracing: true });
});
afterAll(async () => {
  await stopHarness(h);
});

describe("a turn's spans from a Node orchestrator", () => {
  it("one trace: invoke_agent (service turn-orchestrator) over every step, each step's calls its children, no orphans", async () => {
    const sid = "traced-plain";
    h.scripts.set("gpt-traced", () => textAnswer("gpt-traced", "Hello there"));
    expect(await start(h, sid, "gpt-traced")).toEqual({ session_id: sid, started: true });
    await waitState(h, sid, "stopped");

    const [agent] = (await until(
      async () => {
        const r = await call<TracesListOutput>(h, "engine::traces::list", { session_id: sid, name: "invoke_agent" });
        // While the turn runs the store holds an in-progress copy (status unset); the finished span
        // replaces it once its batch is flushed, which can come after the run reports stopped.
        return r.spans.length > 0 && r.spans[0]!.end_time_unix_nano > 0 && r.spans[0]!.status !== "unset" ? r.spans : undefined;
      },
      "the finished invoke_agent span",
      15_000,
    )) as Span[];
    expect(agent).toMatchObject({
      name: "invoke_agent iii-edge",
      service_name: "turn-orchestrator",
      status: "ok",
      attributes: expect.objectContaining({ "gen_ai.conversation.id": sid }),
    });
    const spans = await until(
      async () => {
        const r = await call<TracesListOutput>(h, "engine::traces::list", { trace_id: agent!.trace_id, limit: 1000 });
        return r.spans.some((s) => s.name === "step steering_check") ? r.spans : undefined;
      },
      "the steps' spans",
      15_000,
    );
    const byId = new Map(spans.map((s) => [s.span_id, s]));
    expect(spans.filter((s) => s.parent_span_id && !byId.has(s.parent_span_id)).map((s) => s.name)).toEqual([]);
    expect(spans.filter((s) => !s.parent_span_id)).toHaveLength(1);
    const steps = spans.filter((s) => s.name.startsWith("step ")).sort((a, b) => a.start_time_unix_nano - b.start_time_unix_nano);
    expect(steps.map((s) => s.name)).toEqual(["step provisioning", "step assistant_streaming", "step steering_check"]);
    for (const s of steps) expect(s.parent_span_id).toBe(agent!.span_id);
    expect(steps.map((s) => s.attributes["iii.turn.next_state"])).toEqual(["assistant_streaming", "steering_check", "stopped"]);
    // A call made inside a step carries the step's span (the provider call of the streaming step).
    const streaming = steps[1]!;
    expect(spans.some((s) => s.name === "invoke provider::openai::stream" && s.parent_span_id === streaming.span_id)).toBe(true);
  });
});
