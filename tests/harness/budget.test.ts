// Budgets end to end (docs/harness-contracts.md §6.2): exactly `npm start` with the built-in
// budget-tracker inside the deployed Worker, the real OpenAI client against the local
// replay (whose scripted usage is what gets charged). A run names its budget with `budget_id`:
// - an exhausted budget ends the run before any provider request, saying why in the events and the
//   turn state;
// - what a round costs is the replay's reported tokens × the catalog's (or the user's) price, in
//   integer micro-USD, exactly, once per round;
// - two sessions racing one small budget cannot both spend it: the check holds the estimate;
// - replaceable: with HARNESS_DISABLE=budget-tracker and no budget worker the run is refused (fail
//   closed); an unmodified iii-sdk process registering `budget::check`/`budget::record` takes over.
import type { AgentEvent, BudgetView, TurnStateView } from "@iii-edge/protocol/harness";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, reply, replyWith, say, startProviderReplay, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { permissionsFile, replayEnv } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { textOf, turnClient, types, type EventItem } from "./turn-client.ts";

const PERMISSIONS = `version: 1
rules:
  - 'budget-app::*'
`;

const providerEnv = (replay: ReplayServer) => ({ ...replayEnv(replay), III_PERMISSIONS_PATH: permissionsFile(PERMISSIONS) });

async function functionIds(iii: IIIClient): Promise<string[]> {
  const r = (await iii.trigger({ function_id: "engine::functions::list", payload: {} })) as { functions: { function_id: string }[] };
  return r.functions.map((f) => f.function_id);
}

type Complete = Extract<AgentEvent, { type: "message_complete" }>;
const completes = (events: EventItem[]) =>
  events.filter((e) => e.data.type === "message_complete").map((e) => (e.data as Complete).message);

/** What a UI sees of a run the budget refused: failed, the reason in the state and in an error
 * assistant, agent_end last. */
function expectRefused(view: TurnStateView, events: EventItem[], kind: string, text: string): void {
  expect(view.state).toBe("failed");
  expect(view.error?.kind).toBe(kind);
  expect(view.error?.message).toContain(text);
  const [m] = completes(events);
  expect(m).toMatchObject({ role: "assistant", stop_reason: "error" });
  expect(textOf(m)).toContain(text);
  expect(m!.error_message).toContain(text);
  expect(types(events).at(-1)).toBe("agent_end");
  expect(types(events)).not.toContain("message_update");
}

