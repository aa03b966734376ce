// Hooks at every point of a turn, end to end (protocol/src/harness/hooks.ts): exactly `npm start`
// (the orchestrator inside the deployed Worker), the OpenAI replay, and hooks that are plain
// iii-sdk functions bound with `registerTrigger({type: "harness::hook::<point>", function_id,
// config})`. What a user notices: a turn with nothing bound calls no hook; a bad config is refused
// and nothing is bound; each point fires with what it is about, in priority order; a deny at
// pre_turn / pre_generate fails the turn before the model is asked, at pre_trigger the model
// reads why and the function never runs; a hold parks the call until a person allows it; a hook
// past its timeout fails closed (pre) or open (post); what post_trigger changed survives the
// engine being killed mid-batch, without the hook being asked again; and a model cannot bind a
// hook through agent_trigger.
import { HOOK_TRIGGER_TYPES, type AgentMessage, type FunctionResultMessage, type HookInput } from "@iii-edge/protocol/harness";
import type { HookOutput, HookPoint, PendingApprovalRecord, TurnStateRecord } from "@iii-edge/protocol/harness";
import type { Span } from "@iii-edge/protocol/telemetry";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, permissionsFile, replayEnv, reply, say, startProviderReplay } from "@iii-edge/test-support/provider-replay";
import type { ReplayServer } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { agentSpan, spansOfTrace, asText, metaOf, openaiMessages, textOf, turnClient, TURN_DEADLINE_MS } from "./turn-client.ts";

/** The file allows everything a test calls, and `engine::*` too: the floor, not the file, keeps a
 * model from binding a hook. */
const PERMISSIONS = `version: 1
rules:
  - 'app::*'
  - 'slow::*'
  - 'gated::*'
  - 'engine::*'
`;
/** A turn that must first wait for the engine to come back (restart + reconnects) gets this long. */
const AFTER_RESTART_DEADLINE_MS = 60_000;
/** The deadline of the hooks that never answer: short, so the chain's own timer is what ends them. */
const SLOW_HOOK_TIMEOUT_MS = 300;

let replay: ReplayServer;
let engine: EngineServer;
let iii: IIIClient;
let app: IIIClient;
let hooks: IIIClient;
let ui: ReturnType<typeof turnClient>;

/** Every hook call, in order: which function, and what it was given. */
const hookCalls: { fn: string; input: HookInput }[] = [];
/** What each app function received. */
const ran: { fn: string; sid: string; args: Record<string, unknown>; record?: TurnStateRecord }[] = [];
const releases: (() => void)[] = [];
const slowStarted = new Set<string>();

/** Per session, what a hook answers (absent: continue with no change). */
type Script = Partial<Record<string, (input: HookInput) => HookOutput | Promise<HookOutput>>>;
const scripts = new Map<string, Script>();

const call = <T>(function_id: string, payload: unknown) => iii.trigger({ function_id, payload }) as Promise<T>;
const callsOf = (sid: string, fn?: string) => hookCalls.filter((c) => c.input.session_id === sid && (fn === undefined || c.fn === fn));
const ranIn = (fn: string, sid: string) => ran.filter((r) => r.fn === fn && r.sid === sid);
const msg = (text: string): AgentMessage => ({ role: "user", content: [{ type: "text", text }], timestamp: 1 });

/** The hook functions and where each is bound. */
const BINDINGS: { fn: string; point: HookPoint; config: Record<string, unknown> }[] = [
  { fn: "guard::turn", point: "pre_turn", config: {} },
  { fn: "guard::context", point: "pre_generate", config: {} },
  { fn: "guard::observe", point: "post_generate", config: {} },
  // Two pre_trigger hooks on every call: the first by priority sees the model's arguments.
  { fn: "guard::first", point: "pre_trigger", config: { priority: -5 } },
  { fn: "guard::gate", point: "pre_trigger", config: {} },
  { fn: "guard::late", point: "pre_trigger", config: { priority: 10 } },
  { fn: "guard::scrub", point: "post_trigger", config: { functions: ["app::*", "slow::*"] } },
  // Hooks that never answer, on the calls of `gated::*` only.
  { fn: "stuck::gate", point: "pre_trigger", config: { functions: ["gated::closed"], timeout_ms: SLOW_HOOK_TIMEOUT_MS } },
  { fn: "stuck::scrub", point: "post_trigger", config: { functions: ["gated::open"], timeout_ms: SLOW_HOOK_TIMEOUT_MS } },
];

