// The sub-agents worker alone against the engine core served in-process (tests/support/node-engine.ts) (run in Node with runWorkers), with the
// engine's real state triggers, stream triggers, cron and engine-held bindings. The orchestrator and
// the approval gate are stand-ins on their ids: the orchestrator's public contract only
// (tests/support/run-contract.ts: `run::status`, `run::request`, `turn::subscribe`, from scopes of
// the stand-in's own), `run::start` stores a run, `turn::stop` ends it, `approval::resolve` records
// the decision. So each rule is seen where it lives: the limits, the deterministic child, the join
// that parks and the wake that ends it, the sweep, the event mirror, the cascade.
import {
  AGENT_EVENTS_STREAM,
  CHILD_EVENT,
  HARNESS_CHILDREN,
  HARNESS_JOIN,
  HARNESS_SPAWN,
  HARNESS_STOP_CHILDREN,
  SUB_AGENT_MAX_LIVE_CHILDREN,
  SUB_AGENT_MAX_PER_TREE,
  type AgentEvent,
  type RunRequestView,
  type RunStatus,
  type SubAgentChildEvent,
  type TurnState,
} from "@iii-edge/protocol/harness";
import { subAgentMessageId, subAgentSessionId } from "../src/ids.ts";
import type { WorkerModule } from "@iii-edge/sdk-edge/worker";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import { serveRunContract, type RunContract } from "@iii-edge/test-support/run-contract";
import { until } from "@iii-edge/test-support/wait";
import { ON_CHILD_EVENT, ON_CHILD_STATE, SCOPE_WAITS, SWEEP } from "../src/constants.ts";
import { worker } from "../src/index.ts";
import { worker as budgetTracker } from "@iii-edge/worker-budget-tracker";
import { worker as providers } from "@iii-edge/worker-providers";

/** State-trigger deliveries go through the engine's durable queue: a few hops on a busy box. */
const FIRE_MS = 20_000;

let engine: NodeEngine;
let subAgents: RunningWorkers;
/** The real budget-tracker (with the providers' models catalog it prices by), as deploy/harness.ts composes them. */
let budgets: RunningWorkers;
let orch: RunningWorkers;
let runs: RunContract;
const started: Record<string, unknown>[] = [];
const stops: string[] = [];
const resolved: { session_id: string; function_call_id: string; decision: string; reason?: string | null }[] = [];
const followed: { group: string; data: SubAgentChildEvent }[] = [];

const trigger = <T = unknown>(function_id: string, payload: unknown, metadata?: unknown) =>
  orch.client.trigger<unknown, T>(metadata === undefined ? { function_id, payload } : { function_id, payload, metadata });
/** The metadata the orchestrator sends with a model's call: who is calling (the payload is the model's). */
const asModel = (session_id: string, function_call_id: string, function_id: string) => ({ session_id, function_call_id, function_id });
/** Ids of the engine's trigger bindings calling `function_id`. */
const bindings = async (function_id: string) =>
  (await trigger<{ registered_triggers: { id: string }[] }>("engine::registered-triggers::list", { function_id })).registered_triggers.map(
    (t) => t.id,
  );
const codeOf = async (p: Promise<unknown>): Promise<string | undefined> =>
  p.then(
    () => undefined,
    (e: { code?: string }) => e.code,
  );

/** A run as `run::status` answers it. */
const setTurn = (sid: string, state: TurnState, run_id: string, extra: Partial<RunStatus> = {}) =>
  runs.setStatus({ session_id: sid, state, run_id, turn_count: 1, stop_requested: false, final_text: null, ...extra });
const turnOf = (sid: string) => runs.status(sid);

/** A parent in the middle of a function batch (where a model's spawn runs), with a run request. */
async function runningParent(sid: string, run = "run-1", budget_id?: string): Promise<void> {
  await runs.setRequest(sid, { provider: "openai", model: "gpt-4o", mode: null, max_turns: 6, ...(budget_id ? { budget_id } : {}) });
  await setTurn(sid, "function_execute", run);
}
/** A spawn as the orchestrator dispatches a model's call: its metadata names the caller. */
const spawnFrom = (parent: string, cid: string, extra: Record<string, unknown> = {}) =>
  trigger<{ child_session_id: string; started: boolean; depth: number; existing?: true }>(
    HARNESS_SPAWN,
    { task: `task of ${cid}`, ...extra },
    asModel(parent, cid, HARNESS_SPAWN),
  );
