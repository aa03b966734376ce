// Replayable turns end to end (docs/cassettes.md): exactly `npm start` with the real OpenAI client
// against the local replay server. A turn with a function call the policy allows and one a person
// approves is exported as a cassette and replayed through the real orchestrator:
// - the cassette keeps each step's final message and usage, each call's arguments, result, policy
//   decision and version, and the person's decision;
// - a replay with nothing changed reports no difference; one under a changed policy reports the
//   call it now denies, or the call that would now wait for a person;
// - no replay reaches the provider server or runs a function;
// - a running or unknown turn is refused with its own error, a malformed cassette with 400.
import type { Cassette, CassetteReplayResponse, RunStatus } from "@iii-edge/protocol/harness";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, permissionsFile, replayEnv, reply, say, startProviderReplay } from "@iii-edge/test-support/provider-replay";
import type { ReplayServer } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { TURN_DEADLINE_MS, turnClient } from "./turn-client.ts";

// lookup runs on the policy's allow; charge matches no rule, so it waits for a person.
const PERMISSIONS = `version: 1
rules:
  - cassette-app::lookup
`;
/** The same rules with lookup denied. */
const DENY_LOOKUP = `version: 1
rules:
  - '!cassette-app::lookup'
`;
/** No rule at all: every call waits for a person. */
const NO_RULES = `version: 1
rules: []
`;

