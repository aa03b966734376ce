// Permission modes and approvals end to end (docs/harness.md "Permission modes", docs/harness-contracts.md
// §3.7): `npm start`'s engine with the orchestrator inside the Worker, the OpenAI replay, the
// application's functions registered with the unmodified iii-sdk, and — run beside the engine so a
// test can change them — the real policy worker (its rules swapped the way an edit of the file
// swaps them) and the real approval-gate (its clock injected, so expiry needs no wait). What a
// person does: set a session's mode and lists, watch the inbox, decide; what they notice: which
// calls run, which wait, what the model reads.
import {
  BEFORE_FUNCTION_CALL_TOPIC,
  HARNESS_JOIN,
  approvalArgsHash,
  type BeforeFunctionCallPayload,
  type HookEnvelope,
  APPROVAL_PENDING_CREATED,
  APPROVAL_PENDING_RESOLVED,
  type FunctionResultMessage,
  type PendingApprovalRecord,
  type PendingResolvedEvent,
} from "@iii-edge/protocol/harness";
import { subAgentSessionId } from "@iii-edge/worker-sub-agents/ids";
import type { WorkerModule } from "@iii-edge/sdk-edge/worker";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { worker as gateWorker } from "@iii-edge/worker-approval-gate";
import { worker as policyWorker } from "@iii-edge/worker-policy";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { staticPolicy, type PolicySource } from "@iii-edge/worker-policy";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, reply, say, startProviderReplay, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { replayEnv } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { asText, metaOf, openaiMessages, textOf, turnClient, TURN_DEADLINE_MS } from "./turn-client.ts";

const PERMISSIONS = `version: 1
rules:
  - rule_id: no-deletes
    function: files::delete
    action: deny
  - 'weather::*'
  - harness::spawn
  - harness::join
# anything else (mail::send) waits for a person
`;
/** The same rules after an operator's edit: mail::send still asks, but the policy is another one. */
const PERMISSIONS_EDITED = `${PERMISSIONS}  - rule_id: no-wipes
    function: files::wipe
    action: deny
`;
/** This deployment's expiry (APPROVAL_PENDING_TIMEOUT_MS): shorter than the 30 min default. */
const TIMEOUT_MS = 600_000;

let replay: ReplayServer;
let engine: EngineServer;
let iii: IIIClient;
let apps: IIIClient;
let gate: RunningWorkers;
let policy: RunningWorkers;
let person: RunningWorkers;
/** The approval gate's clock: real time plus what a test moves it on by. */
let clockOffsetMs = 0;
/** The policy in force; a test replaces it the way an edit of the file does. */
let rules: PolicySource = staticPolicy(PERMISSIONS, "test rules");
const ran: { fn: string; args: Record<string, unknown>; sid: unknown }[] = [];
const created: (PendingApprovalRecord & { status: string })[] = [];
const resolved: PendingResolvedEvent[] = [];

let ui: ReturnType<typeof turnClient>;
const ranIn = (fn: string, sid: string) => ran.filter((r) => r.fn === fn && r.sid === sid);
const call = <T = unknown>(function_id: string, payload: unknown) => person.client.trigger<unknown, T>({ function_id, payload });
type Settings = { settings: { mode: string; always_allow: { function_id: string }[]; approved_always: { function_id: string }[] } };
const pendingOf = (sid: string, cid: string) =>
  call<{ pending: PendingApprovalRecord } | null>("approval::get-pending", { session_id: sid, function_call_id: cid });
const parked = (sid: string) => ui.reached(sid, "function_awaiting_approval");
const results = async (sid: string) => (await ui.transcript(sid)).filter((m): m is FunctionResultMessage => m.role === "function_result");