const joinFrom = (parent: string, cid: string, child: string, extra: Record<string, unknown> = {}) =>
  trigger<Record<string, unknown>>(HARNESS_JOIN, { child_session_id: child, ...extra }, asModel(parent, cid, HARNESS_JOIN));
const endChild = (child: string, text: string, state: TurnState = "stopped") =>
  setTurn(child, state, "any", { turn_count: 2, final_text: text });

beforeAll(async () => {
  engine = await startNodeEngine();
  subAgents = runWorkers(engine.wsUrl, [worker as WorkerModule<unknown>], { workerName: "sub-agents-under-test" });
  budgets = runWorkers(engine.wsUrl, [budgetTracker as WorkerModule<unknown>, providers as WorkerModule<unknown>], {
    workerName: "budgets",
  });
  orch = runWorkers(engine.wsUrl, [], { workerName: "orchestrator-stand-in" });
  runs = serveRunContract(orch.client, "stand_in");
  orch.client.registerFunction("run::start", async (req: Record<string, unknown> & { session_id: string; message_id: string }) => {
    const { _caller_worker_id: _, ...rest } = req;
    const cur = await turnOf(req.session_id);
    if (cur && cur.state !== "stopped" && cur.state !== "failed")
      return { session_id: req.session_id, started: false, reason: "session_busy" };
    started.push(rest);
    // What the orchestrator answers for: the run request (a child's own children inherit from it), the run.
    await runs.setRequest(req.session_id, {
      provider: (req.provider as string | undefined) ?? "openai",
      model: req.model as string,
      mode: (req.mode as RunRequestView["mode"] | undefined) ?? null,
      ...(typeof req.max_turns === "number" ? { max_turns: req.max_turns } : {}),
    });
    await setTurn(req.session_id, "provisioning", req.message_id);
    return { session_id: req.session_id, started: true };
  });
  orch.client.registerFunction("turn::stop", async (req: { session_id: string }) => {
    stops.push(req.session_id);
    const cur = await turnOf(req.session_id);
    if (!cur || cur.state === "stopped" || cur.state === "failed")
      return { session_id: req.session_id, stopping: false, state: cur?.state ?? null };
    await setTurn(req.session_id, "stopped", cur.run_id, { final_text: "run stopped by user" });
    return { session_id: req.session_id, stopping: true, state: cur.state };
  });
  orch.client.registerFunction(
    "approval::resolve",
    async (req: { session_id: string; function_call_id: string; decision: string; reason?: string | null }) => {
      resolved.push({ session_id: req.session_id, function_call_id: req.function_call_id, decision: req.decision, reason: req.reason });
      return { ok: true };
    },
  );
  orch.client.registerFunction(
    "test::follow",
    async (p: { groupId: string; event: { type: string; event?: { type: string; data: SubAgentChildEvent } } }) => {
      if (p.event.type === "event" && p.event.event?.type === CHILD_EVENT) followed.push({ group: p.groupId, data: p.event.event.data });
      return null;
    },
  );
  // A console following every session (no group filter): each push says whose group it is.
  orch.client.registerTrigger({ type: "stream", function_id: "test::follow", config: { stream_name: AGENT_EVENTS_STREAM } });
  await until(
    async () => {
      const r = await trigger<{ functions: { function_id: string }[] }>("engine::functions::list", { include_internal: true });
      const ids = r.functions.map((f) => f.function_id);
      return [HARNESS_SPAWN, HARNESS_JOIN, HARNESS_CHILDREN, HARNESS_STOP_CHILDREN, "run::start", "test::follow"].every((id) =>
        ids.includes(id),
      );
    },
    "the worker and the stand-ins registered",
    30_000,
  );
});

afterAll(async () => {
  await Promise.allSettled([orch?.shutdown(), subAgents?.shutdown(), budgets?.shutdown()]);
  await engine?.stop();
});