const sessionId = (name: string) => `cas-${name}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;

describe("cassettes: export a finished turn, replay it against a changed policy", () => {
  let replay: ReplayServer;
  let engine: EngineServer;
  let iii: IIIClient;
  let ui: ReturnType<typeof turnClient>;
  const ran = { lookup: 0, charge: 0 };
  const sid = sessionId("charge");
  let cassette: Cassette;

  const get = (p: string) => fetch(`${engine.url}/${p}`);
  const replayOf = async (body: unknown): Promise<{ status: number; body: CassetteReplayResponse & { error?: { code: string } } }> => {
    const res = await ui.post("api/cassettes/replay", body);
    return { status: res.status, body: (await res.json()) as CassetteReplayResponse & { error?: { code: string } } };
  };

  beforeAll(async () => {
    replay = await startProviderReplay();
    engine = await startEngine({ env: { ...replayEnv(replay), III_PERMISSIONS_PATH: permissionsFile(PERMISSIONS) } });
    iii = registerWorker(engine.wsUrl, { workerName: "cassettes-e2e-client", otel: { enabled: false } });
    iii.registerFunction(
      "cassette-app::lookup",
      async (p: { id?: string }) => {
        ran.lookup++;
        return { id: p.id, balance: 42 };
      },
      { description: "Look an account up." },
    );
    iii.registerFunction(
      "cassette-app::charge",
      async (p: { amount?: number }) => {
        ran.charge++;
        return { charged: p.amount };
      },
      { description: "Charge an account." },
    );
    ui = turnClient(engine, () => iii);
    await until(
      async () => {
        const r = (await iii.trigger({ function_id: "engine::functions::list", payload: {} })) as { functions: { function_id: string }[] };
        const ids = r.functions.map((f) => f.function_id);
        return ["cassette::replay", "run::start", "cassette-app::charge"].every((id) => ids.includes(id)) || undefined;
      },
      "the harness and the app",
      30_000,
      200,
    );

    // The recorded turn: a lookup (allowed), a charge (approved by a person), then the answer.
    replay.enqueue(
      "openai",
      reply(callAgentTrigger("cassette-app::lookup", { id: "acct-1" }, "l-1")),
      reply(callAgentTrigger("cassette-app::charge", { amount: 5 }, "p-1")),
      reply(say("Charged 5 to acct-1.")),
    );
    await ui.startTurn(sid, "charge acct-1 five");
    await until(
      async () => (await ui.turnState(sid))?.state === "function_awaiting_approval" || undefined,
      "the charge parked",
      TURN_DEADLINE_MS,
    );
    const res = await ui.post("api/approvals", { session_id: sid, function_call_id: "p-1", decision: "allow" });
    expect(res.status).toBe(200);
    await ui.finished(sid);
    expect(ran).toEqual({ lookup: 1, charge: 1 });
  });

  afterAll(async () => {
    await iii?.shutdown();
    await engine?.stop();
    await replay?.close();
  });

  it("exports the turn: each step's message and usage, each call's arguments, result and decision", async () => {
    const status = (await iii.trigger({ function_id: "run::status", payload: { session_id: sid } })) as RunStatus;
    const res = await get(`api/sessions/${sid}/turns/${status.run_id}/cassette`);
    expect(res.status, await res.clone().text()).toBe(200);
    cassette = (await res.json()) as Cassette;
    expect(cassette).toMatchObject({
      version: 1,
      source: { session_id: sid, turn_id: status.run_id },
      request: { provider: "openai", model: "gpt-4o" },
      final_state: "stopped",
      final_text: "Charged 5 to acct-1.",
    });
    expect(cassette.input).toEqual([expect.objectContaining({ role: "user" })]);
    expect(cassette.steps).toHaveLength(3);
    for (const s of cassette.steps) expect(s.message).toMatchObject({ provider: "openai", model: "gpt-4o", usage: expect.any(Object) });
    const [lookup] = cassette.steps[0]!.calls;
    const [charge] = cassette.steps[1]!.calls;
    expect(lookup).toMatchObject({
      function_call_id: "l-1",
      function_id: "cassette-app::lookup",
      arguments: { id: "acct-1" },
      is_error: false,
      gate: { policy: "allow", policy_version: expect.any(String) },
    });
    expect(JSON.stringify(lookup!.result)).toContain("42");
    expect(charge).toMatchObject({
      function_call_id: "p-1",
      function_id: "cassette-app::charge",
      arguments: { amount: 5 },
      is_error: false,
      gate: { policy: "needs_approval", approval: "allow" },
    });
  });

  it("a replay with nothing changed reports no difference, and reaches neither the provider nor a function", async () => {
    const requests = replay.requestsFor("openai").length;
    const { status, body } = await replayOf({ cassette });
    expect(status, JSON.stringify(body)).toBe(200);
    expect(body).toMatchObject({ same: true, differences: [], replay: { state: "stopped" } });
    expect(body.report).toMatch(/^no difference/);
    expect(body.replay.session_id).toMatch(/^replay-/);
    expect(replay.requestsFor("openai")).toHaveLength(requests);
    expect(ran).toEqual({ lookup: 1, charge: 1 });
    // The scratch session holds the replayed turn, answered by the cassette provider.
    const replayed = await ui.transcript(body.replay.session_id);
    expect(replayed.filter((m) => m.role === "assistant").map((m) => m.provider)).toEqual(["cassette", "cassette", "cassette"]);
  });

  it("under a policy that denies the lookup, the replay reports that call denied, and nothing else", async () => {
    const requests = replay.requestsFor("openai").length;
    const { status, body } = await replayOf({ cassette, overrides: { policy: DENY_LOOKUP } });
    expect(status, JSON.stringify(body)).toBe(200);
    expect(body.same).toBe(false);
    expect(body.differences).toEqual([
      expect.objectContaining({
        kind: "call_denied",
        step: 1,
        function_call_id: "l-1",
        function_id: "cassette-app::lookup",
        before: expect.objectContaining({ policy: "allow" }),
        after: expect.objectContaining({ policy: "deny" }),
      }),
    ]);
    expect(body.report).toContain("step 1, call l-1 to cassette-app::lookup: was allowed by the policy, now denied by the policy");
    expect(replay.requestsFor("openai")).toHaveLength(requests);
    expect(ran).toEqual({ lookup: 1, charge: 1 });
  });

  it("under a policy with no rules, the lookup would now wait for a person", async () => {
    const { status, body } = await replayOf({ cassette, overrides: { policy: NO_RULES } });
    expect(status, JSON.stringify(body)).toBe(200);
    expect(body.differences.map((d) => [d.kind, d.function_call_id])).toEqual([["call_needs_approval", "l-1"]]);
    // The approved charge still takes the person's recorded decision.
    expect(ran).toEqual({ lookup: 1, charge: 1 });
  });

  it("an edited cassette: a changed argument and a different final text are reported", async () => {
    const edited = structuredClone(cassette);
    const charge = edited.steps[1]!.message.content.find((b) => b.type === "function_call") as { arguments: unknown };
    charge.arguments = { function: "cassette-app::charge", payload: { amount: 500 } };
    edited.final_text = "Charged 5 to acct-1.";
    const last = edited.steps[2]!.message.content[0] as { text: string };
    last.text = "Charged 500 to acct-1.";
    const { body } = await replayOf({ cassette: edited });
    expect(body.differences.map((d) => d.kind)).toEqual(["argument_changed", "final_text_changed"]);
    expect(body.differences[0]).toMatchObject({ function_call_id: "p-1", before: { amount: 5 }, after: { amount: 500 } });
    expect(ran).toEqual({ lookup: 1, charge: 1 });
  });

  it("a session in auto mode: its settings travel in the cassette, and the replay runs under them", async () => {
    // The charge runs on the session's always_allow (auto mode) with no person asked.
    const auto = sessionId("auto");
    await iii.trigger({ function_id: "approval::set-mode", payload: { session_id: auto, mode: "auto" } });
    await iii.trigger({ function_id: "approval::add-always-allow", payload: { session_id: auto, function_id: "cassette-app::charge" } });
    replay.enqueue("openai", reply(callAgentTrigger("cassette-app::charge", { amount: 2 }, "a-1")), reply(say("Charged 2.")));
    await ui.startTurn(auto, "charge two");
    await ui.finished(auto);
    expect(ran.charge).toBe(2);
    const status = (await iii.trigger({ function_id: "run::status", payload: { session_id: auto } })) as RunStatus;
    const res = await get(`api/sessions/${auto}/turns/${status.run_id}/cassette`);
    expect(res.status, await res.clone().text()).toBe(200);
    const recorded = (await res.json()) as Cassette;
    expect(recorded.permissions).toMatchObject({
      mode: "auto",
      always_allow: [{ function_id: "cassette-app::charge" }],
      approved_always: [],
    });
    expect(recorded.steps[0]!.calls[0]).toMatchObject({ function_call_id: "a-1", is_error: false });

    // Replayed in a fresh session under the same settings: no person would be needed, nothing differs.
    const { status: code, body } = await replayOf({ cassette: recorded });
    expect(code, JSON.stringify(body)).toBe(200);
    expect(body).toMatchObject({ same: true, differences: [] });
    // Without them (the defaults: manual), the charge would wait for a person.
    const { body: bare } = await replayOf({ cassette: { ...recorded, permissions: undefined } });
    expect(bare.differences.map((d) => [d.kind, d.function_call_id])).toEqual([["call_needs_approval", "a-1"]]);
    expect(ran.charge).toBe(2);
  });

  it("refuses an unknown turn (404), a running one (409) and a malformed cassette (400)", async () => {
    const unknown = await get(`api/sessions/${sid}/turns/no-such-turn/cassette`);
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe("turn_not_found");

    const busy = sessionId("busy");
    replay.enqueue("openai", reply(callAgentTrigger("cassette-app::charge", { amount: 1 }, "b-1")));
    await ui.startTurn(busy, "charge one");
    await until(async () => (await ui.turnState(busy))?.state === "function_awaiting_approval" || undefined, "parked", TURN_DEADLINE_MS);
    const running = await get(`api/sessions/${busy}/turns/${busy}-m1/cassette`);
    expect(running.status).toBe(409);
    expect(((await running.json()) as { error: { code: string } }).error.code).toBe("turn_running");
    await ui.post(`api/turns/${busy}/stop`, {});

    const bad = await replayOf({ cassette: { ...cassette, version: 2 } });
    expect(bad.status).toBe(400);
  });
});
