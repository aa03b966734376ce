// What every harness bench starts: a zero-latency provider replay, exactly `npm start` pointed at
// it (with a permissions file when the bench calls functions), and a caller.
import { registerWorker, type IIIClient } from "iii-sdk";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, permissionsFile, replayEnv, reply, say, startProviderReplay } from "@iii-edge/test-support/provider-replay";
import type { RecordedRequest, ReplayServer, Scenario } from "@iii-edge/test-support/provider-replay";

/** The harness registers within this on a busy 2-core box. */
const REGISTER_TIMEOUT_MS = 30_000;

/** Rules for the hook benches: the bench's own functions run, one call is denied by a rule. */
export const BENCH_RULES = "version: 1\nrules:\n  - 'bench::*'\n  - rule_id: never-this\n    function: denied::call\n    action: deny\n";

/** Poll `check` every 100 ms until it holds (a failing check counts as not yet), at most 30 s. */
export async function waitFor(what: string, check: () => Promise<boolean>): Promise<void> {
  for (const deadline = Date.now() + 30_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100)))
    if (await check().catch(() => false)) return;
  throw new Error(`timed out waiting for ${what}`);
}

export interface HarnessBench {
  replay: ReplayServer;
  engine: EngineServer;
  iii: IIIClient;
}

export async function startHarnessBench(name: string, opts: { rules?: string; env?: Record<string, string> } = {}): Promise<HarnessBench> {
  const replay = await startProviderReplay();
  const env: Record<string, string> = { ...replayEnv(replay), ...opts.env };
  if (opts.rules !== undefined) env.III_PERMISSIONS_PATH = permissionsFile(opts.rules);
  const engine = await startEngine({ env });
  const iii = registerWorker(engine.wsUrl, { workerName: `${name}-caller`, otel: { enabled: false } });
  return { replay, engine, iii };
}

/** Wait until every id in `ids` is registered. */
export async function registered(iii: IIIClient, ids: readonly string[], timeoutMs = REGISTER_TIMEOUT_MS): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((r) => setTimeout(r, 200))) {
    const r = (await iii.trigger({ function_id: "engine::functions::list", payload: {} })) as { functions: { function_id: string }[] };
    if (ids.every((id) => r.functions.some((f) => f.function_id === id))) return;
  }
  throw new Error(`not registered within ${timeoutMs} ms: ${ids.join(", ")}`);
}

/** How many bindings `filter` selects (`engine::registered-triggers::list`). */
export async function triggerCount(iii: IIIClient, filter: Record<string, unknown>): Promise<number> {
  const listing = { function_id: "engine::registered-triggers::list", payload: filter };
  const r = await iii.trigger<unknown, { registered_triggers: unknown[] }>(listing);
  return r.registered_triggers.length;
}

/** Wait until `count()` is `n`, then `settleMs` more: the orchestrator caches who listens to a hook
 * that long, and a sample starts only once every cache must have seen the change. */
export async function settledAt(what: string, count: () => Promise<number>, n: number, settleMs: number): Promise<void> {
  await waitFor(what, async () => (await count()) === n);
  await new Promise((r) => setTimeout(r, settleMs));
}

/** A hook bench's listener going away: shut it down, then as `settledAt` with none left. */
export async function shutdownSettled(client: IIIClient, what: string, count: () => Promise<number>, settleMs: number): Promise<void> {
  await client.shutdown();
  await settledAt(what, count, 0, settleMs);
}

/**
 * The function-call step of one turn, in ms between the model's two requests: the replayed model
 * calls `fn` (default `bench::echo`) once, then answers. Each sample is a fresh session
 * `<prefix>-<kind>-<n>`, followed from before the turn starts.
 */
export function functionSteps(bench: HarnessBench, prefix: string): (kind: string, fn?: string) => Promise<number> {
  let seq = 0;
  return async (kind, fn = "bench::echo") => {
    const n = ++seq;
    const reqs = await followedTurn(bench, `${prefix}-${kind}-${n}`, [reply(callAgentTrigger(fn, { n }, `c-${n}`)), reply(say("Echoed."))]);
    return reqs[1]!.received_at - reqs[0]!.received_at;
  };
}