describe("budgets with the built-in budget-tracker", () => {
  let replay: ReplayServer;
  let engine: EngineServer;
  let iii: IIIClient;
  let ui: ReturnType<typeof turnClient>;
  const call = <T>(function_id: string, payload: unknown) => iii.trigger({ function_id, payload }) as Promise<T>;
  const budget = (budget_id: string) => call<BudgetView>("budget::get", { budget_id });

  beforeAll(async () => {
    replay = await startProviderReplay();
    engine = await startEngine({ env: providerEnv(replay) });
    iii = registerWorker(engine.wsUrl, { workerName: "budget-e2e-client", otel: { enabled: false } });
    iii.registerFunction("budget-app::echo", async (p: { text?: string }) => ({ echoed: p.text ?? "" }), { description: "Echo a text." });
    ui = turnClient(engine, () => iii);
    await until(
      async () => {
        const ids = await functionIds(iii);
        return (
          ["run::start", "budget::check", "budget::record", "budget-app::echo"].every((id) => ids.includes(id)) &&
          (await fetch(`${engine.url}/api/turns/none`)).status === 404
        );
      },
      "the harness with the budget-tracker, and the app",
      30_000,
      200,
    );
  });

  afterAll(async () => {
    await iii?.shutdown();
    await engine?.stop();
    await replay?.close();
  });

  beforeEach(() => replay.reset());

  it("an exhausted budget: the run is refused before any provider request, the reason in its events and turn state", async () => {
    const { budget_id } = await call<{ budget_id: string }>("budget::create", {
      ceiling_micros: 1_000,
      period: "day",
      workspace_id: "ws-e2e",
    });
    await call("budget::record", { budget_id, cost_micros: 1_000 });
    const sid = "budget-exhausted";
    replay.enqueue("openai", reply(say("this must never be sent")));
    await ui.startTurn(sid, "hi", { budget_id });
    const { view, events } = await ui.finished(sid, "failed");
    expectRefused(view, events, "budget_exceeded", "budget exceeded: ceiling_exceeded");
    expect(view.error!.message).toContain(`budget ${budget_id}: 0.001000 USD spent`);
    expect(replay.requestsFor("openai")).toHaveLength(0);
    expect(replay.pending("openai")).toBe(1);
    // Nothing was charged or left held.
    expect(await budget(budget_id)).toMatchObject({ spent_micros: 1_000, held_micros: 0, records_count: 1 });
  });

  it("what a run costs is the replay's reported usage × the catalog's price, exactly, once per round", async () => {
    const { budget_id } = await call<{ budget_id: string }>("budget::create", { ceiling_usd: 5, period: "month" });
    const sid = "budget-charged";
    replay.enqueue(
      "openai",
      replyWith({ usage: { input: 1_234, output: 56, cache_read: 100 } }, callAgentTrigger("budget-app::echo", { text: "ping" }, "c-1")),
      replyWith({ usage: { input: 1_400, output: 567 } }, say("pong")),
    );
    await ui.startTurn(sid, "echo ping", { budget_id });
    const { view } = await ui.finished(sid);
    expect(view.turn_count).toBe(2);
    expect(replay.requestsFor("openai")).toHaveLength(2);
    // gpt-4o: 2.5 USD per 1M input, 10 output, 1.25 cached — in µUSD per token 2.5, 10, 1.25:
    // round 1: 1234 × 2.5 + 56 × 10 + 100 × 1.25 = 3085 + 560 + 125 = 3770;
    // round 2: 1400 × 2.5 + 567 × 10 = 3500 + 5670 = 9170.
    expect(await budget(budget_id)).toMatchObject({ spent_micros: 3_770 + 9_170, records_count: 2, held_micros: 0 });

    // A user's price wins over the catalog's (and applies to the next round at once).
    await call("budget::set_prices", { provider: "openai", model: "gpt-4o", input_per_1m: 0.1, output_per_1m: 0.2, cache_read_per_1m: 0 });
    const sid2 = "budget-charged-override";
    replay.enqueue("openai", replyWith({ usage: { input: 1_001, output: 999 } }, say("cheap")));
    await ui.startTurn(sid2, "again", { budget_id });
    await ui.finished(sid2);
    // 1001 × 0.1 + 999 × 0.2 = 100.1 + 199.8 = 299.9 → rounded up once: 300.
    expect(await budget(budget_id)).toMatchObject({ spent_micros: 12_940 + 300, records_count: 3 });
    await call("budget::set_prices", { provider: "openai", model: "gpt-4o", clear: true });
  });

  it("two sessions racing one small budget: one runs, the other is refused saying why, the spend stays under the ceiling", async () => {
    // Output at 1 USD per 1M tokens, input free: each round's check holds its 1 024-token output
    // reserve (1 024 µUSD); 1 500 µUSD fit one of them, not two.
    await call("budget::set_prices", { provider: "openai", model: "gpt-4.1-mini", input_per_1m: 0, output_per_1m: 1 });
    const { budget_id } = await call<{ budget_id: string }>("budget::create", { ceiling_micros: 1_500, period: "day" });
    // Slow replies, so the first session is still streaming while the second one checks.
    replay.setDefault(
      "openai",
      replyWith({ usage: { input: 40, output: 800 }, chunkDelayMs: 60 }, say("a reply that takes a while to stream")),
    );
    const sids = ["budget-race-a", "budget-race-b"];
    await Promise.all(sids.map((sid) => ui.startTurn(sid, "go", { budget_id, model: "gpt-4.1-mini" })));
    const ends = await Promise.all(
      sids.map(async (sid) => {
        const view = await until(
          async () => {
            const v = await ui.turnState(sid);
            return v?.state === "stopped" || v?.state === "failed" ? v : undefined;
          },
          `${sid} ended`,
          30_000,
        );
        return { sid, ...(await ui.finished(sid, view.state as "stopped" | "failed")) };
      }),
    );
    const ran = ends.filter((e) => e.view.state === "stopped");
    const refused = ends.filter((e) => e.view.state === "failed");
    expect(ran).toHaveLength(1);
    expect(refused).toHaveLength(1);
    expectRefused(refused[0]!.view, refused[0]!.events, "budget_exceeded", "budget exceeded: ceiling_exceeded");
    console.log(`race: ${refused[0]!.sid} refused: ${refused[0]!.view.error!.message}`);
    expect(replay.requestsFor("openai")).toHaveLength(1);
    const after = await budget(budget_id);
    expect(after).toMatchObject({ spent_micros: 800, records_count: 1, held_micros: 0 });
    expect(after.spent_micros).toBeLessThanOrEqual(after.ceiling_micros);
    replay.setDefault("openai", undefined);
  });

  it("an exemption (24 h) lets one session through an exhausted budget; others stay refused", async () => {
    const { budget_id } = await call<{ budget_id: string }>("budget::create", { ceiling_micros: 10, period: "week" });
    await call("budget::record", { budget_id, cost_micros: 10 });
    await call("budget::exempt", { budget_id, principal_id: "budget-exempt", reason: "demo day" });
    replay.enqueue("openai", replyWith({ usage: { input: 10, output: 10 } }, say("through")));
    await ui.startTurn("budget-exempt", "hi", { budget_id });
    await ui.finished("budget-exempt");
    await ui.startTurn("budget-not-exempt", "hi", { budget_id });
    const { view } = await ui.finished("budget-not-exempt", "failed");
    expect(view.error).toMatchObject({ kind: "budget_exceeded" });
    expect(replay.requestsFor("openai")).toHaveLength(1);
    // The exempt run's spend is still recorded: 10 × 2.5 + 10 × 10 = 125.
    expect(await budget(budget_id)).toMatchObject({ spent_micros: 135 });
  });
});