describe("harness::spawn", () => {
  it("starts one child with its own run (the task as its user message, the parent's model, a parent link); a repeat of the call finds the same child", async () => {
    await runningParent("p-spawn");
    const first = await spawnFrom("p-spawn", "call-1", { task: "count the files" });
    const child = await subAgentSessionId("p-spawn", "run-1", "call-1");
    expect(first).toMatchObject({ child_session_id: child, started: true, depth: 1 });
    expect(first.existing).toBeUndefined();
    const again = await spawnFrom("p-spawn", "call-1", { task: "count the files" });
    expect(again).toMatchObject({ child_session_id: child, started: true, existing: true });
    const runs = started.filter((s) => s.session_id === child);
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({
      message_id: await subAgentMessageId(child),
      provider: "openai",
      model: "gpt-4o",
      max_turns: 6,
      messages: [{ role: "user", content: [{ type: "text", text: "count the files" }] }],
      parent: { session_id: "p-spawn", run_id: "run-1", function_call_id: "call-1", depth: 1, root_session_id: "p-spawn" },
    });
    // Another call is another child; the listing shows both with their states.
    const other = await spawnFrom("p-spawn", "call-2", { max_turns: 50, model: "claude-sonnet-4-6" });
    expect(started.find((s) => s.session_id === other.child_session_id)).toMatchObject({ max_turns: 6, model: "claude-sonnet-4-6" }); // never more rounds than the parent
    const list = await trigger<{ children: { child_session_id: string; state: string; depth: number; task: string }[] }>(
      HARNESS_CHILDREN,
      {},
      asModel("p-spawn", "l-1", HARNESS_CHILDREN),
    );
    expect(list.children.map((c) => [c.child_session_id, c.state, c.depth])).toEqual([
      [child, "provisioning", 1],
      [other.child_session_id, "provisioning", 1],
    ]);
  });

  it("is refused with a clear error for a parent with no running turn, for another session's parent, for bad input", async () => {
    await setTurn("p-idle", "stopped", "run-1");
    expect(await codeOf(spawnFrom("p-idle", "c"))).toBe("parent_not_running");
    await runningParent("p-mine");
    expect(await codeOf(spawnFrom("p-mine", "c", { task: "x", parent_session_id: "p-spawn" }))).toBe("forbidden");
    expect(await codeOf(spawnFrom("p-mine", "c", { task: "  " }))).toBe("invalid_input");
    expect(await codeOf(spawnFrom("p-mine", "c", { task: "x", budget_share: 2 }))).toBe("invalid_input");
    // The calling session comes from the metadata only: a payload claiming one names no parent.
    expect(await codeOf(trigger(HARNESS_SPAWN, { task: "x", session_id: "p-mine", function_call_id: "c" }))).toBe("invalid_input");
    expect(await codeOf(spawnFrom("p/mine", "c", { task: "x" }))).toBe("invalid_input");
    expect(started.some((s) => (s.session_id as string).startsWith("p-idle~") || (s.session_id as string).startsWith("p-mine~"))).toBe(
      false,
    );
  });

  it("depth: a child may spawn and so may its child; one at depth 3 gets depth_exceeded", async () => {
    await runningParent("p-deep");
    let parent = "p-deep";
    for (const depth of [1, 2, 3]) {
      const r = await spawnFrom(parent, `d${depth}`);
      expect(r.depth).toBe(depth);
      parent = r.child_session_id; // the stand-in's run::start left it running (provisioning)
    }
    const refused = spawnFrom(parent, "d4", { task: "go deeper" });
    await expect(refused).rejects.toMatchObject({ code: "depth_exceeded", message: expect.stringContaining("at most 3 deep") });
  });

  it(`fan-out: ${SUB_AGENT_MAX_LIVE_CHILDREN} live children per parent; the next waits for one to end`, async () => {
    await runningParent("p-wide");
    const kids: string[] = [];
    for (let i = 0; i < SUB_AGENT_MAX_LIVE_CHILDREN; i++) kids.push((await spawnFrom("p-wide", `w${i}`)).child_session_id);
    await expect(spawnFrom("p-wide", "w-extra")).rejects.toMatchObject({
      code: "too_many_children",
      message: expect.stringContaining(HARNESS_JOIN),
    });
    await endChild(kids[0], "done");
    expect((await spawnFrom("p-wide", "w-extra")).started).toBe(true);
  });

  it(`per run: ${SUB_AGENT_MAX_PER_TREE} sessions in one root run's tree, every depth counted; the root's next run starts afresh`, async () => {
    await runningParent("p-tree");
    let n = 0;
    // One child that itself spawns: its children count against the same root run.
    const mid = (await spawnFrom("p-tree", "mid")).child_session_id;
    n++;
    while (n < SUB_AGENT_MAX_PER_TREE) {
      const batch: string[] = [];
      for (let i = 0; i < SUB_AGENT_MAX_LIVE_CHILDREN - 1 && n < SUB_AGENT_MAX_PER_TREE; i++, n++)
        batch.push((await spawnFrom(n % 2 ? "p-tree" : mid, `t${n}`)).child_session_id);
      await Promise.all(batch.map((c) => endChild(c, "ok")));
    }
    await expect(spawnFrom(mid, "t-over")).rejects.toMatchObject({
      code: "too_many_children",
      message: expect.stringContaining(`${SUB_AGENT_MAX_PER_TREE} sub-agents`),
    });
    await expect(spawnFrom("p-tree", "t-over")).rejects.toMatchObject({ code: "too_many_children" });
    await endChild(mid, "ok");
    await runningParent("p-tree", "run-2");
    expect((await spawnFrom("p-tree", "t-next-run")).started).toBe(true);
  });
});

