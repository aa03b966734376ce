// One engine, the orchestrator run alone against it (runWorkers), and a stand-in connection per
// worker it reaches by function id. Scenario helpers read what a user would see: the record's
// client view, the transcript, the event stream.
import type { AgentEvent, AgentMessage, RunStartResponse, TurnStateView } from "@iii-edge/protocol/harness";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { startEngine, type EngineServer } from "../../../../tests/support/engine-server.ts";
import { until } from "../../../../tests/support/wait.ts";
import { worker } from "../../src/index.ts";
import {
  connect,
  FAST_RECONNECT,
  HARNESS_DISABLE,
  queuesWithTurnStep,
  registerPolicy,
  registerProvider,
  registerProvisioning,
  registerSessionStorage,
  registerTargets,
  type PolicyRule,
  type Script,
  type SessionStore,
} from "./stand-ins.ts";

export interface Harness {
  engine: EngineServer;
  orchestrator: RunningWorkers;
  client: RunningWorkers;
  store: SessionStore;
  rules: Map<string, PolicyRule>;
  scripts: Map<string, Script>;
  policy: { conn: RunningWorkers; calls: string[] };
  provisioning: { conn: RunningWorkers; prepared: string[]; released: string[] };
  provider: { requests: import("./stand-ins.ts").ProviderRequest[] };
  targets: ReturnType<typeof registerTargets>;
  conns: RunningWorkers[];
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
  const r = await client.client.trigger<unknown, { functions: { function_id: string }[] }>({ function_id: "engine::functions::list", payload: { include_internal: true } });
  return r.functions.map((f) => f.function_id);
}

export async function startHarness(opts: { reconnect?: boolean; turnStep?: Record<string, unknown> } = {}): Promise<Harness> {
  const engine = await startEngine({ env: { HARNESS_DISABLE }, vars: queuesWithTurnStep(opts.turnStep) });
  return startHarnessOn(engine, opts);
}

export async function startHarnessOn(engine: EngineServer, opts: { reconnect?: boolean } = {}): Promise<Harness> {
  const url = engine.wsUrl;
  const r = opts.reconnect ?? false;
  const storageConn = connect(url, "session-storage-stand-in", r);
  const policyConn = connect(url, "policy-stand-in", r);
  const provisioningConn = connect(url, "provisioning-stand-in", r);
  const providerConn = connect(url, "provider-stand-in", r);
  const targetsConn = connect(url, "targets-stand-in", r);
  const client = connect(url, "test-client", r);
  const rules = new Map<string, PolicyRule>();
  const scripts = new Map<string, Script>();
  const store = registerSessionStorage(storageConn.client);
  const policy = registerPolicy(policyConn.client, rules);
  const prov = registerProvisioning(provisioningConn.client);
  const provider = registerProvider(providerConn.client, providerConn.surface, scripts);
  const targets = registerTargets(targetsConn.client);
  const orchestrator = runWorkers(url, [worker], r ? FAST_RECONNECT : {});
  await until(async () => {
    const ids = await listed(client);
    return ALL_IDS.every((id) => ids.includes(id));
  }, "every function registered", 20_000);
  return {
    engine,
    orchestrator,
    client,
    store,
    rules,
    scripts,
    policy: { conn: policyConn, calls: policy.calls },
    provisioning: { conn: provisioningConn, ...prov },
    provider,
    targets,
    conns: [storageConn, policyConn, provisioningConn, providerConn, targetsConn, client, orchestrator],
  };
}

export async function stopHarness(h: Harness | undefined): Promise<void> {
  if (!h) return;
  await Promise.allSettled(h.conns.map((c) => c.shutdown()));
  await h.engine.stop();
}

export const call = <T = unknown>(h: Harness, function_id: string, payload: unknown, timeoutMs = 15_000): Promise<T> => h.client.client.trigger<unknown, T>({ function_id, payload, timeoutMs });

export function start(h: Harness, sid: string, model: string, extra: Record<string, unknown> = {}): Promise<RunStartResponse> {
  return call<RunStartResponse>(h, "run::start", { session_id: sid, message_id: `m-${sid}`, model, messages: [{ role: "user", content: "hi" }], ...extra });
}

export const view = (h: Harness, sid: string): Promise<TurnStateView | null> => call<TurnStateView | null>(h, "turn::get_state", { session_id: sid });

/** Poll `turn::get_state` until `pred` holds (a deadline, no fixed sleeps). */
export async function waitView(h: Harness, sid: string, pred: (v: TurnStateView) => boolean, what: string, ms = 20_000): Promise<TurnStateView> {
  return until(async () => {
    const v = await view(h, sid);
    return v && pred(v) ? v : undefined;
  }, `${sid}: ${what}`, ms);
}

export const waitState = (h: Harness, sid: string, state: TurnStateView["state"], ms?: number) => waitView(h, sid, (v) => v.state === state, `state ${state}`, ms);

/** Every event of the session, through `run::events` pages. */
export async function events(h: Harness, sid: string): Promise<{ item_id: string; data: AgentEvent }[]> {
  const out: { item_id: string; data: AgentEvent }[] = [];
  let after: string | null = null;
  for (;;) {
    const page: { events: { item_id: string; data: AgentEvent }[]; next: string | null } = await call(h, "run::events", { session_id: sid, after, limit: 100 });
    out.push(...page.events);
    if (page.events.length === 0) return out;
    after = page.next;
  }
}

/** Events once the run's `agent_end` is among them (it is the last one a run writes). */
export async function finalEvents(h: Harness, sid: string): Promise<AgentEvent[]> {
  return until(async () => {
    const evs = (await events(h, sid)).map((e) => e.data);
    return evs.some((e) => e.type === "agent_end") ? evs : undefined;
  }, `${sid}: agent_end on the stream`, 15_000);
}

export const transcript = (h: Harness, sid: string): { entry_id: string; message: AgentMessage }[] => h.store.entries.get(sid) ?? [];

export const textOf = (m: AgentMessage): string =>
  Array.isArray(m.content) ? (m.content as { type: string; text?: string }[]).map((b) => (b.type === "text" ? (b.text ?? "") : "")).join("") : "";

/** A promise with its resolver (a scripted pause the test ends). */
export function gate(): { wait: Promise<void>; release: () => void } {
  let release!: () => void;
  const wait = new Promise<void>((r) => (release = r));
  return { wait, release };
}