beforeAll(async () => {
  replay = await startProviderReplay();
  engine = await startEngine({
    env: {
      ...replayEnv(replay, { anthropic: true }),
      HARNESS_DISABLE: "policy,approval-gate",
    },
    vars: { APPROVAL_PENDING_TIMEOUT_MS: String(TIMEOUT_MS) },
  });
  policy = runWorkers(engine.wsUrl, [
    { ...policyWorker, configFrom: () => ({ source: { current: () => rules.current() } }) } as WorkerModule<unknown>,
  ]);
  gate = runWorkers(engine.wsUrl, [
    { ...gateWorker, configFrom: () => ({ now: () => Date.now() + clockOffsetMs }) } as WorkerModule<unknown>,
  ]);
  person = runWorkers(engine.wsUrl, [], { workerName: "approvals-person" });
  iii = registerWorker(engine.wsUrl, { workerName: "approvals-e2e-client", otel: { enabled: false } });
  ui = turnClient(engine, () => iii);
  apps = registerWorker(engine.wsUrl, { workerName: "approvals-apps", otel: { enabled: false } });
  for (const fn of ["mail::send", "files::delete", "weather::forecast"])
    apps.registerFunction(fn, async (args: Record<string, unknown>, metadata?: unknown) => {
      ran.push({ fn, args, sid: metaOf(metadata).session_id });
      return { ok: true, fn };
    });
  // A notification worker: plain subscribers on the inbox topics.
  person.client.registerFunction("notify::created", (e: PendingApprovalRecord & { status: string }) => {
    created.push(e);
    return null;
  });
  person.client.registerFunction("notify::resolved", (e: PendingResolvedEvent) => {
    resolved.push(e);
    return null;
  });
  person.client.registerTrigger({ type: "subscribe", function_id: "notify::created", config: { topic: APPROVAL_PENDING_CREATED } });
  person.client.registerTrigger({ type: "subscribe", function_id: "notify::resolved", config: { topic: APPROVAL_PENDING_RESOLVED } });
  await until(async () => {
    const r = await iii.trigger<unknown, { functions: { function_id: string }[] }>({ function_id: "engine::functions::list", payload: {} });
    const ids = r.functions.map((f) => f.function_id);
    return ["policy::check_permissions", "approval::set-mode", "mail::send", "notify::resolved"].every((id) => ids.includes(id));
  }, "the policy, the gate, the apps and the subscribers registered");
  await until(async () => (await fetch(`${engine.url}/api/turns/none`)).status === 404 || undefined, "the harness routes", 30_000, 200);
});

afterAll(async () => {
  await Promise.allSettled([iii?.shutdown(), apps?.shutdown(), person?.shutdown(), gate?.shutdown(), policy?.shutdown()]);
  await engine?.stop();
  await replay?.close();
});

beforeEach(() => {
  replay.reset();
  clockOffsetMs = 0;
  rules = staticPolicy(PERMISSIONS, "test rules");
});