describe("harness::join", () => {
  it("parks (pending, held_by harness::join) while the child runs; the child's end writes the allow that wakes the call; the resumed call gets the final message", async () => {
    await runningParent("p-join");
    const child = (await spawnFrom("p-join", "s-1")).child_session_id;
    const first = await joinFrom("p-join", "j-1", child);
    expect(first).toMatchObject({ pending: true, held_by: HARNESS_JOIN, child_session_id: child, state: "provisioning" });
    expect(first.expires_at).toBeGreaterThan(Date.now() + 29 * 60_000); // the 30 min default
    // The child is followed by its run's subscription and an engine-held stream trigger; the sweep
    // is bound while a join waits.
    expect(runs.subscriptions.get(`sub-agents:state:${child}`)).toEqual({ session_id: child, function_id: ON_CHILD_STATE });
    expect(await bindings(ON_CHILD_EVENT)).toContain(`sub-agents:events:${child}`);
    expect(await bindings(SWEEP)).toEqual(["sub-agents:sweep"]);
    // The orchestrator parks the call (what it writes), then the child finishes.
    await setTurn("p-join", "function_awaiting_approval", "run-1", {
      awaiting_approval: [
        {
          function_call_id: "j-1",
          function_id: HARNESS_JOIN,
          args: { child_session_id: child },
          held_by: HARNESS_JOIN,
          child_session_id: child,
        },
      ],
    });
    await endChild(child, "There are 42 files.");
    const wake = await until(
      () => resolved.find((r) => r.session_id === "p-join" && r.function_call_id === "j-1"),
      "the wake of the parked join",
      FIRE_MS,
    );
    expect(wake).toMatchObject({ decision: "allow", reason: `sub-agent ${child} stopped` });
    // The orchestrator calls harness::join again for the allowed call.
    expect(await joinFrom("p-join", "j-1", child)).toEqual({
      child_session_id: child,
      state: "stopped",
      final_message: "There are 42 files.",
      turn_count: 2,
    });
    expect(await trigger("state::get", { scope: SCOPE_WAITS, key: "p-join/j-1" })).toBeUndefined();
    // The ended child's subscription is ended; it is listed as stopped.
    await until(() => !runs.subscriptions.has(`sub-agents:state:${child}`), "the ended child's subscription ended", FIRE_MS);
    expect(await bindings("stand_in::notify")).not.toContain(`stand_in:sub-agents:state:${child}`);
    const list = await trigger<{ children: { state: string }[] }>(HARNESS_CHILDREN, { parent_session_id: "p-join" });
    expect(list.children[0].state).toBe("stopped");
  });

  it("answers at once for a child that already ended (a failed one with its error); only the parent may join; an unknown child is child_not_found", async () => {
    await runningParent("p-done");
    const child = (await spawnFrom("p-done", "s-1")).child_session_id;
    await setTurn(child, "failed", "x", { error: { kind: "transient", message: "provider down" } });
    expect(await joinFrom("p-done", "j-1", child)).toMatchObject({
      state: "failed",
      error: { kind: "transient", message: "provider down" },
      final_message: null,
    });
    expect(await codeOf(joinFrom("p-spawn", "j-x", child))).toBe("forbidden");
    expect(await codeOf(joinFrom("p-done", "j-y", "p-done~nobody"))).toBe("child_not_found");
  });

  it("a wait past its timeout is woken by the sweep; the resumed call says the child is still running", async () => {
    await runningParent("p-slow");
    const child = (await spawnFrom("p-slow", "s-1")).child_session_id;
    expect(await joinFrom("p-slow", "j-1", child, { timeout_ms: 1 })).toMatchObject({ pending: true });
    await setTurn("p-slow", "function_awaiting_approval", "run-1", {
      awaiting_approval: [{ function_call_id: "j-1", function_id: HARNESS_JOIN, args: {} }],
    });
    await new Promise((r) => setTimeout(r, 5)); // past the 1 ms timeout
    await trigger(SWEEP, {}); // what the cron runs every 15 s (it may get there first: either wakes it once)
    const wake = await until(() => resolved.find((r) => r.session_id === "p-slow"), "the expired wait woken", FIRE_MS);
    expect(wake).toMatchObject({ decision: "allow", reason: expect.stringContaining("waited") });
    const resumed = await joinFrom("p-slow", "j-1", child);
    expect(resumed).toMatchObject({ pending: true, state: "provisioning", message: expect.stringContaining("still running after") });
    expect(resumed.expires_at).toBeUndefined();
    // No join waits any more: the next sweep unbinds its cron (an idle engine is not woken by it).
    await trigger(SWEEP, {});
    expect(await bindings(SWEEP)).toEqual([]);
  });

  it("a wake for a parent that moved on writes no decision", async () => {
    await runningParent("p-gone");
    const child = (await spawnFrom("p-gone", "s-1")).child_session_id;
    expect(await joinFrom("p-gone", "j-1", child)).toMatchObject({ pending: true });
    await setTurn("p-gone", "assistant_streaming", "run-1"); // the call was answered (e.g. a person denied the wait)
    await endChild(child, "late");
    await until(
      async () => (await trigger("state::get", { scope: SCOPE_WAITS, key: "p-gone/j-1" })) === undefined,
      "the wait dropped",
      FIRE_MS,
    );
    expect(resolved.some((r) => r.session_id === "p-gone")).toBe(false);
  });

  it("a worker's direct join with timeout_ms waits in its call and answers when the child ends", async () => {
    await runningParent("p-direct");
    const child = (await spawnFrom("p-direct", "s-1")).child_session_id;
    expect(await trigger(HARNESS_JOIN, { child_session_id: child })).toMatchObject({ pending: true });
    const t0 = Date.now();
    const waiting = trigger<Record<string, unknown>>(HARNESS_JOIN, { child_session_id: child, timeout_ms: 20_000 });
    await new Promise((r) => setTimeout(r, 200));
    await endChild(child, "direct answer");
    expect(await waiting).toMatchObject({ state: "stopped", final_message: "direct answer" });
    expect(Date.now() - t0).toBeLessThan(15_000);
  });
});

