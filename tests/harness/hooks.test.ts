// Function-call hooks end to end (docs/harness-contracts.md §6.3, §7 item 1): exactly `npm start` (the
// orchestrator and hook-fanout inside the deployed Worker), the OpenAI replay, and hook subscribers
// that are plain iii-sdk workers with a `durable:subscriber` trigger on
// `agent::before_function_call` / `agent::after_function_call`, answering with `stream::set` on
// `agent::hook_reply`. What a user notices: a before-hook redacts an argument and the function
// receives the redacted value; a blocking hook means the call never runs and the model reads why;
// an after-hook rewrites the result the model sees; with nobody subscribed a call waits for no
// hook; a subscriber registered mid-run is used on the very next call; and with hook-fanout left
// out (HARNESS_DISABLE) a gate fails closed, and an iii-sdk process registering
// `hook-fanout::publish_collect` is used instead.
import {
  AFTER_FUNCTION_CALL_TOPIC,
  BEFORE_FUNCTION_CALL_TOPIC,
  HOOK_REPLY_STREAM,
  PUBLISH_COLLECT,
  REDACTED,
  type AgentEvent,
  type BeforeFunctionCallPayload,
  type FunctionResultMessage,
  type HookEnvelope,
  type PublishCollectResponse,
  type TurnStateRecord,
} from "@iii-edge/protocol/harness";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, reply, say, startProviderReplay, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { permissionsFile, replayEnv } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { asText, metaOf, openaiMessages, textOf, turnClient, TURN_DEADLINE_MS } from "./turn-client.ts";

const PERMISSIONS = `version: 1
rules:
  - 'vault::*'
  - 'files::*'
  - 'secrets::*'
  - 'weather::*'
  - 'slow::*'
  - 'bench::*'
  - rule_id: never-this
    function: denied::call
    action: deny
`;
/** PRESENCE_TTL_MS of the orchestrator's hooks.ts: a subscriber used sooner than this after the last
 * lookup was seen through the change notification, not the TTL. */
const PRESENCE_TTL_MS = 5_000;
/** Pairs of turns per timing sample set (medians of the pairs' differences are compared). */
const TIMING_TURNS = 9;
/** What "no wait" means: a wait for hook replies that never come lasts the hook's deadline (2 s
 * after a call, 5 s before it), while the dispatched call itself costs tens of ms more than a denied
 * one on this shared 2-core box (75 ms under a loaded CI run). A quarter of the shorter deadline
 * tells the two apart without timing the machine. */
const NO_WAIT_EXTRA_MS = 500;
/** The work the gate does on a timed call (a real check takes time): a call that did not wait for
 * the gate would run within it. */
const GATE_WORK_MS = 25;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const started = async (client: IIIClient, ids: string[]) =>
  until(
    async () => {
      const r = (await client.trigger({ function_id: "engine::functions::list", payload: { include_internal: true } })) as {
        functions: { function_id: string }[];
      };
      return ids.every((id) => r.functions.some((f) => f.function_id === id));
    },
    ids.join(", "),
    30_000,
  );
const subscribed = async (client: IIIClient, fn: string) =>
  until(async () => {
    const r = (await client.trigger({
      function_id: "engine::registered-triggers::list",
      payload: { trigger_type: "durable:subscriber", function_id: fn },
    })) as { registered_triggers: unknown[] };
    return r.registered_triggers.length > 0;
  }, `${fn} subscribed`);
const answerHook = (client: IIIClient, env: HookEnvelope, itemId: string, data: unknown) =>
  client.trigger({ function_id: "stream::set", payload: { stream_name: env.reply_stream, group_id: env.event_id, item_id: itemId, data } });