/** The spans of `sid`'s turn once its last step's span is stored. */
async function turnSpans(sid: string): Promise<Span[]> {
  const root = await agentSpan(iii, sid, TURN_DEADLINE_MS);
  return until(
    async () => {
      const spans = await spansOfTrace(iii, root.trace_id);
      return spans.some((s) => s.name === "step assistant_streaming") && spans.filter((s) => s.name.startsWith("step ")).length >= 2
        ? spans
        : undefined;
    },
    `the step spans of ${sid}`,
    TURN_DEADLINE_MS,
  );
}

const bindingsOf = async (fn: string) =>
  (
    await call<{ registered_triggers: { trigger_type: string; config: unknown }[] }>("engine::registered-triggers::list", {
      function_id: fn,
    })
  ).registered_triggers;

/** Wait until the orchestrator uses the hooks: a turn whose pre_turn hook was called. */
async function hooksInUse(): Promise<void> {
  let n = 0;
  await until(
    async () => {
      const sid = `warm-${n++}`;
      replay.enqueue("openai", reply(say("warm")));
      await ui.startTurn(sid, "warm up");
      await ui.finished(sid);
      return callsOf(sid, "guard::turn").length > 0;
    },
    "the orchestrator calling the bound hooks",
    TURN_DEADLINE_MS,
    0,
  );
  replay.reset();
}

beforeAll(async () => {
  replay = await startProviderReplay();
  engine = await startEngine({ env: { ...replayEnv(replay, { anthropic: true }), III_PERMISSIONS_PATH: permissionsFile(PERMISSIONS) } });
  iii = registerWorker(engine.wsUrl, { workerName: "hook-points-client", otel: { enabled: false } });
  ui = turnClient(engine, () => iii);
  app = registerWorker(engine.wsUrl, { workerName: "hook-points-app", otel: { enabled: false } });
  const record = (fn: string, answer: (args: Record<string, unknown>, sid: string) => unknown) =>
    app.registerFunction(fn, async (args: Record<string, unknown>, metadata?: unknown) => {
      const sid = String(metaOf(metadata).session_id);
      const entry: (typeof ran)[number] = { fn, sid, args };
      ran.push(entry);
      if (fn === "slow::wait") {
        entry.record = (await iii.trigger({ function_id: "state::get", payload: { scope: "turn_state", key: sid } })) as TurnStateRecord;
        slowStarted.add(sid);
        await new Promise<void>((r) => releases.push(r));
      }
      return answer(args, sid);
    });
  record("app::echo", (a) => ({ echoed: a }));
  record("app::secret", () => ({ value: "hunter2" }));
  record("gated::closed", () => ({ ran: true }));
  record("gated::open", () => ({ ran: "unscrubbed" }));
  record("slow::wait", () => ({ waited: true }));
  await until(
    async () => {
      const r = await call<{ functions: { function_id: string }[] }>("engine::functions::list", {});
      return ["app::echo", "slow::wait", "run::start"].every((id) => r.functions.some((f) => f.function_id === id));
    },
    "the app's functions and the harness",
    30_000,
  );
  await until(async () => (await fetch(`${engine.url}/api/turns/none`)).status === 404 || undefined, "the harness routes", 30_000, 200);
});

afterAll(async () => {
  releases.splice(0).forEach((r) => r());
  await Promise.allSettled([iii?.shutdown(), app?.shutdown(), hooks?.shutdown()]);
  await engine?.stop();
  await replay?.close();
});