/**
 * One turn of session `sid` on the replayed OpenAI model, which answers with `scenarios`: a UI
 * follows it from before it starts (`onEvent` as for followTurn) to its `agent_end`. Returns the
 * requests the model received during the turn.
 */
export async function followedTurn(
  { replay, engine }: Pick<HarnessBench, "replay" | "engine">,
  sid: string,
  scenarios: Scenario[],
  onEvent?: (e: TurnEvent, now: number) => void,
): Promise<RecordedRequest[]> {
  const before = replay.requestsFor("openai").length;
  replay.enqueue("openai", ...scenarios);
  const f = followTurn(engine, sid, onEvent);
  await f.joined;
  await postTurn(engine, sid);
  await f;
  return replay.requestsFor("openai").slice(before);
}

/** A turn that has not ended within this is a failure of the run, not a slow sample. */
export const TURN_TIMEOUT_MS = 60_000;

/** An `agent::events` entry as a following UI receives it. */
export interface TurnEvent {
  type: string;
  llm_event?: { type: string };
  message?: { stop_reason?: string };
}

/**
 * One UI socket following session `sid`'s `agent::events` (a `/_iii/streams` join): `joined`
 * settles at the stream's sync, and the promise at `agent_end` with that frame's
 * `performance.now()`. `onEvent` sees every created entry with its arrival time; a turn whose
 * model message completes with an error fails the promise.
 */
export function followTurn(
  engine: EngineServer,
  sid: string,
  onEvent: (e: TurnEvent, now: number) => void = () => {},
): Promise<number> & { joined: Promise<void> } {
  const ws = new WebSocket(`${engine.wsUrl}/_iii/streams`);
  let joinedResolve!: () => void;
  const joined = new Promise<void>((r) => (joinedResolve = r));
  const done = new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => (ws.close(), reject(new Error(`turn ${sid} did not end within ${TURN_TIMEOUT_MS} ms`))),
      TURN_TIMEOUT_MS,
    );
    ws.onopen = () => ws.send(JSON.stringify({ type: "join", data: { subscriptionId: sid, streamName: "agent::events", groupId: sid } }));
    ws.onmessage = (m) => {
      const now = performance.now();
      const p = JSON.parse(String(m.data)) as { event: { type: string; data: TurnEvent } };
      if (p.event.type === "sync") return joinedResolve();
      if (p.event.type !== "create") return;
      const e = p.event.data;
      onEvent(e, now);
      if (e.type === "message_complete" && e.message?.stop_reason === "error") reject(new Error(`turn ${sid} failed`));
      if (e.type === "agent_end") {
        clearTimeout(timer);
        ws.close();
        resolve(now);
      }
    };
    ws.onerror = () => reject(new Error("stream socket failed"));
  });
  return Object.assign(done, { joined });
}

const JSON_HEADERS = { "content-type": "application/json" };

/** Starts a one-message turn on the replayed OpenAI model through `POST /api/turns`. */
export async function postTurn(engine: EngineServer, sid: string, extra: Record<string, unknown> = {}): Promise<void> {
  const payload = {
    session_id: sid,
    model: "gpt-4o",
    provider: "openai",
    messages: [{ role: "user", content: [{ type: "text", text: "hi" }], timestamp: Date.now() }],
    ...extra,
  };
  const res = await fetch(`${engine.url}/api/turns`, { method: "POST", headers: JSON_HEADERS, body: JSON.stringify({ payload }) });
  if (res.status !== 200) throw new Error(`POST /api/turns: ${res.status} ${await res.text()}`);
}

/** performance.now() of an epoch time (the replay stamps requests with Date.now()). */
export const toPerf = (epochMs: number) => epochMs - Date.now() + performance.now();
