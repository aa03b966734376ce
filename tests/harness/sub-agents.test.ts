// Sub-agents end to end: exactly `npm start` (every harness worker in the deployed Worker, the
// sub-agents worker among them), the real provider clients against the local OpenAI/Anthropic
// replay, the policy from a permissions file, an app registered with the unmodified iii-sdk. The
// model reaches `harness::spawn` / `harness::join` through `agent_trigger` like any function. Each
// scenario checks what a user sees: the parent gets its child's answer; a console that follows only
// the parent sees the child's pending approval and approves it; a too-deep spawn is an error the
// model reads; stopping or ending the parent stops the child. Parents talk to one provider and
// children to the other where they run at the same time, so each replay queue is answered in a
// known order. Last, the sub-agents worker is replaced by configuration.
import {
  CHILD_EVENT,
  HARNESS_JOIN,
  type AgentEvent,
  type AwaitingChild,
  type SubAgentChildEvent,
  type TurnStateView,
} from "@iii-edge/protocol/harness";
import { subAgentMessageId, subAgentSessionId } from "@iii-edge/worker-sub-agents/ids";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, permissionsFile, replayEnv, reply, say, startProviderReplay } from "@iii-edge/test-support/provider-replay";
import type { RecordedRequest, ReplayServer } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { asText, metaOf, openaiMessages, stopAll, TURN_DEADLINE_MS, turnClient, types, untilListed } from "./turn-client.ts";

const PERMISSIONS = `version: 1
rules:
  - '!approval::*'
  - harness::spawn
  - harness::join
  - harness::children
  - '!harness::*'
  - notes::read
# anything else (notes::publish) waits for a person
`;
/** A chain of four sessions, each waiting on the next: several turns end to end. */
const CHAIN_DEADLINE_MS = 90_000;
const CHILD_MODEL = { provider: "anthropic", model: "claude-sonnet-4-6" };

/** Anthropic request messages: the tool results a child's model was sent. */
const anthropicToolResults = (r: RecordedRequest | undefined): string =>
  JSON.stringify(((r?.body?.messages ?? []) as { content?: unknown }[]).map((m) => m.content));

/** A parent model's first answer: spawn a child (call `spawn-1`) for `task` on CHILD_MODEL, and join
 * it (call `join-1`) in the same round. */
const spawnAndJoin = (child: string, task: string) =>
  reply(
    callAgentTrigger("harness::spawn", { task, ...CHILD_MODEL }, "spawn-1"),
    callAgentTrigger(HARNESS_JOIN, { child_session_id: child }, "join-1"),
  );