describe("modes and lists", () => {
  it("a new session is manual: the file decides and anything it does not allow waits for a person", async () => {
    const sid = `manual-${crypto.randomUUID()}`;
    expect(await call<Settings & { source: string }>("approval::get-settings", { session_id: sid })).toEqual({
      settings: { mode: "manual", always_allow: [], approved_always: [], mode_set_at: 0 },
      source: "defaults",
    });
    // always_allow is dormant under manual.
    await call("approval::add-always-allow", { session_id: sid, function_id: "mail::send" });
    replay.enqueue(
      "openai",
      reply(
        callAgentTrigger("weather::forecast", { city: "Oslo" }, "w-1"),
        callAgentTrigger("mail::send", { to: "ada@example.com" }, "m-1"),
      ),
      reply(say("Done.")),
    );
    await ui.startTurn(sid, "weather, then mail ada");
    const view = await parked(sid);
    expect(view.awaiting_approval?.map((a) => a.function_call_id)).toEqual(["m-1"]);
    expect(ranIn("weather::forecast", sid)).toHaveLength(1);
    expect(ranIn("mail::send", sid)).toHaveLength(0);
    expect((await call("approval::resolve", { session_id: sid, function_call_id: "m-1", decision: "allow" })) as unknown).toEqual({
      ok: true,
    });
    await ui.finished(sid);
    expect(ranIn("mail::send", sid)).toHaveLength(1);
  });

  it("approve always: the person's remembered decision lets the call run without asking, in manual", async () => {
    const sid = `always-${crypto.randomUUID()}`;
    const s = await call<Settings>("approval::approve-always", { session_id: sid, function_id: "mail::send" });
    expect(s.settings).toMatchObject({ mode: "manual", approved_always: [{ function_id: "mail::send", granted_by: "user_click" }] });
    replay.enqueue("openai", reply(callAgentTrigger("mail::send", { to: "ada@example.com" }, "m-1")), reply(say("Sent.")));
    await ui.startTurn(sid, "mail ada");
    const { events } = await ui.finished(sid);
    expect(events.some((e) => e.data.type === "turn_state_changed" && e.data.new_value.state === "function_awaiting_approval")).toBe(false);
    expect(ranIn("mail::send", sid)).toHaveLength(1);
  });

  it("auto: the session's always_allow list runs without asking; removing an entry makes it ask again", async () => {
    const sid = `auto-${crypto.randomUUID()}`;
    await call("approval::set-mode", { session_id: sid, mode: "auto" });
    await call("approval::add-always-allow", { session_id: sid, function_id: "mail::*" });
    replay.enqueue("openai", reply(callAgentTrigger("mail::send", { to: "ada@example.com" }, "m-1")), reply(say("Sent.")));
    await ui.startTurn(sid, "mail ada");
    await ui.finished(sid);
    expect(ranIn("mail::send", sid)).toHaveLength(1);

    const removed = await call<Settings>("approval::remove-always-allow", { session_id: sid, function_id: "mail::*" });
    expect(removed.settings).toMatchObject({ mode: "auto", always_allow: [] });
    const sid2 = `auto-removed-${crypto.randomUUID()}`;
    await call("approval::set-mode", { session_id: sid2, mode: "auto" });
    replay.enqueue("openai", reply(callAgentTrigger("mail::send", { to: "bob@example.com" }, "m-2")), reply(say("Not sent.")));
    await ui.startTurn(sid2, "mail bob");
    await parked(sid2);
    await call("approval::resolve", { session_id: sid2, function_call_id: "m-2", decision: "deny" });
    await ui.finished(sid2);
    expect(ranIn("mail::send", sid2)).toHaveLength(0);
  });

  it("full allows what the file denies, but the kernel stays out of reach: the model cannot change its own mode or lists", async () => {
    const sid = `full-${crypto.randomUUID()}`;
    await call("approval::set-mode", { session_id: sid, mode: "full" });
    replay.enqueue(
      "openai",
      reply(
        callAgentTrigger("files::delete", { path: "/tmp/x" }, "d-1"),
        callAgentTrigger("approval::set-mode", { session_id: sid, mode: "manual" }, "k-1"),
        callAgentTrigger("approval::add-always-allow", { session_id: sid, function_id: "*" }, "k-2"),
        callAgentTrigger("approval::resolve", { session_id: sid, function_call_id: "d-1", decision: "allow" }, "k-3"),
      ),
      reply(say("Done.")),
    );
    await ui.startTurn(sid, "delete /tmp/x and make yourself at home");
    await ui.finished(sid);
    expect(ranIn("files::delete", sid)).toHaveLength(1);
    const byId = new Map((await results(sid)).map((r) => [r.function_call_id, r]));
    expect(byId.get("d-1")?.is_error).toBe(false);
    for (const id of ["k-1", "k-2", "k-3"]) {
      expect(byId.get(id), id).toMatchObject({ is_error: true, details: { denied_by: "permissions", rule_id: "kernel" } });
    }
    expect((await call<Settings>("approval::get-settings", { session_id: sid })).settings).toMatchObject({
      mode: "full",
      always_allow: [],
    });
  });

  it("bad input is a typed error and changes nothing", async () => {
    const sid = `bad-${crypto.randomUUID()}`;
    for (const [fn, payload] of [
      ["approval::set-mode", { session_id: sid, mode: "yolo" }],
      ["approval::set-mode", { session_id: `${sid}/x`, mode: "full" }],
      ["approval::add-always-allow", { session_id: sid, function_id: "" }],
      ["approval::approve-always", { session_id: sid, function_id: "a*b" }],
      ["approval::get-pending", { session_id: sid }],
      ["approval::list-pending", { cursor: "x" }],
    ] as const) {
      await expect(call(fn, payload), fn).rejects.toMatchObject({ code: "invalid_arguments" });
    }
    expect(await call("approval::get-settings", { session_id: sid })).toMatchObject({ source: "defaults" });
    expect(await call("approval::clear-settings", { session_id: sid })).toEqual({ cleared: false });
    await call("approval::set-mode", { session_id: sid, mode: "auto" });
    expect(await call("approval::clear-settings", { session_id: sid })).toEqual({ cleared: true });
    expect(await call("approval::get-settings", { session_id: sid })).toMatchObject({ source: "defaults", settings: { mode: "manual" } });
  });

  it("the inbox: a waiting call is listed with what the person approves and announced; its end is announced once", async () => {
    const sid = `inbox-${crypto.randomUUID()}`;
    replay.enqueue("openai", reply(callAgentTrigger("mail::send", { to: "ada@example.com", token: "sekrit" }, "i-1")), reply(say("OK.")));
    await ui.startTurn(sid, "mail ada");
    await parked(sid);
    const { pending } = (await pendingOf(sid, "i-1"))!;
    expect(pending).toMatchObject({
      session_id: sid,
      function_call_id: "i-1",
      function_id: "mail::send",
      arguments_excerpt: { to: "ada@example.com", token: "<redacted>" },
      depth: 0,
      args_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      policy_version: expect.stringMatching(/^[0-9a-f]{16}$/),
    });
    expect(pending.expires_at - pending.pending_at).toBe(TIMEOUT_MS);
    const listed = await call<{ pending: PendingApprovalRecord[] }>("approval::list-pending", { session_id: sid });
    expect(listed.pending).toEqual([pending]);
    expect((await ui.turnState(sid))?.awaiting_approval?.[0]).toMatchObject({
      args_hash: pending.args_hash,
      expires_at: pending.expires_at,
    });
    await until(() => created.some((e) => e.session_id === sid), "pending-created announced");
    expect(created.find((e) => e.session_id === sid)).toMatchObject({ status: "pending", function_call_id: "i-1" });

    await call("approval::resolve", { session_id: sid, function_call_id: "i-1", decision: "deny", reason: "not today" });
    await ui.finished(sid);
    expect((await pendingOf(sid, "i-1")) ?? null).toBeNull();
    await until(() => resolved.some((e) => e.session_id === sid), "pending-resolved announced");
    expect(resolved.filter((e) => e.session_id === sid)).toEqual([
      expect.objectContaining({ function_call_id: "i-1", function_id: "mail::send", outcome: "deny", reason: "not today" }),
    ]);
  });
});

