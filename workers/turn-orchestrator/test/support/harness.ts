// One engine, the orchestrator run alone against it (runWorkers), the real session-storage and
// policy workers beside it, and a stand-in connection for each other worker it reaches by function
// id. Scenario helpers read what a user would see: the record's client view, the transcript (from
// session storage), the event stream.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { AgentEvent, AgentMessage, RunStartResponse, TurnStateView } from "@iii-edge/protocol/harness";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { worker as policyWorker } from "@iii-edge/worker-policy";
import { worker as sessionStorageWorker } from "@iii-edge/worker-session-storage/node";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import { until } from "@iii-edge/test-support/wait";
import { worker } from "../../src/index.ts";
import {
  connect,
  FAST_RECONNECT,
  HARNESS_DISABLE,
  queuesWithTurnStep,
  registerPolicy,
  registerProvider,
  registerProvisioning,
  registerTargets,
  TEST_PERMISSIONS,
  type PolicyRule,
  type ProviderRequest,
  type Script,
} from "./stand-ins.ts";

/** What the harness needs of an engine: where workers dial it, and its end. */
export interface EngineLike {
  wsUrl: string;
  stop(): Promise<void>;
}

export interface Harness<E extends EngineLike = EngineLike> {
  engine: E;
  orchestrator: RunningWorkers;
  client: RunningWorkers;
  scripts: Map<string, Script>;
  /** The policy in force: the real worker, or the stand-in (`usePolicyStandIn`) with its rules. */
  policy: { conn: RunningWorkers; standIn?: { rules: Map<string, PolicyRule>; calls: string[]; calledAt: number[] } };
  provisioning: { conn: RunningWorkers; prepared: string[]; released: string[] };
  provider: { requests: ProviderRequest[] };
  targets: ReturnType<typeof registerTargets>;
  conns: RunningWorkers[];
  reconnect: boolean;
}

const ALL_IDS = [
  "run::start",
  "turn::provisioning",
  "turn::steering_check",
  "turn::on_approval",
  "session-tree::messages",
  "session-inbox::drain",
  "policy::check_permissions",
  "provisioning::prepare",
  "provider::openai::stream",
  "test::block",
];

export async function listed(client: RunningWorkers): Promise<string[]> {
  const r = await client.client.trigger<unknown, { functions: { function_id: string }[] }>({
    function_id: "engine::functions::list",
    payload: { include_internal: true },
  });
  return r.functions.map((f) => f.function_id);
}

const options = (reconnect: boolean, extra: Record<string, unknown> = {}) => ({ ...(reconnect ? FAST_RECONNECT : {}), ...extra });

function realPolicy(url: string, reconnect: boolean): RunningWorkers {
  return runWorkers(url, [policyWorker], options(reconnect, { workerName: "policy", env: { III_PERMISSIONS: TEST_PERMISSIONS } }));
}

/**
 * `edge`: the orchestrator runs inside the engine's Worker (the deployed HARNESS host, workerd)
 * instead of as a Node process — the same module, the other runtime.
 */
export async function startHarness(
  opts: { reconnect?: boolean; turnStep?: Record<string, unknown>; edge?: boolean } = {},
): Promise<Harness<EngineServer>> {
  const disable = opts.edge
    ? HARNESS_DISABLE.split(",")
        .filter((n) => n !== "turn-orchestrator")
        .join(",")
    : HARNESS_DISABLE;
  const engine = await startEngine({ env: { HARNESS_DISABLE: disable }, vars: queuesWithTurnStep(opts.turnStep) });
  return assemble(engine, opts);
}

/** The same workers and stand-ins around the engine core served in this process
 * (tests/support/node-engine.ts): the turn's state machine in plain Node, no workerd. */
export async function startNodeHarness(opts: { turnStep?: Record<string, unknown>; tracing?: boolean } = {}): Promise<Harness<NodeEngine>> {
  const engine = await startNodeEngine({ vars: queuesWithTurnStep(opts.turnStep), tracing: opts.tracing });
  return assemble(engine, {});
}

async function assemble<E extends EngineLike>(engine: E, opts: { reconnect?: boolean; edge?: boolean }): Promise<Harness<E>> {
  const url = engine.wsUrl;
  const r = opts.reconnect ?? false;
  const sessionsDb = path.join(mkdtempSync(path.join(tmpdir(), "turn-orchestrator-sessions-")), "sessions.sqlite");
  const storageConn = runWorkers(
    url,
    [sessionStorageWorker],
    options(r, { workerName: "session-storage", env: { SESSIONS_DB_PATH: sessionsDb } }),
  );
  const policyConn = realPolicy(url, r);
  const provisioningConn = connect(url, "provisioning-stand-in", r);
  const providerConn = connect(url, "provider-stand-in", r);
  const targetsConn = connect(url, "targets-stand-in", r);
  const client = connect(url, "test-client", r);
  const scripts = new Map<string, Script>();
  const prov = registerProvisioning(provisioningConn.client);
  const provider = registerProvider(providerConn.client, providerConn.surface, scripts);
  const targets = registerTargets(targetsConn.client);
  const orchestrator = opts.edge ? connect(url, "no-orchestrator-here") : runWorkers(url, [worker], options(r));
  await until(
    async () => {
      const ids = await listed(client);
      return ALL_IDS.every((id) => ids.includes(id));
    },
    "every function registered",
    20_000,
  );
  return {
    engine,
    orchestrator,
    client,
    scripts,
    policy: { conn: policyConn },
    provisioning: { conn: provisioningConn, ...prov },
    provider,
    targets,
    conns: [storageConn, provisioningConn, providerConn, targetsConn, client, orchestrator],
    reconnect: r,
  };
}