describe("budget share (the real budget-tracker)", () => {
  type Spawned = { child_session_id: string; budget_id?: string };
  const budget = (budget_id: string) => trigger<{ ceiling_micros: number; spent_micros: number }>("budget::get", { budget_id });
  const startedWith = (child: string) => started.find((s) => s.session_id === child);

  it("without a share a child spends its parent's budget; with one it gets its own: a share of what is left less what running siblings hold, charged to the parent when it ends", async () => {
    await trigger("budget::create", { budget_id: "b-parent", ceiling_micros: 1_000_000, period: "day" });
    await runningParent("p-budget", "run-1", "b-parent");
    const shared = (await spawnFrom("p-budget", "s-shared")) as Spawned;
    expect(shared.budget_id).toBe("b-parent");
    expect(startedWith(shared.child_session_id)).toMatchObject({ budget_id: "b-parent" });

    const a = (await spawnFrom("p-budget", "s-a", { budget_share: 0.5 })) as Spawned;
    expect(a.budget_id).toMatch(/^sa-/);
    expect(startedWith(a.child_session_id)).toMatchObject({ budget_id: a.budget_id });
    expect((await budget(a.budget_id!)).ceiling_micros).toBe(500_000);
    const b = (await spawnFrom("p-budget", "s-b", { budget_share: 0.5 })) as Spawned;
    expect((await budget(b.budget_id!)).ceiling_micros).toBe(250_000); // a's half is held for it

    await trigger("budget::record", { budget_id: a.budget_id, cost_micros: 120_000, record_id: "a-round-1" });
    await endChild(a.child_session_id, "done");
    await until(async () => (await budget("b-parent")).spent_micros === 120_000, "a's spend charged to the parent", FIRE_MS);
    // a gave its allotment back: 0.5 × (1 000 000 − 120 000 spent − 250 000 held by b).
    const c = (await spawnFrom("p-budget", "s-c", { budget_share: 0.5 })) as Spawned;
    expect((await budget(c.budget_id!)).ceiling_micros).toBe(315_000);
  });

  it("a share of a budget with nothing left to give is budget_exhausted, and starts nothing", async () => {
    await trigger("budget::create", { budget_id: "b-empty", ceiling_micros: 10, period: "day" });
    await trigger("budget::record", { budget_id: "b-empty", cost_micros: 10, record_id: "all-of-it" });
    await runningParent("p-broke", "run-1", "b-empty");
    await expect(spawnFrom("p-broke", "s-1", { budget_share: 1 })).rejects.toMatchObject({ code: "budget_exhausted" });
    expect(started.some((s) => (s.session_id as string).startsWith("p-broke~"))).toBe(false);
  });
});