describe("a decision is bound to what was approved", () => {
  it("the policy changed between asking and deciding: the allow does not count, the person is asked again", async () => {
    const sid = `policy-changed-${crypto.randomUUID()}`;
    replay.enqueue("openai", reply(callAgentTrigger("mail::send", { to: "ada@example.com" }, "p-1")), reply(say("Sent.")));
    await ui.startTurn(sid, "mail ada");
    await parked(sid);
    const before = (await pendingOf(sid, "p-1"))!.pending;
    rules = staticPolicy(PERMISSIONS_EDITED, "edited rules");
    await call("approval::resolve", { session_id: sid, function_call_id: "p-1", decision: "allow" });
    const again = await until(async () => {
      const p = await pendingOf(sid, "p-1");
      return p && p.pending.policy_version !== before.policy_version ? p.pending : undefined;
    }, "asked again under the new policy");
    expect(again).toMatchObject({ function_id: "mail::send", args_hash: before.args_hash });
    expect((await ui.turnState(sid))?.state).toBe("function_awaiting_approval");
    expect(ranIn("mail::send", sid)).toHaveLength(0);
    await until(() => created.filter((e) => e.session_id === sid).length === 2, "announced twice");

    await call("approval::resolve", { session_id: sid, function_call_id: "p-1", decision: "allow" });
    await ui.finished(sid);
    expect(ranIn("mail::send", sid)).toHaveLength(1);
  });

  it("an allow for other arguments than the call has does not count", async () => {
    const sid = `args-changed-${crypto.randomUUID()}`;
    replay.enqueue("openai", reply(callAgentTrigger("mail::send", { to: "all@example.com" }, "a-1")), reply(say("Sent.")));
    await ui.startTurn(sid, "mail everyone");
    await parked(sid);
    const shown = (await pendingOf(sid, "a-1"))!.pending;
    // What the person's screen showed was another call's arguments.
    const stale = "0".repeat(64);
    await call("approval::resolve", { session_id: sid, function_call_id: "a-1", decision: "allow", args_hash: stale });
    const again = await until(async () => (await pendingOf(sid, "a-1"))?.pending, "asked again");
    expect(again.args_hash).toBe(shown.args_hash);
    expect(ranIn("mail::send", sid)).toHaveLength(0);
    await call("approval::resolve", { session_id: sid, function_call_id: "a-1", decision: "allow", args_hash: shown.args_hash });
    await ui.finished(sid);
    expect(ranIn("mail::send", sid)).toHaveLength(1);
  });
});