beforeEach(() => replay.reset());

describe("hooks at every point of a turn", () => {
  it("nothing bound: a turn with a function call makes no hook call (no hook span in its trace)", async () => {
    const sid = "unhooked";
    replay.enqueue("openai", reply(callAgentTrigger("app::echo", { n: 1 }, "u-1")), reply(say("echoed")));
    await ui.startTurn(sid, "echo 1");
    await ui.finished(sid);
    expect(ranIn("app::echo", sid)).toHaveLength(1);
    const spans = await turnSpans(sid);
    expect(spans.filter((s) => s.name.startsWith("hooks "))).toEqual([]);
  });

  it("a bad config is refused with a typed error and nothing is bound", async () => {
    await expect(
      call("engine::register_trigger", {
        trigger_type: HOOK_TRIGGER_TYPES.pre_turn,
        function_id: "app::echo",
        config: { functions: ["app::*"] },
      }),
    ).rejects.toMatchObject({ code: "trigger_registration_failed", message: expect.stringContaining("functions") });
    await expect(
      call("engine::register_trigger", {
        trigger_type: HOOK_TRIGGER_TYPES.pre_trigger,
        function_id: "app::echo",
        config: { timeout_ms: 0, on_error: "ignore" },
      }),
    ).rejects.toMatchObject({ code: "trigger_registration_failed" });
    expect(await bindingsOf("app::echo")).toEqual([]);
  });

  it("binding them: iii-sdk's registerTrigger on each point (a bad one among them is left out)", async () => {
    hooks = registerWorker(engine.wsUrl, { workerName: "hook-points-hooks", otel: { enabled: false } });
    for (const b of new Set(BINDINGS.map((x) => x.fn))) {
      hooks.registerFunction(b, async (input: HookInput) => {
        hookCalls.push({ fn: b, input });
        if (b.startsWith("stuck::")) return new Promise<never>(() => {});
        return (await scripts.get(input.session_id)?.[b]?.(input)) ?? undefined;
      });
    }
    // Refused by the engine (post_generate takes no `functions`), so never called.
    hooks.registerTrigger({ type: HOOK_TRIGGER_TYPES.post_generate, function_id: "guard::turn", config: { functions: ["x"] } });
    for (const b of BINDINGS) hooks.registerTrigger({ type: HOOK_TRIGGER_TYPES[b.point], function_id: b.fn, config: b.config });
    await until(async () => (await bindingsOf("stuck::scrub")).length > 0, "the last binding listed", 30_000);
    expect((await bindingsOf("guard::turn")).map((t) => t.trigger_type)).toEqual([HOOK_TRIGGER_TYPES.pre_turn]);
    await hooksInUse();
  });

  it("each point fires with what it is about; the chain runs in priority order and mutations reach the model and the function", async () => {
    const sid = "every-point";
    scripts.set(sid, {
      "guard::context": (input) => ({
        decision: "continue",
        mutations: {
          system_prompt: `${input.generate?.system_prompt}\nThe user's name is Ada.`,
          append_messages: [msg("memo: Ada prefers metric units")],
        },
      }),
      "guard::gate": (input) => ({
        decision: "continue",
        mutations: { arguments: { ...(input.call?.arguments as object), checked_by: "guard::gate" } },
      }),
      "guard::scrub": (input) =>
        input.result?.function_id === "app::secret"
          ? { decision: "continue", mutations: { content: [{ type: "text", text: "[redacted]" }], details: { redacted: true } } }
          : undefined,
    });
    replay.enqueue(
      "openai",
      reply(callAgentTrigger("app::echo", { n: 2 }, "e-1"), callAgentTrigger("app::secret", {}, "e-2")),
      reply(say("done")),
    );
    await ui.startTurn(sid, "echo 2 and read the secret");
    await ui.finished(sid);

    // pre_turn once, with the envelope; pre_generate and post_generate once per round.
    const turn = callsOf(sid, "guard::turn");
    expect(turn).toHaveLength(1);
    expect(turn[0]!.input).toMatchObject({ point: "pre_turn", session_id: sid, depth: 0, turn_id: expect.any(String) });
    const gen = callsOf(sid, "guard::context");
    expect(gen).toHaveLength(2);
    expect(gen[0]!.input.generate).toMatchObject({ model: "gpt-4o", provider: "openai" });
    expect(gen[0]!.input.generate!.messages.map((m) => textOf(m))).toContain("echo 2 and read the secret");
    const observed = callsOf(sid, "guard::observe");
    expect(observed.map((c) => c.input.generated?.message.role)).toEqual(["assistant", "assistant"]);
    expect(textOf(observed[1]!.input.generated?.message)).toBe("done");

    // The model was sent the extended system prompt and the appended message; the transcript was not.
    const sent = openaiMessages(replay.requestsFor("openai")[0]);
    expect(asText(sent.find((m) => m.role === "system")?.content)).toContain("The user's name is Ada.");
    expect(sent.map((m) => asText(m.content)).some((t) => t.includes("memo: Ada prefers metric units"))).toBe(true);
    expect((await ui.transcript(sid)).map((m) => textOf(m)).some((t) => t.includes("memo:"))).toBe(false);

    // pre_trigger: by priority, each hook seeing the call as the one before left it.
    const pre = hookCalls.filter((c) => c.input.session_id === sid && c.input.point === "pre_trigger" && c.input.call?.id === "e-1");
    expect(pre.map((c) => c.fn)).toEqual(["guard::first", "guard::gate", "guard::late"]);
    expect(pre[0]!.input.call?.arguments).toEqual({ n: 2 });
    expect(pre[2]!.input.call?.arguments).toEqual({ n: 2, checked_by: "guard::gate" });
    expect(ranIn("app::echo", sid).map((r) => r.args)).toEqual([{ n: 2, checked_by: "guard::gate" }]);

    // post_trigger over each result; the rewrite is what the model and the transcript see.
    expect(callsOf(sid, "guard::scrub").map((c) => c.input.result?.function_call_id)).toEqual(["e-1", "e-2"]);
    const tool = (id: string) => asText(openaiMessages(replay.requestsFor("openai")[1]).find((m) => m.tool_call_id === id)?.content);
    expect(tool("e-2")).toContain("[redacted]");
    expect(tool("e-2")).not.toContain("hunter2");
    const fr = (await ui.transcript(sid)).find(
      (m): m is FunctionResultMessage => m.role === "function_result" && m.function_call_id === "e-2",
    )!;
    expect(textOf(fr)).toBe("[redacted]");

    // Each chain that ran is a span of the turn's trace.
    const spans = await turnSpans(sid);
    const names = new Set(spans.map((s) => s.name));
    for (const p of ["pre_turn", "pre_generate", "post_generate", "pre_trigger", "post_trigger"]) expect(names).toContain(`hooks ${p}`);
  });

  it("the same with Anthropic: the extended system prompt and appended message reach its request, the rewrites its function result", async () => {
    const sid = "every-point-anthropic";
    scripts.set(sid, {
      "guard::context": (input) => ({
        decision: "continue",
        mutations: { system_prompt: `${input.generate?.system_prompt}\nAnswer in French.`, append_messages: [msg("memo: Ada is in Lyon")] },
      }),
      "guard::gate": (input) => ({
        decision: "continue",
        mutations: { arguments: { ...(input.call?.arguments as object), via: "anthropic" } },
      }),
      "guard::scrub": (input) =>
        input.result?.function_id === "app::secret"
          ? { decision: "continue", mutations: { content: [{ type: "text", text: "[caviardé]" }] } }
          : undefined,
    });
    replay.enqueue(
      "anthropic",
      reply(callAgentTrigger("app::echo", { n: 7 }, "toolu_a1"), callAgentTrigger("app::secret", {}, "toolu_a2")),
      reply(say("Fini.")),
    );
    await ui.startTurn(sid, "echo 7 and read the secret", { model: "claude-sonnet-4-6", provider: "anthropic" });
    await ui.finished(sid);
    expect(callsOf(sid, "guard::context")[0]!.input.generate).toMatchObject({ provider: "anthropic", model: "claude-sonnet-4-6" });
    const [first, second] = replay.requestsFor("anthropic");
    const body = first!.body as { system?: unknown; messages: { role: string; content: unknown }[] };
    expect(asText(body.system)).toContain("Answer in French.");
    expect(body.messages.map((m) => asText(m.content)).some((t) => t.includes("memo: Ada is in Lyon"))).toBe(true);
    expect(ranIn("app::echo", sid).map((r) => r.args)).toEqual([{ n: 7, via: "anthropic" }]);
    const results = asText((second!.body as { messages: { content: unknown }[] }).messages.map((m) => m.content));
    expect(results).toContain("[caviardé]");
    expect(results).not.toContain("hunter2");
  });

  it("a deny at pre_turn fails the turn with the reason, before the model is asked", async () => {
    const sid = "deny-turn";
    scripts.set(sid, { "guard::turn": () => ({ decision: "deny", reason: "this tenant is over its monthly quota" }) });
    await ui.startTurn(sid, "hello");
    const { view } = await ui.finished(sid, "failed");
    expect(view.error).toEqual({ kind: "hook_denied", message: expect.stringContaining("this tenant is over its monthly quota") });
    expect(view.error?.message).toContain("guard::turn");
    expect(replay.requestsFor("openai")).toHaveLength(0);
    expect(callsOf(sid, "guard::context")).toHaveLength(0);
  });

  it("a deny at pre_generate fails the turn with the reason, before the model is asked", async () => {
    const sid = "deny-generate";
    scripts.set(sid, { "guard::context": () => ({ decision: "deny", reason: "the prompt names a blocked customer" }) });
    await ui.startTurn(sid, "hello");
    const { view } = await ui.finished(sid, "failed");
    expect(view.error).toEqual({ kind: "hook_denied", message: expect.stringContaining("the prompt names a blocked customer") });
    expect(replay.requestsFor("openai")).toHaveLength(0);
  });

  it("a deny at pre_trigger: the function never runs, the later hooks are not asked, the model reads why", async () => {
    const sid = "deny-call";
    scripts.set(sid, { "guard::gate": () => ({ decision: "deny", reason: "echo is closed for maintenance" }) });
    replay.enqueue("openai", reply(callAgentTrigger("app::echo", { n: 3 }, "d-1")), reply(say("It is closed.")));
    await ui.startTurn(sid, "echo 3");
    await ui.finished(sid);
    expect(ranIn("app::echo", sid)).toHaveLength(0);
    expect(callsOf(sid, "guard::late")).toHaveLength(0);
    const fr = (await ui.transcript(sid)).find((m): m is FunctionResultMessage => m.role === "function_result")!;
    expect(fr.is_error).toBe(true);
    expect(textOf(fr)).toContain("echo is closed for maintenance");
    expect(asText(openaiMessages(replay.requestsFor("openai")[1]).find((m) => m.tool_call_id === "d-1")?.content)).toContain(
      "echo is closed for maintenance",
    );
  });

  it("a hold parks the call like an approval; a person's allow releases it through the rest of the chain, once", async () => {
    const sid = "hold";
    scripts.set(sid, {
      "guard::first": (input) => ({
        decision: "continue",
        mutations: { arguments: { ...(input.call?.arguments as object), tagged: true } },
      }),
      "guard::gate": () => ({ decision: "hold", pending_timeout_ms: 600_000 }),
    });
    replay.enqueue("openai", reply(callAgentTrigger("app::echo", { n: 4 }, "h-1")), reply(say("Echoed after approval.")));
    await ui.startTurn(sid, "echo 4");
    await ui.reached(sid, "function_awaiting_approval");
    expect(ranIn("app::echo", sid)).toHaveLength(0);
    const pending = await call<{ pending: PendingApprovalRecord & { held_by?: string } } | null>("approval::get-pending", {
      session_id: sid,
      function_call_id: "h-1",
    });
    expect(pending?.pending).toMatchObject({ function_id: "app::echo", held_by: "guard::gate" });
    expect(pending!.pending.expires_at - pending!.pending.pending_at).toBe(600_000);
    expect(callsOf(sid, "guard::late")).toHaveLength(0);

    await call("approval::resolve", { session_id: sid, function_call_id: "h-1", decision: "allow" });
    await ui.finished(sid);
    // Released: the hooks after the holder ran, the ones before it were not asked again.
    expect(callsOf(sid, "guard::first")).toHaveLength(1);
    expect(callsOf(sid, "guard::gate")).toHaveLength(1);
    expect(callsOf(sid, "guard::late").map((c) => c.input.call?.arguments)).toEqual([{ n: 4, tagged: true }]);
    expect(ranIn("app::echo", sid).map((r) => r.args)).toEqual([{ n: 4, tagged: true }]);
  });

  it("a held call a person denies never runs; the model reads the denial", async () => {
    const sid = "hold-denied";
    scripts.set(sid, { "guard::gate": () => ({ decision: "hold" }) });
    replay.enqueue("openai", reply(callAgentTrigger("app::echo", { n: 5 }, "hd-1")), reply(say("Not allowed.")));
    await ui.startTurn(sid, "echo 5");
    await ui.reached(sid, "function_awaiting_approval");
    await call("approval::resolve", { session_id: sid, function_call_id: "hd-1", decision: "deny", reason: "not now" });
    await ui.finished(sid);
    expect(ranIn("app::echo", sid)).toHaveLength(0);
    const fr = (await ui.transcript(sid)).find((m): m is FunctionResultMessage => m.role === "function_result")!;
    expect(fr.is_error).toBe(true);
    expect(textOf(fr)).toContain("not now");
  });

  it("a hook past its timeout_ms: pre_trigger fails closed (denied), post_trigger fails open (result kept)", async () => {
    const sid = "timeouts";
    replay.enqueue(
      "openai",
      reply(callAgentTrigger("gated::closed", {}, "t-1"), callAgentTrigger("gated::open", {}, "t-2")),
      reply(say("One of them ran.")),
    );
    await ui.startTurn(sid, "run both");
    await ui.finished(sid);
    expect(ranIn("gated::closed", sid)).toHaveLength(0);
    expect(ranIn("gated::open", sid)).toHaveLength(1);
    const results = (await ui.transcript(sid)).filter((m): m is FunctionResultMessage => m.role === "function_result");
    const closed = results.find((m) => m.function_call_id === "t-1")!;
    expect(closed.is_error).toBe(true);
    expect(textOf(closed)).toContain(`stuck::gate failed (fail_closed): no answer within ${SLOW_HOOK_TIMEOUT_MS} ms`);
    const open = results.find((m) => m.function_call_id === "t-2")!;
    expect(open.is_error).toBe(false);
    expect(textOf(open)).toContain("unscrubbed");
    expect(callsOf(sid, "stuck::scrub")).toHaveLength(1);
  });

  it("a model cannot bind a hook: engine::register_trigger through agent_trigger is refused, nothing is bound", async () => {
    const sid = "model-binds";
    replay.enqueue(
      "openai",
      reply(
        callAgentTrigger(
          "engine::register_trigger",
          { trigger_type: HOOK_TRIGGER_TYPES.pre_trigger, function_id: "app::echo", config: { priority: -100 } },
          "m-1",
        ),
      ),
      reply(say("I could not.")),
    );
    await ui.startTurn(sid, "make app::echo a hook");
    await ui.finished(sid);
    const fr = (await ui.transcript(sid)).find((m): m is FunctionResultMessage => m.role === "function_result")!;
    expect(fr.is_error).toBe(true);
    expect(fr.details).toMatchObject({ status: "denied", rule_id: "kernel" });
    expect(await bindingsOf("app::echo")).toEqual([]);
  });

  it("what post_trigger changed is checkpointed with the call: after the engine is killed mid-batch it is what the model sees, the hook not asked again", async () => {
    const sid = "survives";
    scripts.set(sid, {
      "guard::scrub": (input) =>
        input.result?.function_id === "app::secret"
          ? { decision: "continue", mutations: { content: [{ type: "text", text: "[redacted]" }] }, annotations: { rule: "secrets" } }
          : undefined,
    });
    replay.enqueue(
      "openai",
      reply(callAgentTrigger("app::secret", {}, "s-1"), callAgentTrigger("slow::wait", {}, "s-2")),
      reply(say("The secret is redacted; the wait was cut.")),
    );
    await ui.startTurn(sid, "read the secret, then wait");
    await until(() => slowStarted.has(sid), "the slow call to be running", TURN_DEADLINE_MS);
    // While the second call runs, the first is checkpointed done with the rewrite and who made it.
    const work = ranIn("slow::wait", sid)[0]!.record!.work as NonNullable<TurnStateRecord["work"]> & {
      hooks?: Record<string, { post_trigger?: unknown[] }>;
    };
    expect(work.calls["s-1"]).toBe("done");
    expect(textOf({ role: "assistant", content: work.executed["s-1"]!.result.content } as AgentMessage)).toBe("[redacted]");
    expect(work.hooks?.["s-1"]?.post_trigger).toEqual([
      { function_id: "guard::scrub", mutations: { content: [{ type: "text", text: "[redacted]" }] }, annotations: { rule: "secrets" } },
    ]);

    await engine.restart();
    releases.splice(0).forEach((r) => r());
    await ui.finished(sid, "stopped", AFTER_RESTART_DEADLINE_MS);
    // The redelivered step replayed s-1 from its checkpoint: one hook call, the rewrite kept.
    expect(callsOf(sid, "guard::scrub").filter((c) => c.input.result?.function_call_id === "s-1")).toHaveLength(1);
    expect(ranIn("app::secret", sid)).toHaveLength(1);
    const reqs = replay.requestsFor("openai");
    const tool = (id: string) => asText(openaiMessages(reqs[reqs.length - 1]).find((m) => m.tool_call_id === id)?.content);
    expect(tool("s-1")).toContain("[redacted]");
    expect(tool("s-1")).not.toContain("hunter2");
    expect(tool("s-2")).toMatch(/interrupted/i);
  });

  it("the hooks' worker goes away: its bindings go with it, and the next turn runs without them (not denied for a missing hook)", async () => {
    // The app is back from the restart before (iii-sdk reconnects and registers again).
    await until(
      async () =>
        (await call<{ functions: { function_id: string }[] }>("engine::functions::list", {})).functions.some(
          (f) => f.function_id === "app::echo",
        ),
      "app::echo registered again",
      AFTER_RESTART_DEADLINE_MS,
    );
    await hooks.shutdown();
    await until(
      async () => (await bindingsOf("guard::turn")).length === 0 && (await bindingsOf("guard::gate")).length === 0,
      "the bindings gone",
      30_000,
    );
    const sid = "unbound";
    replay.enqueue("openai", reply(callAgentTrigger("app::echo", { n: 9 }, "g-1")), reply(say("echoed")));
    await ui.startTurn(sid, "echo 9");
    await ui.finished(sid, "stopped", AFTER_RESTART_DEADLINE_MS);
    const results = (await ui.transcript(sid)).filter((m) => m.role === "function_result").map((m) => textOf(m));
    expect(
      ranIn("app::echo", sid).map((r) => r.args),
      results.join("\n"),
    ).toEqual([{ n: 9 }]);
    expect(callsOf(sid)).toEqual([]);
  });
});
