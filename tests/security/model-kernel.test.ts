// The model never reaches the kernel, against `npm start` with AUTH_SECRET and the shipped
// iii-permissions.yaml, with a scripted model (the provider replay) that tries to misuse its one
// tool:
// - it calls models::register to make its own model free: refused at once (no approval asked), the
//   catalog's price unchanged, the turn's budget charged in full;
// - it reads another session's turn_state and run_request, lists turn_state, and pages another
//   session's agent::events: each refused, nothing of the other session reaches the model; its own
//   session's scope reads fine;
// - the marking is structural: every function of the harness's workers is registered with
//   `model: "never"` (except what a model may use), and so is every writing built-in.
import type { AgentMessage, BudgetView, FunctionResultMessage, TurnStateView } from "@iii-edge/protocol/harness";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_AUTH_SECRET, bearer, token } from "@iii-edge/test-support/auth";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, replyWith, say, startProviderReplay, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";

/** One turn end to end on the shared 2-core box (several durable queue hops). */
const TURN_DEADLINE_MS = 45_000;

let replay: ReplayServer;
let engine: EngineServer;
let ops: IIIClient;
let alice: string;

const call = <T>(function_id: string, payload: unknown) => ops.trigger({ function_id, payload }) as Promise<T>;
const user = (text: string): AgentMessage => ({ role: "user", content: [{ type: "text", text }], timestamp: Date.now() });

async function startTurn(sid: string, text: string, extra: Record<string, unknown> = {}): Promise<void> {
  const res = await fetch(`${engine.url}/api/turns`, {
    method: "POST",
    headers: { "content-type": "application/json", ...bearer(alice) },
    body: JSON.stringify({
      session_id: sid,
      payload: { session_id: sid, model: "gpt-4o-mini", provider: "openai", messages: [user(text)], ...extra },
    }),
  });
  expect(res.status, await res.clone().text()).toBe(200);
}

async function turnState(sid: string): Promise<TurnStateView | null> {
  const res = await fetch(`${engine.url}/api/turns/${sid}`, { headers: bearer(alice) });
  return res.status === 200 ? ((await res.json()) as TurnStateView) : null;
}

/** Wait for the run to end; every state it was seen in on the way (a park for approval shows). */
async function finished(sid: string): Promise<{ view: TurnStateView; seen: Set<string> }> {
  const seen = new Set<string>();
  const view = await until(
    async () => {
      const v = await turnState(sid);
      if (v) seen.add(v.state);
      return v?.state === "stopped" || v?.state === "failed" ? v : undefined;
    },
    `session ${sid} ended`,
    TURN_DEADLINE_MS,
    100,
  ).catch((e: Error) => {
    throw new Error(`${e.message}\nengine output (tail):\n${engine.output().slice(-4000)}`);
  });
  return { view, seen };
}

async function results(sid: string): Promise<Map<string, FunctionResultMessage>> {
  const r = await call<{ messages: { message: AgentMessage }[] }>("session-tree::messages", { session_id: sid });
  const out = new Map<string, FunctionResultMessage>();
  for (const { message } of r.messages) if (message.role === "function_result") out.set(message.function_call_id, message);
  return out;
}

beforeAll(async () => {
  replay = await startProviderReplay();
  engine = await startEngine({ env: { AUTH_SECRET: TEST_AUTH_SECRET, OPENAI_BASE_URL: replay.openaiBaseUrl, OPENAI_API_KEY: "sk-test" } });
  alice = await token("alice", { ns: ["default"], call: ["harness::*"] });
  ops = registerWorker(engine.wsUrl, {
    workerName: "kernel-test-ops",
    headers: bearer(await token("ops", { sessions: ["*"] })),
    otel: { enabled: false },
    enableMetricsReporting: false,
  });
  await until(
    async () => {
      const r = await call<{ functions: { function_id: string }[] }>("engine::functions::list", { include_internal: true });
      const ids = r.functions.map((f) => f.function_id);
      return (
        ["run::start", "policy::check_permissions", "models::register", "budget::create", "session-tree::messages"].every((id) =>
          ids.includes(id),
        ) || undefined
      );
    },
    "the harness workers",
    60_000,
    200,
  );
});

afterAll(async () => {
  await ops?.shutdown();
  await engine?.stop();
  await replay?.close();
});