describe("sub-agents in the deployed harness", () => {
  let replay: ReplayServer;
  let engine: EngineServer;
  let iii: IIIClient;
  let app: IIIClient;
  let ui: ReturnType<typeof turnClient>;
  const published: { text: string; session_id: string }[] = [];

  /** The child session a parent's spawn call `cid` makes (run id = the turn's message id). */
  const childOf = (parent: string, parentRunId: string, cid: string) => subAgentSessionId(parent, parentRunId, cid);
  const rootRun = (sid: string) => `${sid}-m1`;

  beforeAll(async () => {
    replay = await startProviderReplay();
    engine = await startEngine({ env: { ...replayEnv(replay, { anthropic: true }), III_PERMISSIONS_PATH: permissionsFile(PERMISSIONS) } });
    iii = registerWorker(engine.wsUrl, { workerName: "sub-agents-e2e-client", otel: { enabled: false } });
    app = registerWorker(engine.wsUrl, { workerName: "notes-app", otel: { enabled: false } });
    app.registerFunction(
      "notes::publish",
      async (a: { text: string }, metadata?: unknown) => {
        published.push({ text: a.text, session_id: String(metaOf(metadata).session_id) });
        return { published: true };
      },
      { description: "Publish a note for everyone to read." },
    );
    ui = turnClient(engine, () => iii);
    await untilListed(iii, "the harness, its sub-agents and the app", (fns) =>
      ["harness::spawn", "run::start", "notes::publish"].every((id) => fns.some((f) => f.function_id === id)),
    );
  });

  afterAll(() => stopAll(engine, replay, iii, app));

  beforeEach(() => replay.reset());

  it("a parent turn spawns a child and joins it: its call waits (parked, no step held) and gets the child's answer", async () => {
    const sid = "sa-basic";
    const child = await childOf(sid, rootRun(sid), "spawn-1");
    replay.enqueue("openai", spawnAndJoin(child, "Count to three."), reply(say("The sub-agent counted: one, two, three.")));
    replay.enqueue("anthropic", reply(say("one, two, three")));
    await ui.startTurn(sid, "Have a helper count to three.");

    const { events } = await ui.finished(sid);
    const childRun = await ui.finished(child);
    expect(childRun.view).toMatchObject({ state: "stopped", turn_count: 1 });
    // The child ran its own turn loop, on the model it was given, with the task as its user message.
    const [childReq] = replay.requestsFor("anthropic");
    expect(childReq.body?.model).toBe("claude-sonnet-4-6");
    expect(anthropicToolResults(childReq)).toContain("Count to three.");
    // While it ran, the parent's join was parked as a wait for the child, not as a question to a person.
    const parked = events
      .map((e) => e.data)
      .find(
        (d): d is Extract<AgentEvent, { type: "turn_state_changed" }> =>
          d.type === "turn_state_changed" && d.new_value.state === "function_awaiting_approval",
      );
    expect(parked?.new_value.awaiting_approval).toEqual([
      expect.objectContaining({
        function_call_id: "join-1",
        function_id: HARNESS_JOIN,
        held_by: HARNESS_JOIN,
        child_session_id: child,
      } satisfies Partial<AwaitingChild>),
    ]);
    // The join's result is the child's final answer, and it is what the parent's model read next.
    const end = events
      .map((e) => e.data)
      .find(
        (d): d is Extract<AgentEvent, { type: "function_execution_end" }> =>
          d.type === "function_execution_end" && d.function_call_id === "join-1",
      );
    expect(end?.is_error).toBe(false);
    expect(end?.result.details).toEqual({ child_session_id: child, state: "stopped", final_message: "one, two, three", turn_count: 1 });
    const second = openaiMessages(replay.requestsFor("openai")[1]);
    const joinResult = second.find((m) => m.role === "tool" && m.tool_call_id === "join-1");
    expect(asText(joinResult?.content)).toContain("one, two, three");
    expect(asText(second.find((m) => m.role === "tool" && m.tool_call_id === "spawn-1")?.content)).toContain(child);
    // The child's run request records who spawned it; the parent lists it.
    const req = (await iii.trigger({ function_id: "run::request", payload: { session_id: child } })) as { parent?: unknown };
    expect(req.parent).toEqual({ session_id: sid, run_id: rootRun(sid), function_call_id: "spawn-1", depth: 1, root_session_id: sid });
    const list = (await iii.trigger({ function_id: "harness::children", payload: { parent_session_id: sid } })) as {
      children: { child_session_id: string; state: string }[];
    };
    expect(list.children).toEqual([expect.objectContaining({ child_session_id: child, state: "stopped" })]);
  });

  it("a sub-agent's call that needs approval is approved from the parent's event stream: a console follows only the parent", async () => {
    const sid = "sa-approve";
    const child = await childOf(sid, rootRun(sid), "spawn-1");
    // The console joins the parent's group before the turn starts — and nothing else.
    const ws = new WebSocket(`${engine.wsUrl}/_iii/streams`);
    const fromChild: SubAgentChildEvent[] = [];
    const own: string[] = [];
    const groups = new Set<string>();
    ws.onmessage = (m) => {
      const p = JSON.parse(String(m.data)) as {
        groupId: string;
        event: { type: string; data?: AgentEvent; event?: { type: string; data: SubAgentChildEvent } };
      };
      groups.add(p.groupId);
      if (p.event.type === "event" && p.event.event?.type === CHILD_EVENT) fromChild.push(p.event.event.data);
      if (p.event.type === "create" && p.event.data) own.push(p.event.data.type);
    };
    await new Promise((resolve, reject) => ((ws.onopen = resolve), (ws.onerror = reject)));
    ws.send(JSON.stringify({ type: "join", data: { subscriptionId: "console", streamName: "agent::events", groupId: sid } }));
    try {
      replay.enqueue("openai", spawnAndJoin(child, "Publish the note 'hello'."), reply(say("Your helper published the note.")));
      replay.enqueue("anthropic", reply(callAgentTrigger("notes::publish", { text: "hello" }, "pub-1")), reply(say("Published.")));
      await ui.startTurn(sid, "Get a helper to publish 'hello'.");

      // The child's pending approval shows up on the parent's stream.
      const pending = await until(
        () => {
          for (const e of fromChild) {
            if (e.event.type !== "turn_state_changed") continue;
            const waiting = (e.event.new_value as TurnStateView).awaiting_approval?.find((a) => a.function_id === "notes::publish");
            if (waiting) return { session: e.child_session_id, call: waiting.function_call_id };
          }
          return undefined;
        },
        "the child's pending approval on the parent's stream",
        TURN_DEADLINE_MS,
      );
      expect(pending).toEqual({ session: child, call: "pub-1" });
      expect(published).toEqual([]);
      const res = await ui.post("api/approvals", { session_id: pending.session, function_call_id: pending.call, decision: "allow" });
      expect(res.status, await res.clone().text()).toBe(200);

      await ui.finished(sid);
      expect(published).toEqual([{ text: "hello", session_id: child }]);
      // The console saw the child's run from start to end, tagged with the child, in the child's order.
      await until(() => fromChild.some((e) => e.event.type === "agent_end"), "the child's end mirrored", TURN_DEADLINE_MS);
      expect(fromChild.every((e) => e.child_session_id === child && e.parent_session_id === sid && e.depth === 1)).toBe(true);
      const mirrored = [...fromChild].sort((a, b) => (a.item_id < b.item_id ? -1 : 1)).map((e) => e.event.type);
      expect(mirrored).toEqual(expect.arrayContaining(["agent_start", "function_execution_start", "function_execution_end", "agent_end"]));
      expect(mirrored).not.toContain("message_update");
      expect(own.at(-1)).toBe("agent_end");
      expect([...groups]).toEqual([sid]); // everything arrived on the parent's group
      // The parent's stored events are its own: a reader paging them sees no child item.
      expect(types(await ui.allEvents(sid)).filter((t) => (t as string) === CHILD_EVENT)).toEqual([]);
    } finally {
      ws.close();
    }
  });

  it("a sub-agent at depth 3 that spawns gets depth_exceeded, as an error its model reads and works around", async () => {
    const root = "sa-deep";
    const c1 = await childOf(root, rootRun(root), "s1");
    const c2 = await childOf(c1, await subAgentMessageId(c1), "s2");
    const c3 = await childOf(c2, await subAgentMessageId(c2), "s3");
    const spawnAndJoin = (cid: string, child: string, model: Record<string, string>) =>
      reply(
        callAgentTrigger("harness::spawn", { task: `Level below: ${cid}`, ...model }, cid),
        callAgentTrigger(HARNESS_JOIN, { child_session_id: child }, `join-${cid}`),
      );
    // Each level waits on the next, so each queue is answered in this order.
    replay.enqueue(
      "openai",
      spawnAndJoin("s1", c1, CHILD_MODEL),
      spawnAndJoin("s3", c3, CHILD_MODEL),
      reply(say("c2 done")),
      reply(say("root done")),
    );
    replay.enqueue(
      "anthropic",
      spawnAndJoin("s2", c2, { provider: "openai", model: "gpt-4o" }),
      reply(callAgentTrigger("harness::spawn", { task: "go deeper" }, "s4")),
      reply(say("Too deep: I did it myself.")),
      reply(say("c1 done")),
    );
    await ui.startTurn(root, "Delegate all the way down.");

    for (const sid of [c3, c2, c1, root]) expect((await ui.finished(sid, "stopped", CHAIN_DEADLINE_MS)).view.state).toBe("stopped");
    // c3's model (its second request: anthropic's third) was told why, in words it can act on.
    const c3Seen = anthropicToolResults(replay.requestsFor("anthropic")[2]);
    expect(c3Seen).toContain("depth_exceeded");
    expect(c3Seen).toContain("at most 3 deep");
    const c3Events = await ui.allEvents(c3);
    const refused = c3Events
      .map((e) => e.data)
      .find(
        (d): d is Extract<AgentEvent, { type: "function_execution_end" }> =>
          d.type === "function_execution_end" && d.function_call_id === "s4",
      );
    expect(refused).toMatchObject({ is_error: true, result: { details: { error: "handler_error", code: "depth_exceeded" } } });
    // No fourth level was ever started.
    const c4 = await childOf(c3, await subAgentMessageId(c3), "s4");
    expect(await ui.turnState(c4)).toBeNull();
    // Each level's join carried the next level's answer up.
    expect(asText(openaiMessages(replay.requestsFor("openai")[3]).find((m) => m.tool_call_id === "join-s1")?.content)).toContain("c1 done");
  });

  it("stopping the parent stops its child, and the child's parked call is closed without running", async () => {
    const sid = "sa-stop";
    const child = await childOf(sid, rootRun(sid), "spawn-1");
    replay.enqueue("openai", spawnAndJoin(child, "Publish 'never'."));
    replay.enqueue("anthropic", reply(callAgentTrigger("notes::publish", { text: "never" }, "pub-1")));
    await ui.startTurn(sid, "Publish 'never' through a helper.");
    await ui.reached(child, "function_awaiting_approval");
    await ui.reached(sid, "function_awaiting_approval");

    const res = await ui.post(`api/turns/${sid}/stop`, {});
    expect(res.status).toBe(200);
    const parent = await ui.finished(sid);
    const stopped = await ui.finished(child);
    expect(stopped.view.state).toBe("stopped");
    expect(published.filter((p) => p.text === "never")).toEqual([]);
    expect(parent.view.state).toBe("stopped");
    // The parent's join and the child's publish each have a result on the transcript (nothing dangling).
    const results = async (s: string) =>
      (await ui.transcript(s)).filter((m) => m.role === "function_result").map((m) => (m as { function_call_id: string }).function_call_id);
    expect(await results(sid)).toEqual(["spawn-1", "join-1"]);
    expect(await results(child)).toEqual(["pub-1"]);
  });

  it("a parent whose run ends without joining stops the child it left running", async () => {
    const sid = "sa-leave";
    const child = await childOf(sid, rootRun(sid), "spawn-1");
    replay.enqueue(
      "openai",
      reply(callAgentTrigger("harness::spawn", { task: "Publish 'later'.", ...CHILD_MODEL }, "spawn-1")),
      reply(say("I started a helper and I am done.")),
    );
    replay.enqueue("anthropic", reply(callAgentTrigger("notes::publish", { text: "later" }, "pub-1")));
    await ui.startTurn(sid, "Start a helper, do not wait.");
    await ui.finished(sid);
    expect((await ui.finished(child)).view.state).toBe("stopped");
    expect(published.filter((p) => p.text === "later")).toEqual([]);
  });
});

