// A turn as one trace, end to end on exactly `npm start`: one agent turn over the HTTP API whose
// model (the OpenAI replay) calls `ledger::record`, a function in a separate, unmodified iii-sdk
// 0.22.1 process that needs a person's approval; once allowed it enqueues `ledger::write` on the
// durable queue `jobs`, whose handler writes state. The engine's spans, the harness's GenAI spans
// (made in the Worker, sent through the engine stub's telemetry RPC) and iii-sdk's own spans (sent
// on its /otel socket) must form ONE trace: one root (the http ingress), every span's parent
// present, and the hops in their places. The same trace must reach an OTLP/HTTP collector.
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { LogsListOutput, Span, SpanTreeNode, TracesTreeOutput } from "@iii-edge/protocol/telemetry";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { startOtlpReceiver, type OtlpReceiver } from "@iii-edge/test-support/otlp-receiver";
import { callAgentTrigger, replyWith, say, startProviderReplay, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { permissionsFile, replayEnv } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { agentSpan, spansOfTrace, turnClient, TURN_DEADLINE_MS } from "./turn-client.ts";

/** ledger::record is in no rule: it waits for a person. */
const PERMISSIONS = `version: 1
rules:
  - '!approval::*'
  - state::get
`;

/** How long after the turn ended its last spans may take to be stored: the Worker's spans go at
 * the end of each invocation, iii-sdk's after its 100 ms batch, the engine's at once. */
const SPANS_SETTLE_MS = 15_000;

let replay: ReplayServer;
let receiver: OtlpReceiver;
let engine: EngineServer;
let iii: IIIClient;
let ledger: ChildProcess | undefined;
let ledgerOutput = "";
let ui: ReturnType<typeof turnClient>;

const call = <T>(function_id: string, payload: unknown) => iii.trigger({ function_id, payload }) as Promise<T>;

beforeAll(async () => {
  [replay, receiver] = await Promise.all([startProviderReplay(), startOtlpReceiver()]);
  const rules = permissionsFile(PERMISSIONS);
  engine = await startEngine({
    env: {
      ...replayEnv(replay),
      III_PERMISSIONS_PATH: rules,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    },
  });
  iii = registerWorker(engine.wsUrl, { workerName: "trace-e2e-client", otel: { enabled: false } });
  ui = turnClient(engine, () => iii);
  const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/ledger-worker.ts");
  ledger = spawn(process.execPath, [fixture, engine.wsUrl], { stdio: ["ignore", "pipe", "pipe"] });
  ledger.stdout?.on("data", (d) => (ledgerOutput += d));
  ledger.stderr?.on("data", (d) => (ledgerOutput += d));
  await until(
    async () => {
      const r = await call<{ functions: { function_id: string }[] }>("engine::functions::list", {});
      return ["ledger::record", "ledger::write", "run::start"].every((id) => r.functions.some((f) => f.function_id === id));
    },
    "the ledger worker's functions and the harness",
    60_000,
    200,
  );
  await until(async () => (await fetch(`${engine.url}/api/turns/none`)).status === 404 || undefined, "the harness routes", 30_000, 200);
});

afterAll(async () => {
  if (ledger && ledger.exitCode === null) ledger.kill("SIGKILL");
  await iii?.shutdown();
  await engine?.stop();
  await Promise.allSettled([replay?.close(), receiver?.close()]);
});

// ------------------------------------------------------------------ reading a trace

const attr = (s: Span, key: string) => s.attributes[key];

function flatten(nodes: SpanTreeNode[], out: SpanTreeNode[] = []): SpanTreeNode[] {
  for (const n of nodes) {
    out.push(n);
    flatten(n.children, out);
  }
  return out;
}

describe("one agent turn is one trace", () => {
  it("http ingress → run::start → invoke_agent → every step, chat, policy, approval, the iii-sdk worker's span, the queue hop and the state write; exported alike", async () => {
    const sid = `trace-${Date.now().toString(36)}`;
    replay.enqueue(
      "openai",
      replyWith({ usage: { input: 120, output: 18 } }, callAgentTrigger("ledger::record", { amount: 42 }, "l-1")),
      replyWith({ usage: { input: 160, output: 6 } }, say("Recorded 42.")),
    );
    await ui.startTurn(sid, "record 42 in the ledger");
    await ui.reached(sid, "function_awaiting_approval");
    const res = await ui.post("api/approvals", { session_id: sid, function_call_id: "l-1", decision: "allow" });
    expect(res.status).toBe(200);
    await ui.finished(sid);
    // What the user asked for happened: the queued job wrote the ledger entry.
    await until(
      async () => (await call<{ amount?: number } | null>("state::get", { scope: "ledger", key: sid }))?.amount === 42,
      "the ledger entry",
      TURN_DEADLINE_MS,
    );

    // The turn's trace, found by its session; wait until its last hops (the queued write) are in.
    const agent = await agentSpan(iii, sid, SPANS_SETTLE_MS);
    const traceId = agent.trace_id;
    const isLedgerWrite = (s: Span) => s.name === "invoke state::set" && attr(s, "iii.state.scope") === "ledger";
    const spans = await until(
      async () => {
        const all = await spansOfTrace(iii, traceId);
        const have = (p: (s: Span) => boolean) => all.some(p);
        const complete =
          have(isLedgerWrite) &&
          have((s) => s.name === "execute ledger::write") &&
          have((s) => s.name === "execute ledger::record") &&
          have((s) => s.name === "step steering_check") &&
          have((s) => s.name.startsWith("execute_tool"));
        // Spans are stored in batches as they end (a child may land a moment before its parent):
        // the check below wants the trace once every parent has arrived too.
        const ids = new Set(all.map((s) => s.span_id));
        const settled = all.every((s) => !s.parent_span_id || ids.has(s.parent_span_id));
        return complete && settled ? all : undefined;
      },
      "every span of the turn",
      SPANS_SETTLE_MS,
      250,
    ).catch(async (e: unknown) => {
      const all = await spansOfTrace(iii, traceId).catch(() => []);
      const ids = new Set(all.map((s) => s.span_id));
      const orphans = all.filter((s) => s.parent_span_id && !ids.has(s.parent_span_id)).map((s) => s.name);
      throw new Error(
        `${(e as Error).message}\nspans so far: ${all.map((s) => `${s.name} [${s.service_name}]`).join(", ")}\norphans: ${orphans.join(", ") || "none"}\nledger worker: ${ledgerOutput.slice(-2000)}`,
      );
    });

    // ---- structure: one root, no orphans, the tree holds every span
    const byId = new Map(spans.map((s) => [s.span_id, s]));
    const orphans = spans.filter((s) => s.parent_span_id && !byId.has(s.parent_span_id));
    expect(orphans.map((s) => `${s.name} → missing ${s.parent_span_id}`)).toEqual([]);
    const roots = spans.filter((s) => !s.parent_span_id);
    expect(roots.map((s) => s.name)).toEqual(["POST /api/turns"]);
    const tree = await call<TracesTreeOutput>("engine::traces::tree", { trace_id: traceId });
    expect(tree.roots).toHaveLength(1);
    expect(new Set(flatten(tree.roots).map((n) => n.span_id))).toEqual(new Set(byId.keys()));
    // DUMP_TRACE=1 prints the tree (names, services, durations) when reading a failure.
    if (process.env.DUMP_TRACE) {
      const dump = (n: SpanTreeNode, d: number): string =>
        `${"  ".repeat(d)}${n.name} [${n.service_name}] ${Math.round((n.end_time_unix_nano - n.start_time_unix_nano) / 1e6)}ms\n${n.children
          .sort((a, b) => a.start_time_unix_nano - b.start_time_unix_nano)
          .map((c) => dump(c, d + 1))
          .join("")}`;
      console.log(dump(tree.roots[0]!, 0));
    }

    const named = (name: string) => spans.filter((s) => s.name === name);
    const one = (name: string, p: (s: Span) => boolean = () => true) => {
      const found = named(name).filter(p);
      expect(found, `one span "${name}" (have: ${[...new Set(spans.map((s) => s.name))].join(", ")})`).toHaveLength(1);
      return found[0]!;
    };
    const parentOf = (s: Span) => (s.parent_span_id ? byId.get(s.parent_span_id) : undefined);
    const ancestors = (s: Span) => {
      const out: Span[] = [];
      for (let p = parentOf(s); p; p = parentOf(p)) out.push(p);
      return out;
    };
    const under = (child: Span, ancestor: Span) => ancestors(child).some((a) => a.span_id === ancestor.span_id);

    // ---- the harness: http ingress → run::start → invoke_agent → the steps
    const ingress = roots[0]!;
    expect(ingress).toMatchObject({ kind: "server", attributes: expect.objectContaining({ "http.request.method": "POST" }) });
    const runStart = one("invoke run::start");
    expect(under(runStart, ingress)).toBe(true);
    const invokeAgent = one("invoke_agent iii-edge");
    expect(parentOf(invokeAgent)?.span_id).toBe(runStart.span_id);
    expect(invokeAgent.attributes).toMatchObject({
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "iii-edge",
      "gen_ai.conversation.id": sid,
      "iii.session.id": sid,
      "iii.turn.final_state": "stopped",
    });
    expect(invokeAgent.status).toBe("ok");
    const steps = spans.filter((s) => s.name.startsWith("step "));
    for (const s of steps) expect(parentOf(s)?.span_id, s.name).toBe(invokeAgent.span_id);
    // The run's steps in order, by the record's step number (a step the queue delivered again on
    // this busy machine carries the same number).
    const byStep = new Map(steps.map((s) => [Number(attr(s, "iii.turn.step")), s.name.slice("step ".length)]));
    const stepNames = [...byStep.entries()].sort(([a], [b]) => a - b).map(([, name]) => name);
    expect(stepNames).toEqual([
      "provisioning",
      "assistant_streaming",
      "function_execute",
      "function_awaiting_approval",
      "assistant_streaming",
      "steering_check",
    ]);
    // A delivery runs the chain (runSteps): the steps after provisioning ran in its delivery, up to
    // the park; the steps after the approval in the wake's delivery. No queue hop between them.
    const chainedFrom = new Map(steps.map((s) => [Number(attr(s, "iii.turn.step")), attr(s, "iii.turn.chained_from")]));
    const first = Math.min(...chainedFrom.keys());
    expect([...chainedFrom.entries()].sort(([a], [b]) => a - b).map(([, from]) => from)).toEqual([
      undefined,
      first,
      first,
      undefined,
      first + 3,
      first + 3,
    ]);
    // The engine's own span of each queued step is in the same trace (the queue hops carried it).
    for (const state of new Set(stepNames)) expect(named(`invoke turn::${state}`).length, `invoke turn::${state}`).toBeGreaterThan(0);
    expect(named("deliver turn-step").length).toBeGreaterThanOrEqual(stepNames.length);

    // ---- the provider calls, one per round, each under its streaming step
    const chats = named("chat gpt-4o");
    expect(chats).toHaveLength(2);
    for (const c of chats) {
      expect(c.kind).toBe("client");
      expect(c.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
      });
      expect(ancestors(c).some((a) => a.name === "step assistant_streaming")).toBe(true);
    }
    const rounds = chats
      .sort((a, b) => a.start_time_unix_nano - b.start_time_unix_nano)
      .map((c) => [attr(c, "gen_ai.response.finish_reasons"), attr(c, "gen_ai.usage.input_tokens"), attr(c, "gen_ai.usage.output_tokens")]);
    expect(rounds).toEqual([
      [["tool_calls"], 120, 18],
      [["stop"], 160, 6],
    ]);

    // ---- the call: execute_tool with the policy check and the approval wait as its children
    const tool = one("execute_tool ledger::record");
    expect(parentOf(tool)?.span_id).toBe(invokeAgent.span_id);
    expect(tool.attributes).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "ledger::record",
      "gen_ai.tool.call.id": "l-1",
      "iii.tool.outcome": "ok",
    });
    const policy = one("policy_check ledger::record");
    expect(parentOf(policy)?.span_id).toBe(tool.span_id);
    expect(attr(policy, "iii.policy.decision")).toBe("needs_approval");
    const policyCall = one("invoke policy::check_permissions");
    expect(parentOf(policyCall)?.span_id).toBe(policy.span_id);
    // The policy worker says which rules decided, under its own invocation.
    const evaluated = one("evaluate_permissions ledger::record");
    expect(parentOf(evaluated)?.span_id).toBe(policyCall.span_id);
    expect(evaluated).toMatchObject({
      service_name: "policy",
      attributes: expect.objectContaining({ "iii.policy.decision": "needs_approval" }),
    });
    const wait = one("approval_wait ledger::record");
    expect(parentOf(wait)?.span_id).toBe(tool.span_id);
    expect(attr(wait, "iii.approval.decision")).toBe("allow");
    expect(wait.end_time_unix_nano).toBeGreaterThan(wait.start_time_unix_nano);

    // The engine's span of the dispatch names the session: the model's payload does not carry it, the call's metadata does.
    const dispatch = one("invoke ledger::record");
    expect(under(dispatch, tool)).toBe(true);
    expect(attr(dispatch, "iii.session.id")).toBe(sid);

    // ---- the outside worker: iii-sdk's own span, under the dispatch
    const sdkSpan = one("execute ledger::record");
    expect(sdkSpan.service_name).toBe("ledger-app");
    expect(under(sdkSpan, tool)).toBe(true);

    // ---- the queue hop and the state write, downstream of the iii-sdk span
    const enqueue = one("enqueue jobs");
    expect(under(enqueue, sdkSpan)).toBe(true);
    expect(attr(enqueue, "messaging.destination.name")).toBe("jobs");
    const deliver = one("deliver jobs");
    expect(under(deliver, enqueue)).toBe(true);
    const write = one("execute ledger::write");
    expect(under(write, deliver)).toBe(true);
    const stateWrite = one("invoke state::set", isLedgerWrite);
    expect(under(stateWrite, write)).toBe(true);
    expect(attr(stateWrite, "iii.state.key")).toBe(sid);

    // ---- logs: the run's end, correlated with the step that ended it
    const logs = await until(
      async () => {
        const r = await call<LogsListOutput>("engine::logs::list", { trace_id: traceId });
        return r.logs.some((l) => l.service_name === "turn-orchestrator") ? r.logs : undefined;
      },
      "the run's log record",
      SPANS_SETTLE_MS,
      250,
    );
    const end = logs.find((l) => l.service_name === "turn-orchestrator")!;
    expect(end).toMatchObject({
      severity_text: "INFO",
      attributes: expect.objectContaining({ "iii.session.id": sid, "iii.turn.final_state": "stopped" }),
    });
    expect(String(end.body)).toContain("stopped after 2 round(s)");
    expect(byId.get(end.span_id!)?.name).toBe("step steering_check");

    // ---- export: the same trace, span for span, at the OTLP/HTTP collector
    const exported = await until(
      () => {
        const got = new Map(receiver.spans.filter((s) => s.trace_id === traceId).map((s) => [s.span_id, s]));
        return spans.every((s) => got.has(s.span_id)) ? got : undefined;
      },
      "the trace at the collector",
      SPANS_SETTLE_MS,
      250,
    ).catch(() => {
      const got = new Set(receiver.spans.filter((s) => s.trace_id === traceId).map((s) => s.span_id));
      throw new Error(
        `spans not exported: ${spans
          .filter((s) => !got.has(s.span_id))
          .map((s) => s.name)
          .join(", ")}`,
      );
    });
    for (const s of spans) expect(exported.get(s.span_id)?.parent_span_id, s.name).toBe(s.parent_span_id || undefined);
    expect(exported.get(invokeAgent.span_id)).toMatchObject({
      name: "invoke_agent iii-edge",
      attributes: expect.objectContaining({ "gen_ai.conversation.id": sid }),
    });
    expect(exported.get(sdkSpan.span_id)?.service_name).toBe("ledger-app");
  });
});