describe("approvals expire", () => {
  it(
    "a call left alone past the deadline is denied by the sweep, and the model reads why",
    async () => {
      const sid = `expired-${crypto.randomUUID()}`;
      replay.enqueue("openai", reply(callAgentTrigger("mail::send", { to: "ada@example.com" }, "e-1")), reply(say("Nobody approved it.")));
      await ui.startTurn(sid, "mail ada");
      await parked(sid);
      // Not yet due: the sweep leaves it.
      clockOffsetMs = TIMEOUT_MS - 60_000;
      expect(await call<{ expired: number }>("approval::sweep", {})).toEqual({ expired: 0 });
      expect(await pendingOf(sid, "e-1")).toMatchObject({ pending: { function_call_id: "e-1" } });
      clockOffsetMs = TIMEOUT_MS + 1_000;
      expect((await call<{ expired: number }>("approval::sweep", {})).expired).toBeGreaterThanOrEqual(1);
      await ui.finished(sid);
      expect(ranIn("mail::send", sid)).toHaveLength(0);
      const [fr] = await results(sid);
      expect(fr).toMatchObject({ function_call_id: "e-1", is_error: true, details: { expired: true, approval_denied: true } });
      expect(textOf(fr)).toMatch(/Approval expired: No one approved this call within 10 min/);
      const toModel = openaiMessages(replay.requestsFor("openai")[1]).find((m) => m.role === "tool");
      expect(asText(toModel?.content)).toContain("within 10 min");
      expect((await pendingOf(sid, "e-1")) ?? null).toBeNull();
      await until(() => resolved.some((e) => e.session_id === sid), "pending-resolved announced");
      expect(resolved.find((e) => e.session_id === sid)).toMatchObject({ outcome: "timeout" });
    },
    TURN_DEADLINE_MS * 2,
  );
});

describe("sub-agents can only narrow", () => {
  /** Parents talk to OpenAI and children to Anthropic, so each replay queue is answered in a known order. */
  const CHILD_MODEL = { provider: "anthropic", model: "claude-sonnet-4-6" };
  const spawnAndJoin = (child: string, task: string) =>
    reply(
      callAgentTrigger("harness::spawn", { task, ...CHILD_MODEL }, "spawn-1"),
      callAgentTrigger(HARNESS_JOIN, { child_session_id: child }, "join-1"),
    );

  it(
    "a child set to full under a manual parent still asks: its mode and lists are cut to its parent's",
    async () => {
      const sid = `parent-manual-${crypto.randomUUID()}`;
      const child = await subAgentSessionId(sid, `${sid}-m1`, "spawn-1");
      // Someone opened the child's own settings wide before it started.
      await call("approval::set-mode", { session_id: child, mode: "full" });
      await call("approval::approve-always", { session_id: child, function_id: "mail::send" });
      replay.enqueue("openai", spawnAndJoin(child, "Mail ada."), reply(say("The helper could not send it.")));
      replay.enqueue("anthropic", reply(callAgentTrigger("mail::send", { to: "ada@example.com" }, "c-1")), reply(say("Not sent.")));
      await ui.startTurn(sid, "get a helper to mail ada");
      const view = await parked(child);
      expect(view.awaiting_approval?.map((a) => a.function_call_id)).toEqual(["c-1"]);
      expect(ranIn("mail::send", child)).toHaveLength(0);
      await call("approval::resolve", { session_id: child, function_call_id: "c-1", decision: "deny" });
      await ui.finished(sid);
      expect(ranIn("mail::send", child)).toHaveLength(0);
    },
    TURN_DEADLINE_MS * 2,
  );

  it(
    "a child with no settings of its own has its parent's: the parent's remembered approval covers it",
    async () => {
      const sid = `parent-approved-${crypto.randomUUID()}`;
      const child = await subAgentSessionId(sid, `${sid}-m1`, "spawn-1");
      await call("approval::approve-always", { session_id: sid, function_id: "mail::send" });
      replay.enqueue("openai", spawnAndJoin(child, "Mail ada."), reply(say("The helper sent it.")));
      replay.enqueue("anthropic", reply(callAgentTrigger("mail::send", { to: "ada@example.com" }, "c-1")), reply(say("Sent.")));
      await ui.startTurn(sid, "get a helper to mail ada");
      await ui.finished(sid);
      expect(ranIn("mail::send", child)).toHaveLength(1);
    },
    TURN_DEADLINE_MS * 2,
  );
});