describe("the sub-agents worker replaced by configuration", () => {
  let replay: ReplayServer;
  let engine: EngineServer;
  let iii: IIIClient;
  let mine: IIIClient;
  /** What the replacement's spawn received: the model's arguments and who called (its metadata). */
  const asked: { data: Record<string, unknown>; meta: Record<string, unknown> }[] = [];

  beforeAll(async () => {
    replay = await startProviderReplay();
    engine = await startEngine({
      env: { ...replayEnv(replay), HARNESS_DISABLE: "sub-agents", III_PERMISSIONS_PATH: permissionsFile(PERMISSIONS) },
    });
    iii = registerWorker(engine.wsUrl, { workerName: "replace-client", otel: { enabled: false } });
    // Someone's own sub-agents: registered with the unmodified iii-sdk, no harness step.
    mine = registerWorker(engine.wsUrl, { workerName: "my-sub-agents", otel: { enabled: false } });
    mine.registerFunction("harness::spawn", async (req: Record<string, unknown>, metadata?: unknown) => {
      asked.push({ data: req, meta: metaOf(metadata) });
      return { child_session_id: "my-child-1", started: true };
    });
    await untilListed(
      iii,
      "my harness::spawn, the built-in orchestrator, no built-in sub-agents",
      (fns) =>
        fns.find((f) => f.function_id === "harness::spawn")?.worker_name === "my-sub-agents" &&
        fns.some((f) => f.function_id === "run::start") &&
        !fns.some((f) => f.function_id === "harness::stop_children"),
      { include_internal: true },
    );
  });

  afterAll(() => stopAll(engine, replay, iii, mine));

  it("HARNESS_DISABLE=sub-agents leaves the built-in out; the model's spawn reaches the iii-sdk process's, and runs end cleanly without it", async () => {
    const ui = turnClient(engine, () => iii);
    replay.enqueue("openai", reply(callAgentTrigger("harness::spawn", { task: "anything" }, "spawn-1")), reply(say("Delegated.")));
    await ui.startTurn("sa-replaced", "Delegate it.");
    const { events } = await ui.finished("sa-replaced");
    expect(asked).toEqual([
      { data: { task: "anything" }, meta: expect.objectContaining({ session_id: "sa-replaced", function_call_id: "spawn-1" }) },
    ]);
    const end = events
      .map((e) => e.data)
      .find((d): d is Extract<AgentEvent, { type: "function_execution_end" }> => d.type === "function_execution_end");
    expect(end).toMatchObject({ is_error: false, result: { details: { child_session_id: "my-child-1", started: true } } });
    expect(types(events).at(-1)).toBe("agent_end");
  });
});