export async function stopHarness(h: Harness | undefined): Promise<void> {
  if (!h) return;
  await Promise.allSettled([...h.conns, h.policy.conn].map((c) => c.shutdown()));
  await h.engine.stop();
}

async function waitPolicyRegistered(h: Harness): Promise<void> {
  await until(async () => (await listed(h.client)).includes("policy::check_permissions"), "policy::check_permissions registered");
}

/** Replace the policy worker by the stand-in (rules per function id, calls counted). */
export async function usePolicyStandIn(
  h: Harness,
  rules = new Map<string, PolicyRule>(),
): Promise<{ rules: Map<string, PolicyRule>; calls: string[]; calledAt: number[] }> {
  // The function is the old worker's until the engine has seen its socket close: registering it
  // earlier is refused as another worker's.
  await removePolicy(h);
  const conn = connect(h.engine.wsUrl, "policy-stand-in", h.reconnect);
  const standIn = { rules, ...registerPolicy(conn.client, rules) };
  h.policy = { conn, standIn };
  await waitPolicyRegistered(h);
  return standIn;
}

/** No policy at all: whoever provided it disconnects. */
export async function removePolicy(h: Harness): Promise<void> {
  await h.policy.conn.shutdown();
  await until(async () => !(await listed(h.client)).includes("policy::check_permissions"), "policy::check_permissions gone");
}

export async function useRealPolicy(h: Harness): Promise<void> {
  await removePolicy(h);
  h.policy = { conn: realPolicy(h.engine.wsUrl, h.reconnect) };
  await waitPolicyRegistered(h);
}

export const call = <T = unknown>(h: Harness, function_id: string, payload: unknown, timeoutMs = 15_000): Promise<T> =>
  h.client.client.trigger<unknown, T>({ function_id, payload, timeoutMs });

export function start(h: Harness, sid: string, model: string, extra: Record<string, unknown> = {}): Promise<RunStartResponse> {
  return call<RunStartResponse>(h, "run::start", {
    session_id: sid,
    message_id: `m-${sid}`,
    model,
    messages: [{ role: "user", content: "hi" }],
    ...extra,
  });
}

export const view = (h: Harness, sid: string): Promise<TurnStateView | null> =>
  call<TurnStateView | null>(h, "turn::get_state", { session_id: sid });

/** Poll `turn::get_state` until `pred` holds (a deadline, no fixed sleeps). */
export async function waitView(
  h: Harness,
  sid: string,
  pred: (v: TurnStateView) => boolean,
  what: string,
  ms = 20_000,
): Promise<TurnStateView> {
  return until(
    async () => {
      const v = await view(h, sid);
      return v && pred(v) ? v : undefined;
    },
    `${sid}: ${what}`,
    ms,
  );
}

export const waitState = (h: Harness, sid: string, state: TurnStateView["state"], ms?: number) =>
  waitView(h, sid, (v) => v.state === state, `state ${state}`, ms);

/** Every event of the session, through `run::events` pages. */
export async function events(h: Harness, sid: string): Promise<{ item_id: string; data: AgentEvent }[]> {
  const out: { item_id: string; data: AgentEvent }[] = [];
  let after: string | null = null;
  for (;;) {
    const page: { events: { item_id: string; data: AgentEvent }[]; next: string | null } = await call(h, "run::events", {
      session_id: sid,
      after,
      limit: 100,
    });
    out.push(...page.events);
    if (page.events.length === 0) return out;
    after = page.next;
  }
}

/** Events once the run's `agent_end` is among them (it is the last one a run writes). */
export async function finalEvents(h: Harness, sid: string): Promise<AgentEvent[]> {
  return until(
    async () => {
      const evs = (await events(h, sid)).map((e) => e.data);
      return evs.some((e) => e.type === "agent_end") ? evs : undefined;
    },
    `${sid}: agent_end on the stream`,
    15_000,
  );
}

export interface TranscriptEntry {
  entry_id: string;
  message: AgentMessage;
}

/** The session's active path as session storage serves it (`session-tree::messages`, every page). */
export async function transcript(h: Harness, sid: string): Promise<TranscriptEntry[]> {
  const out: TranscriptEntry[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page: { messages: TranscriptEntry[]; next_cursor: string | null } = await call(
      h,
      "session-tree::messages",
      cursor ? { session_id: sid, cursor } : { session_id: sid },
    );
    out.push(...page.messages.map((m) => ({ entry_id: m.entry_id, message: m.message })));
    if (!page.next_cursor) return out;
    cursor = page.next_cursor;
  }
}

export const textOf = (m: AgentMessage): string =>
  Array.isArray(m.content)
    ? (m.content as { type: string; text?: string }[]).map((b) => (b.type === "text" ? (b.text ?? "") : "")).join("")
    : "";

/** A promise with its resolver (a scripted pause the test ends). */
export function gate(): { wait: Promise<void>; release: () => void } {
  let release!: () => void;
  const wait = new Promise<void>((r) => (release = r));
  return { wait, release };
}