describe("following and stopping", () => {
  it("a child's events reach every ancestor's followers as child_event (token deltas left out)", async () => {
    await runningParent("mirror-root");
    const parent = (await spawnFrom("mirror-root", "s-1")).child_session_id;
    const grandchild = (await spawnFrom(parent, "s-2")).child_session_id;
    const ev = (data: AgentEvent, seq: number) =>
      trigger("stream::set", {
        stream_name: AGENT_EVENTS_STREAM,
        group_id: grandchild,
        item_id: `${grandchild}-${String(seq).padStart(12, "0")}`,
        data,
      });
    const parked: AgentEvent = {
      type: "turn_state_changed",
      event_type: "state:updated",
      new_value: {
        session_id: grandchild,
        state: "function_awaiting_approval",
        turn_count: 1,
        awaiting_approval: [{ function_call_id: "x-1", function_id: "mail::send", args: {} }],
      },
    };
    await ev({ type: "message_update", message: { role: "user", content: [], timestamp: 0 }, llm_event: { type: "ping" } }, 1);
    await ev(parked, 2);
    const mirrored = await until(
      () => {
        const got = followed.filter((f) => f.data.child_session_id === grandchild);
        return got.length >= 2 ? got : undefined;
      },
      "the grandchild's event at its parent and at the root",
      FIRE_MS,
    );
    expect(mirrored.map((f) => f.group).sort()).toEqual([parent, "mirror-root"].sort());
    for (const f of mirrored)
      expect(f.data).toEqual({
        type: CHILD_EVENT,
        child_session_id: grandchild,
        parent_session_id: parent,
        depth: 2,
        item_id: `${grandchild}-000000000002`,
        event: parked,
      });
    // Not forwarded again from the parent's group (the grandchild sent it to each ancestor itself):
    // an absence, so a short grace for a stray second forward to show up.
    await new Promise((r) => setTimeout(r, 300));
    expect(followed.filter((f) => f.data.child_session_id === grandchild)).toHaveLength(2);
    // Its run's last event is mirrored too, and then nothing more is followed.
    await ev({ type: "agent_end", messages: [] }, 3);
    await until(
      async () => !(await bindings(ON_CHILD_EVENT)).includes(`sub-agents:events:${grandchild}`),
      "the grandchild's event trigger removed",
      FIRE_MS,
    );
    expect(followed.filter((f) => f.data.child_session_id === grandchild && f.data.event.type === "agent_end")).toHaveLength(2);
  });

  it("harness::stop_children stops the live children; a child whose parent's run ended is stopped at its next write", async () => {
    await runningParent("p-stop");
    const a = (await spawnFrom("p-stop", "s-a")).child_session_id;
    const b = (await spawnFrom("p-stop", "s-b")).child_session_id;
    await endChild(b, "finished early");
    expect(await trigger(HARNESS_STOP_CHILDREN, { parent_session_id: "p-stop", reason: "parent_stopped" })).toEqual({
      parent_session_id: "p-stop",
      stopped: [a],
    });
    expect(await turnOf(a)).toMatchObject({ state: "stopped" });

    await runningParent("p-orphan");
    const c = (await spawnFrom("p-orphan", "s-c")).child_session_id;
    await setTurn("p-orphan", "stopped", "run-1"); // the parent ended and its cascade was lost
    await setTurn(c, "assistant_streaming", (await turnOf(c))!.run_id);
    await until(async () => stops.includes(c) && (await turnOf(c))?.state === "stopped", "the orphan stopped", FIRE_MS);
  });
});