describe("hooks around function calls (built-in hook-fanout in the Worker)", () => {
  let replay: ReplayServer;
  let engine: EngineServer;
  let iii: IIIClient;
  let apps: IIIClient;
  let hooks: IIIClient | undefined;
  let ui: ReturnType<typeof turnClient>;
  /** What each function received: its payload and the invocation metadata (who called). */
  const ran: { fn: string; args: Record<string, unknown>; meta: Record<string, unknown>; record?: TurnStateRecord }[] = [];
  const gateSeen: BeforeFunctionCallPayload["function_call"][] = [];
  /** `gate:<call id>` when the gate answers a bench::echo call, `ran:<call id>` when that call runs. */
  const order: string[] = [];
  let releaseSlow: (() => void) | undefined;
  const slowStarted: string[] = [];
  /** Per pair: the dispatched call's step minus the step of a call the policy denied right after
   * (policy checked, nothing dispatched, no hooks), so the shared box's drift cancels out. */
  const extraOver: number[] = [];
  /** The dispatched calls' steps themselves, nobody subscribed and one subscriber per hook (printed). */
  const steps: { unsubscribed: number[]; subscribed: number[] } = { unsubscribed: [], subscribed: [] };

  const ranOf = (fn: string, sid: string) => ran.filter((r) => r.fn === fn && r.meta.session_id === sid);
  /** The tool message for call `id` in the model's request `n`. */
  const toolText = (n: number, id: string) =>
    asText(openaiMessages(replay.requestsFor("openai")[n]).find((m) => m.role === "tool" && m.tool_call_id === id)?.content);

  beforeAll(async () => {
    replay = await startProviderReplay();
    const rules = permissionsFile(PERMISSIONS);
    engine = await startEngine({ env: { ...replayEnv(replay), III_PERMISSIONS_PATH: rules } });
    iii = registerWorker(engine.wsUrl, { workerName: "hooks-e2e-client", otel: { enabled: false } });
    ui = turnClient(engine, () => iii);
    apps = registerWorker(engine.wsUrl, { workerName: "hooks-app", otel: { enabled: false } });
    const record = (fn: string, answer: (args: Record<string, unknown>, meta: Record<string, unknown>) => unknown) =>
      apps.registerFunction(fn, async (args: Record<string, unknown>, metadata?: unknown) => {
        const meta = metaOf(metadata);
        const entry: (typeof ran)[number] = { fn, args, meta };
        ran.push(entry);
        if (fn === "bench::echo") order.push(`ran:${String(meta.function_call_id)}`);
        if (fn === "vault::store")
          entry.record = (await iii.trigger({
            function_id: "state::get",
            payload: { scope: "turn_state", key: meta.session_id },
          })) as TurnStateRecord;
        return answer(args, meta);
      });
    record("vault::store", (a) => ({ stored: a.name }));
    record("files::wipe", () => ({ wiped: true }));
    record("secrets::read", () => ({ value: "s3cr3t-value" }));
    record("weather::forecast", (a) => ({ city: a.city, sky: "clear" }));
    record("bench::echo", (a) => ({ n: a.n }));
    record("slow::wait", async (_a, meta) => {
      slowStarted.push(String(meta.session_id));
      await new Promise<void>((r) => (releaseSlow = r));
      return { waited: true };
    });
    await started(iii, [
      "vault::store",
      "files::wipe",
      "secrets::read",
      "weather::forecast",
      "bench::echo",
      "slow::wait",
      "run::start",
      PUBLISH_COLLECT,
    ]);
    await until(async () => (await fetch(`${engine.url}/api/turns/none`)).status === 404 || undefined, "the harness routes", 30_000, 200);
  });

  afterAll(async () => {
    await Promise.allSettled([iii?.shutdown(), apps?.shutdown(), hooks?.shutdown()]);
    await engine?.stop();
    await replay?.close();
  });

  beforeEach(() => replay.reset());

  /** One turn whose first round makes one call, then says done; its function-call step
   * is the model's first request → its second (policy, hooks, the call, results, next prompt). */
  async function timedTurn(sid: string, first: ReturnType<typeof reply>): Promise<number> {
    replay.enqueue("openai", first, reply(say("done")));
    await ui.startTurn(sid, "go");
    const { events } = await ui.finished(sid);
    const end = events.find((e) => e.data.type === "function_execution_end")?.data;
    if (end && "is_error" in end && end.is_error && !sid.includes("-denied-"))
      throw new Error(`the timed call failed: ${JSON.stringify(end)}`);
    const [a, b] = replay.requestsFor("openai");
    replay.reset();
    return b!.received_at - a!.received_at;
  }

  /** TIMING_TURNS turns, each making one bench::echo call; their steps into `out`. With `denied`, each
   * is followed by a turn whose call the policy denies, and the differences go there. */
  async function timedCalls(kind: string, out: number[], denied?: number[]): Promise<void> {
    for (let i = 0; i < TIMING_TURNS; i++) {
      const dispatched = await timedTurn(`${kind}-${i}`, reply(callAgentTrigger("bench::echo", { n: i }, `${kind}-${i}`)));
      out.push(dispatched);
      if (denied)
        denied.push(dispatched - (await timedTurn(`${kind}-denied-${i}`, reply(callAgentTrigger("denied::call", {}, `${kind}-d-${i}`)))));
    }
  }

  it("nobody subscribed: a call runs with no hook wait (timed against a denied call, which never reaches the hooks)", async () => {
    // Warm-up: the first turns of a fresh Worker pay for its cold paths.
    for (let i = 0; i < 2; i++) await timedTurn(`warm-${i}`, reply(callAgentTrigger("bench::echo", { n: i }, `warm-${i}`)));
    await timedTurn("warm-denied-0", reply(callAgentTrigger("denied::call", {}, "warm-d")));
    await timedCalls("unsub", steps.unsubscribed, extraOver);
    const extra = median(extraOver);
    console.log(`function-call step, nobody subscribed: ${extra} ms (median) above a policy-denied call's`);
    expect(extra).toBeLessThan(NO_WAIT_EXTRA_MS);
  });

  it("a subscriber registered mid-run is used on the very next call (the change notification, not the TTL)", async () => {
    const sid = "mid-run";
    replay.enqueue(
      "openai",
      reply(callAgentTrigger("slow::wait", {}, "m-slow")),
      reply(callAgentTrigger("weather::forecast", { city: "Oslo" }, "m-w")),
      reply(say("Oslo is clear.")),
    );
    await ui.startTurn(sid, "wait, then the weather in Oslo");
    await until(() => slowStarted.includes(sid), "the slow call to start", TURN_DEADLINE_MS);
    // The before-call gate: an iii-sdk worker with a durable:subscriber trigger, registered now.
    hooks = registerWorker(engine.wsUrl, { workerName: "hook-subscribers", otel: { enabled: false } });
    hooks.registerFunction("hooks::gate", async (env: HookEnvelope<BeforeFunctionCallPayload>) => {
      const fc = env.payload.function_call;
      gateSeen.push(fc);
      const args = fc.arguments as Record<string, unknown>;
      let answer: unknown = {};
      if (fc.function_id === "vault::store") answer = { arguments: { secret: REDACTED } };
      if (fc.function_id === "weather::forecast") answer = { arguments: { city: `${String(args.city)} (checked by the gate)` } };
      if (fc.function_id === "files::wipe") answer = { block: true, reason: "wiping files is frozen until Monday" };
      if (fc.function_id === "bench::echo") {
        await new Promise((r) => setTimeout(r, GATE_WORK_MS));
        order.push(`gate:${fc.id}`);
      }
      // The item id is the subscriber's own: a redelivery overwrites its reply.
      await answerHook(hooks!, env, "hooks::gate", answer);
      return null;
    });
    hooks.registerTrigger({ type: "durable:subscriber", function_id: "hooks::gate", config: { topic: BEFORE_FUNCTION_CALL_TOPIC } });
    await subscribed(iii, "hooks::gate");
    releaseSlow!();
    await ui.finished(sid);
    expect(ranOf("weather::forecast", sid).map((r) => r.args.city)).toEqual(["Oslo (checked by the gate)"]);
    expect(gateSeen.map((c) => c.id)).toEqual(["m-w"]);
    const [first, second] = replay.requestsFor("openai");
    // The round-1 lookup (before slow::wait ran) was younger than the TTL when round 2's call came.
    expect(second!.received_at - first!.received_at).toBeLessThan(PRESENCE_TTL_MS);
    expect(toolText(2, "m-w")).toContain("(checked by the gate)");
  });

  it("a before-hook redacts an argument: the function receives the redacted value, the rewrite is in the record before dispatch", async () => {
    const sid = "redacted";
    replay.enqueue("openai", reply(callAgentTrigger("vault::store", { name: "db", secret: "hunter2" }, "r-1")), reply(say("Stored.")));
    await ui.startTurn(sid, "store the db password hunter2");
    await ui.finished(sid);
    const [run] = ranOf("vault::store", sid);
    expect(run!.args).toEqual({ name: "db", secret: REDACTED });
    expect(run!.meta).toMatchObject({ function_call_id: "r-1" });
    expect(JSON.stringify(run!.args)).not.toContain("hunter2");
    // While the target ran, the record held the call as dispatched, marked triggered.
    const work = run!.record!.work!;
    expect(work.calls["r-1"]).toBe("triggered");
    expect(work.prepared.find((p) => p.call.id === "r-1")!.call.arguments).toEqual({ name: "db", secret: REDACTED });
    expect(gateSeen.find((c) => c.id === "r-1")!.arguments).toEqual({ name: "db", secret: "hunter2" });
  });

  it("a before-hook that blocks: the call never runs, the model reads why", async () => {
    const sid = "blocked";
    replay.enqueue("openai", reply(callAgentTrigger("files::wipe", { path: "/" }, "b-1")), reply(say("The wipe is frozen.")));
    await ui.startTurn(sid, "wipe everything");
    const { events } = await ui.finished(sid);
    expect(ranOf("files::wipe", sid)).toHaveLength(0);
    const end = events.find((e) => e.data.type === "function_execution_end")!.data as Extract<
      AgentEvent,
      { type: "function_execution_end" }
    >;
    expect(end).toMatchObject({
      function_call_id: "b-1",
      is_error: true,
      result: { details: { status: "denied", denied_by: "hook", hook_topic: BEFORE_FUNCTION_CALL_TOPIC } },
    });
    const fr = (await ui.transcript(sid)).find((m): m is FunctionResultMessage => m.role === "function_result")!;
    expect(fr.is_error).toBe(true);
    expect(textOf(fr)).toContain("wiping files is frozen until Monday");
    expect(toolText(1, "b-1")).toContain("wiping files is frozen until Monday");
  });

  it("an after-hook rewrites the result the model sees", async () => {
    hooks!.registerFunction("hooks::scrub", async (env: HookEnvelope<{ function_call: { id: string; function_id: string } }>) => {
      const answer =
        env.payload.function_call.function_id === "secrets::read"
          ? { content: [{ type: "text", text: "[withheld by the after-call hook]" }], details: { withheld: true } }
          : {};
      await answerHook(hooks!, env, "hooks::scrub", answer);
      return null;
    });
    hooks!.registerTrigger({ type: "durable:subscriber", function_id: "hooks::scrub", config: { topic: AFTER_FUNCTION_CALL_TOPIC } });
    await subscribed(iii, "hooks::scrub");
    const sid = "scrubbed";
    replay.enqueue("openai", reply(callAgentTrigger("secrets::read", { name: "prod" }, "s-1")), reply(say("I cannot show it.")));
    await ui.startTurn(sid, "read the prod secret");
    const { events } = await ui.finished(sid);
    expect(ranOf("secrets::read", sid)).toHaveLength(1);
    expect(toolText(1, "s-1")).toContain("[withheld by the after-call hook]");
    expect(JSON.stringify(replay.requestsFor("openai")[1]!.body)).not.toContain("s3cr3t-value");
    const fr = (await ui.transcript(sid)).find((m): m is FunctionResultMessage => m.role === "function_result")!;
    expect(textOf(fr)).toBe("[withheld by the after-call hook]");
    expect(fr.details).toMatchObject({ value: "s3cr3t-value", withheld: true });
    expect(JSON.stringify(events.find((e) => e.data.type === "function_execution_end")!.data)).toContain(
      "[withheld by the after-call hook]",
    );
  });

  it("with subscribers the same call waits for their replies: each call runs only after the gate has answered it", async () => {
    // What the wait costs is the hook-points bench's to measure (so no denied turns to time against
    // here); printed for the record only.
    await timedCalls("sub", steps.subscribed);
    console.log(
      `function-call step: one subscriber per hook ${median(steps.subscribed)} ms, nobody subscribed ${median(steps.unsubscribed)} ms (medians)`,
    );
    for (let i = 0; i < TIMING_TURNS; i++) {
      const id = `sub-${i}`;
      expect(order.indexOf(`gate:${id}`), `the gate answered ${id}`).toBeGreaterThanOrEqual(0);
      expect(order.indexOf(`ran:${id}`), `${id} ran after the gate's answer`).toBeGreaterThan(order.indexOf(`gate:${id}`));
    }
  });

  it("publish_collect in the Worker: the reply trigger reaches the in-memory collector (early exit, no deadline wait)", async () => {
    const t0 = Date.now();
    const r = (await iii.trigger({
      function_id: PUBLISH_COLLECT,
      payload: {
        topic: BEFORE_FUNCTION_CALL_TOPIC,
        payload: { session_id: "direct", function_call: { id: "d-1", function_id: "weather::forecast", arguments: { city: "Bern" } } },
        merge_rule: "first_block_wins",
        timeout_ms: 10_000,
      },
    })) as PublishCollectResponse;
    expect(r).toMatchObject({
      resolved_by: "expected",
      publish: { ok: true, subscribers: 1 },
      replies: [{ arguments: { city: "Bern (checked by the gate)" } }],
      merged: { block: false },
    });
    expect(Date.now() - t0).toBeLessThan(2_000);
    const left = (await iii.trigger({
      function_id: "stream::list_items",
      payload: { stream_name: HOOK_REPLY_STREAM, group_id: r.event_id },
    })) as { items: unknown[] };
    expect(left.items).toEqual([]);
  });
});