describe("budgets with the built-in budget-tracker left out (HARNESS_DISABLE=budget-tracker)", () => {
  let replay: ReplayServer;
  let engine: EngineServer;
  let iii: IIIClient;
  let mine: IIIClient | undefined;
  let ui: ReturnType<typeof turnClient>;

  beforeAll(async () => {
    replay = await startProviderReplay();
    engine = await startEngine({ env: { ...providerEnv(replay), HARNESS_DISABLE: "budget-tracker" } });
    iii = registerWorker(engine.wsUrl, { workerName: "budget-replace-client", otel: { enabled: false } });
    ui = turnClient(engine, () => iii);
    await until(
      async () => (await functionIds(iii)).includes("run::start") && (await fetch(`${engine.url}/api/turns/none`)).status === 404,
      "the harness",
      30_000,
      200,
    );
  });

  afterAll(async () => {
    await Promise.allSettled([iii?.shutdown(), mine?.shutdown()]);
    await engine?.stop();
    await replay?.close();
  });

  beforeEach(() => replay.reset());

  it("no budget worker at all: a run naming a budget is refused (fail closed) without calling the model", async () => {
    expect(await functionIds(iii)).not.toContain("budget::check");
    replay.enqueue("openai", reply(say("never")));
    await ui.startTurn("budget-none", "hi", { budget_id: "team-a" });
    const { view, events } = await ui.finished("budget-none", "failed");
    expectRefused(view, events, "budget_unavailable", "budget::check is not registered");
    expect(replay.requestsFor("openai")).toHaveLength(0);
    // A run without a budget is not affected.
    replay.enqueue("openai", reply(say("fine")));
    await ui.startTurn("budget-none-unbudgeted", "hi");
    await ui.finished("budget-none-unbudgeted");
  });

  it("an iii-sdk process registers budget::check and budget::record: the orchestrator asks it, and its answers hold", async () => {
    const checks: Record<string, unknown>[] = [];
    const records: Record<string, unknown>[] = [];
    let allow = false;
    mine = registerWorker(engine.wsUrl, { workerName: "my-budgets", otel: { enabled: false } });
    mine.registerFunction("budget::check", async (req: Record<string, unknown>) => {
      checks.push(req);
      return allow
        ? { allowed: true }
        : {
            allowed: false,
            reason: "ceiling_exceeded",
            spent_micros: 5_000_000,
            held_micros: 0,
            ceiling_micros: 5_000_000,
            estimated_cost_micros: 42,
          };
    });
    mine.registerFunction("budget::record", async (req: Record<string, unknown>) => {
      records.push(req);
      return { recorded: true };
    });
    await until(async () => (await functionIds(iii)).includes("budget::record"), "my budget functions", 30_000);

    replay.enqueue("openai", reply(say("never")));
    await ui.startTurn("budget-mine-refused", "hello there", { budget_id: "team-b" });
    const refused = await ui.finished("budget-mine-refused", "failed");
    expectRefused(
      refused.view,
      refused.events,
      "budget_exceeded",
      "budget exceeded: ceiling_exceeded (budget team-b: 5.000000 USD spent and 0.000000 held by calls in flight, of 5.000000; this call was estimated at 0.000042 USD)",
    );
    expect(replay.requestsFor("openai")).toHaveLength(0);
    expect(checks[0]).toMatchObject({
      budget_id: "team-b",
      principal_id: "budget-mine-refused",
      hold_id: expect.stringMatching(/:1$/),
      estimate: { provider: "openai", model: "gpt-4o", input_tokens: expect.any(Number), output_tokens: 1_024 },
    });
    expect((checks[0]!.estimate as { input_tokens: number }).input_tokens).toBeGreaterThan(0);

    allow = true;
    replay.reset();
    replay.enqueue("openai", replyWith({ usage: { input: 321, output: 12 } }, say("allowed")));
    await ui.startTurn("budget-mine-allowed", "hello again", { budget_id: "team-b" });
    const allowed = await ui.finished("budget-mine-allowed");
    expect(textOf(completes(allowed.events)[0])).toBe("allowed");
    expect(replay.requestsFor("openai")).toHaveLength(1);
    const check = checks.at(-1)!;
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({
      budget_id: "team-b",
      record_id: check.hold_id,
      provider: "openai",
      model: "gpt-4o",
      usage: { input: 321, output: 12 },
    });
  });
});