describe("a before-call hook that rewrites the arguments", () => {
  it(
    "rewrites them differently after the person was asked: the allow does not count, the rewritten call is asked again",
    async () => {
      // A hook worker (iii-sdk, durable:subscriber) that routes mail through a relay it can change.
      let relay = "relay-a@example.com";
      const hooks = registerWorker(engine.wsUrl, { workerName: "approvals-hooks", otel: { enabled: false } });
      try {
        hooks.registerFunction("hooks::route_mail", async (env: HookEnvelope<BeforeFunctionCallPayload>) => {
          const fc = env.payload.function_call;
          const answer = fc.function_id === "mail::send" ? { arguments: { ...(fc.arguments as object), via: relay } } : {};
          await hooks.trigger({
            function_id: "stream::set",
            payload: { stream_name: env.reply_stream, group_id: env.event_id, item_id: "hooks::route_mail", data: answer },
          });
          return null;
        });
        hooks.registerTrigger({
          type: "durable:subscriber",
          function_id: "hooks::route_mail",
          config: { topic: BEFORE_FUNCTION_CALL_TOPIC },
        });
        await until(async () => {
          const r = await iii.trigger<unknown, { registered_triggers: unknown[] }>({
            function_id: "engine::registered-triggers::list",
            payload: { trigger_type: "durable:subscriber", function_id: "hooks::route_mail" },
          });
          return r.registered_triggers.length > 0;
        }, "the hook subscribed");

        const sid = `hook-changed-${crypto.randomUUID()}`;
        replay.enqueue("openai", reply(callAgentTrigger("mail::send", { to: "ada@example.com" }, "h-1")), reply(say("Sent.")));
        await ui.startTurn(sid, "mail ada");
        await parked(sid);
        // What the person is shown is the call as it would run: the hook's rewrite included.
        const shown = (await pendingOf(sid, "h-1"))!.pending;
        expect(shown.args_hash).toBe(await approvalArgsHash({ to: "ada@example.com", via: "relay-a@example.com" }));

        relay = "relay-b@example.com";
        await call("approval::resolve", { session_id: sid, function_call_id: "h-1", decision: "allow" });
        const again = await until(async () => {
          const p = await pendingOf(sid, "h-1");
          return p && p.pending.args_hash !== shown.args_hash ? p.pending : undefined;
        }, "asked again about the rewritten call");
        expect(again.args_hash).toBe(await approvalArgsHash({ to: "ada@example.com", via: "relay-b@example.com" }));
        expect(ranIn("mail::send", sid)).toHaveLength(0);

        await call("approval::resolve", { session_id: sid, function_call_id: "h-1", decision: "allow" });
        await ui.finished(sid);
        expect(ranIn("mail::send", sid).map((r) => r.args)).toEqual([{ to: "ada@example.com", via: "relay-b@example.com" }]);
      } finally {
        await hooks.shutdown();
      }
    },
    TURN_DEADLINE_MS * 2,
  );
});