describe("hook-fanout left out (HARNESS_DISABLE=hook-fanout): the gate fails closed; an iii-sdk replacement is used", () => {
  let replay: ReplayServer;
  let engine: EngineServer;
  let iii: IIIClient;
  let apps: IIIClient;
  let replacement: IIIClient | undefined;
  let ui: ReturnType<typeof turnClient>;
  /** What weather::forecast received: its payload, and the calling session from its metadata. */
  const ran: (Record<string, unknown> & { session_id?: unknown })[] = [];
  const asked: Record<string, unknown>[] = [];
  let mode: "fail" | "rewrite" = "fail";

  beforeAll(async () => {
    replay = await startProviderReplay();
    const rules = permissionsFile("version: 1\nrules:\n  - 'weather::*'\n");
    engine = await startEngine({
      env: {
        ...replayEnv(replay),
        III_PERMISSIONS_PATH: rules,
        HARNESS_DISABLE: "hook-fanout",
      },
    });
    iii = registerWorker(engine.wsUrl, { workerName: "hooks-replace-client", otel: { enabled: false } });
    ui = turnClient(engine, () => iii);
    apps = registerWorker(engine.wsUrl, { workerName: "hooks-replace-app", otel: { enabled: false } });
    apps.registerFunction("weather::forecast", async (a: Record<string, unknown>, metadata?: unknown) => {
      ran.push({ ...a, session_id: metaOf(metadata).session_id });
      return { city: a.city, sky: "clear" };
    });
    // A gate subscriber exists, so the orchestrator must consult the hooks on every call.
    apps.registerFunction("apps::gate", async () => null);
    apps.registerTrigger({ type: "durable:subscriber", function_id: "apps::gate", config: { topic: BEFORE_FUNCTION_CALL_TOPIC } });
    await started(iii, ["weather::forecast", "apps::gate", "run::start"]);
    await subscribed(iii, "apps::gate");
    await until(async () => (await fetch(`${engine.url}/api/turns/none`)).status === 404 || undefined, "the harness routes", 30_000, 200);
  });

  afterAll(async () => {
    await Promise.allSettled([iii?.shutdown(), apps?.shutdown(), replacement?.shutdown()]);
    await engine?.stop();
    await replay?.close();
  });

  beforeEach(() => replay.reset());

  it("no publish_collect anywhere: a subscribed gate cannot be consulted, so the call is denied (gate_unavailable) and never runs", async () => {
    const fns = (await iii.trigger({ function_id: "engine::functions::list", payload: { include_internal: true } })) as {
      functions: { function_id: string }[];
    };
    expect(fns.functions.some((f) => f.function_id === PUBLISH_COLLECT)).toBe(false);
    replay.enqueue("openai", reply(callAgentTrigger("weather::forecast", { city: "Pisa" }, "x-1")), reply(say("The gate is down.")));
    await ui.startTurn("gate-missing", "weather in Pisa");
    const { events } = await ui.finished("gate-missing");
    expect(ran.filter((a) => a.session_id === "gate-missing")).toHaveLength(0);
    expect(events.find((e) => e.data.type === "function_execution_end")!.data).toMatchObject({
      function_call_id: "x-1",
      is_error: true,
      result: { details: { status: "denied", denied_by: "gate_unavailable" } },
    });
    const text = asText(openaiMessages(replay.requestsFor("openai")[1]).find((m) => m.role === "tool")?.content);
    expect(text).toContain("was not run");
    expect(text).toContain("function_not_found");
  });

  it("an iii-sdk process registering hook-fanout::publish_collect is used: its failed publish denies, its rewrite reaches the function", async () => {
    replacement = registerWorker(engine.wsUrl, { workerName: "my-hook-fanout", otel: { enabled: false } });
    replacement.registerFunction(PUBLISH_COLLECT, async (req: Record<string, unknown>) => {
      asked.push(req);
      if (mode === "fail")
        return {
          event_id: "mine-1",
          replies: [],
          merged: { block: false },
          publish: { ok: false, error: "broker down" },
          publish_failed: true,
        };
      return {
        event_id: "mine-2",
        replies: [{ arguments: { city: "Replaced" } }],
        merged: { block: false },
        publish: { ok: true, subscribers: 1 },
      };
    });
    await started(iii, [PUBLISH_COLLECT]);

    replay.enqueue("openai", reply(callAgentTrigger("weather::forecast", { city: "Siena" }, "y-1")), reply(say("Denied.")));
    await ui.startTurn("publish-failed", "weather in Siena");
    const failed = await ui.finished("publish-failed");
    expect(ran.filter((a) => a.session_id === "publish-failed")).toHaveLength(0);
    expect(failed.events.find((e) => e.data.type === "function_execution_end")!.data).toMatchObject({
      is_error: true,
      result: { details: { denied_by: "gate_unavailable" } },
    });
    expect(asText(openaiMessages(replay.requestsFor("openai")[1]).find((m) => m.role === "tool")?.content)).toContain("broker down");

    mode = "rewrite";
    replay.reset();
    replay.enqueue("openai", reply(callAgentTrigger("weather::forecast", { city: "Lucca" }, "y-2")), reply(say("Clear.")));
    await ui.startTurn("replaced-hooks", "weather in Lucca");
    await ui.finished("replaced-hooks");
    expect(ran.filter((a) => a.session_id === "replaced-hooks").map((a) => a.city)).toEqual(["Replaced"]);
    // Only the subscribed topic was asked (nobody subscribes after calls), with the call as the model made it.
    expect(asked.map((a) => a.topic)).toEqual([BEFORE_FUNCTION_CALL_TOPIC, BEFORE_FUNCTION_CALL_TOPIC]);
    expect(asked[1]).toMatchObject({
      merge_rule: "first_block_wins",
      payload: {
        session_id: "replaced-hooks",
        function_call: { id: "y-2", function_id: "weather::forecast", arguments: { city: "Lucca" } },
      },
    });
  });
});