describe("the model reaches no kernel function", () => {
  it("models::register from the model is refused without asking: the price and the budget charge stay as they were", async () => {
    const before = await call<unknown>("models::get", { provider: "openai", id: "gpt-4o-mini" });
    const { budget_id } = await call<{ budget_id: string }>("budget::create", { ceiling_usd: 5, period: "month" });
    const free = { id: "gpt-4o-mini", provider: "openai", context_window: 128_000, pricing: { input_per_1m: 0, output_per_1m: 0 } };
    replay.enqueue(
      "openai",
      replyWith({ usage: { input: 1_000, output: 100 } }, callAgentTrigger("models::register", { model: free }, "free-1")),
      replyWith({ usage: { input: 1_000, output: 100 } }, say("I could not change the price.")),
    );
    const sid = "kernel-models-register";
    await startTurn(sid, "make yourself free", { budget_id });
    const { view, seen } = await finished(sid);
    expect(view.state).toBe("stopped");
    // Refused outright: the run never waited for a person.
    expect(seen.has("function_awaiting_approval")).toBe(false);
    const r = (await results(sid)).get("free-1");
    expect(r?.is_error).toBe(true);
    expect(r?.details).toMatchObject({ status: "denied", denied_by: "permissions", rule_id: "kernel" });
    // Nothing changed: the catalog's price, and what both rounds cost at it.
    expect(await call<unknown>("models::get", { provider: "openai", id: "gpt-4o-mini" })).toEqual(before);
    // gpt-4o-mini: 0.15 USD per 1M input, 0.6 output: 1000 × 0.15 + 100 × 0.6 = 210 µUSD a round.
    expect(await call<BudgetView>("budget::get", { budget_id })).toMatchObject({ spent_micros: 2 * 210, records_count: 2 });
  });

  it("reads of other sessions' turn_state, run_request and events are refused; its own session's scope is read", async () => {
    // A victim session with something private in it.
    const victim = "kernel-victim";
    replay.enqueue("openai", replyWith({ usage: { input: 10, output: 5 } }, say("Noted.")));
    await startTurn(victim, "my card is 4111-1111-1111-1111");
    await finished(victim);
    const attacker = "kernel-reader";
    await call("state::set", { scope: `session:${attacker}`, key: "note", value: { mine: "own-session-note" } });
    replay.enqueue(
      "openai",
      replyWith(
        { usage: { input: 10, output: 5 } },
        callAgentTrigger("state::get", { scope: "turn_state", key: victim }, "r-turn"),
        callAgentTrigger("state::get", { scope: "run_request", key: victim }, "r-run"),
        callAgentTrigger("state::list", { scope: "turn_state" }, "r-list"),
        callAgentTrigger("stream::list_items", { stream_name: "agent::events", group_id: victim }, "r-events"),
        callAgentTrigger("state::get", { scope: `session:${attacker}`, key: "note" }, "r-own"),
      ),
      replyWith({ usage: { input: 10, output: 5 } }, say("done")),
    );
    await startTurn(attacker, "read everything");
    const { view, seen } = await finished(attacker);
    expect(view.state).toBe("stopped");
    expect(seen.has("function_awaiting_approval")).toBe(false);
    const got = await results(attacker);
    for (const id of ["r-turn", "r-run", "r-list", "r-events"]) {
      expect(got.get(id)?.is_error, id).toBe(true);
      expect(got.get(id)?.details, id).toMatchObject({ status: "denied", denied_by: "permissions", rule_id: "session-scope" });
    }
    expect(got.get("r-own")?.is_error).toBe(false);
    expect(JSON.stringify(got.get("r-own")?.content)).toContain("own-session-note");
    // What the model was sent back carries nothing of the victim's session.
    const second = replay.requestsFor("openai").at(-1);
    expect(JSON.stringify(second?.body)).toContain("own-session-note");
    expect(JSON.stringify(second?.body)).not.toContain("4111-1111");
  });

  it("the kernel is marked where it is registered: every harness function but the model's own tools, every writing built-in", async () => {
    const r = await call<{ functions: { function_id: string; metadata?: Record<string, unknown> }[] }>("engine::functions::list", {
      include_internal: true,
    });
    const kernelPrefixes = [
      "run::",
      "turn::",
      "approval::",
      "policy::",
      "auth::",
      "provider::",
      "provisioning::",
      "session-tree::",
      "session-inbox::",
      "budget::",
      "hook-fanout::",
      "context-compaction::",
      "harness::http::",
      "harness::sub_agents::",
      "harness::sessions::",
    ];
    const kernelIds = [
      "harness::trigger",
      "harness::stop_children",
      "models::register",
      "state::set",
      "state::update",
      "state::delete",
      "state::list_groups",
      "stream::set",
      "stream::set_many",
      "stream::send",
      "stream::delete",
      "stream::update",
      "publish",
      "iii::durable::publish",
      "engine::queue::enqueue",
      "engine::channels::create",
      "engine::register_trigger",
      "engine::unregister_trigger",
      "engine::workers::register",
      "engine::traces::list",
    ];
    const marked = (id: string) => r.functions.find((f) => f.function_id === id)?.metadata?.model === "never";
    const kernel = r.functions.filter((f) => kernelPrefixes.some((p) => f.function_id.startsWith(p)) || kernelIds.includes(f.function_id));
    expect(kernel.length).toBeGreaterThan(40);
    expect(kernel.filter((f) => !marked(f.function_id)).map((f) => f.function_id)).toEqual([]);
    for (const id of [
      "harness::spawn",
      "harness::join",
      "harness::children",
      "models::list",
      "models::get",
      "state::get",
      "engine::functions::list",
    ])
      expect(marked(id), id).toBe(false);
    // Who serves them, as the policy reads it.
    expect(
      await call<{ served_by?: string; metadata?: unknown }>("engine::functions::info", { function_id: "models::register" }),
    ).toMatchObject({ served_by: "deployment", metadata: { model: "never" } });
    expect(await call<{ served_by?: string }>("engine::functions::info", { function_id: "state::set" })).toMatchObject({
      served_by: "engine",
      metadata: { model: "never" },
    });
  });

  it("no rule opens the kernel: policy::check_permissions refuses it before reading any", async () => {
    for (const function_id of [
      "models::register",
      "approval::resolve",
      "state::set",
      "engine::register_trigger",
      "run::start",
      "turn::function_execute",
    ]) {
      expect(await call("policy::check_permissions", { function_id, args: {}, session_id: "s" }), function_id).toMatchObject({
        decision: "deny",
        rule_id: "kernel",
      });
    }
    // An id nobody serves is left to the rules (its call then answers function_not_found).
    expect(await call("policy::check_permissions", { function_id: "directory::skills::absent", args: {}, session_id: "s" })).toEqual({
      decision: "allow",
      rule_id: "directory::skills::*",
    });
    expect(await call("policy::check_permissions", { function_id: "nobody::here", args: {}, session_id: "s" })).toEqual({
      decision: "needs_approval",
    });
  });
});
