// The turn orchestrator's public contract as a stand-in serves it (docs/harness-contracts.md §1.2
// "Owned state"): `run::status`, `run::request`, `turn::get_state`, `turn::subscribe` and
// `turn::unsubscribe`, answered from records the stand-in keeps in scopes of its own choosing. A
// test that runs another worker against it proves that worker needs the contract and nothing of
// the built-in orchestrator's state. Works with iii-sdk's client and with sdk-edge's.
import type { RunRequestView, RunStatus, TurnStateChanged, TurnStateView } from "@iii-edge/protocol/harness";

/** What both clients offer (iii-sdk's and sdk-edge's): a handler gets the payload, then metadata. */
export interface ContractClient {
  // biome-ignore lint/suspicious/noExplicitAny: each client types a handler's payload its own way; these handlers read theirs
  registerFunction(id: string, handler: (data: any, metadata?: any) => Promise<unknown>): unknown;
  trigger(request: { function_id: string; payload: unknown; timeoutMs?: number }): Promise<unknown>;
}

export interface RunContract {
  /** Write a run's status: the write is what the subscription reports. */
  setStatus(status: RunStatus): Promise<void>;
  status(sid: string): Promise<RunStatus | undefined>;
  setRequest(sid: string, request: RunRequestView): Promise<void>;
  /** Subscriptions live now (made and not ended), by id. */
  readonly subscriptions: ReadonlyMap<string, { session_id: string; function_id: string }>;
}

/**
 * Serve the contract from `<prefix>_runs` and `<prefix>_requests`. A subscription is an engine-held
 * `state` binding on the run's record calling `<prefix>::notify`, which tells the subscriber — the
 * same at-least-once, in-order delivery the built-in gives.
 */
export function serveRunContract(client: ContractClient, prefix: string): RunContract {
  const runs = `${prefix}_runs`;
  const requests = `${prefix}_requests`;
  const notify = `${prefix}::notify`;
  const subscriptions = new Map<string, { session_id: string; function_id: string }>();
  const call = <T>(function_id: string, payload: unknown) => client.trigger({ function_id, payload }) as Promise<T>;
  const status = async (sid: string) => (await call<RunStatus | null | undefined>("state::get", { scope: runs, key: sid })) ?? undefined;

  client.registerFunction("run::status", async (req: { session_id: string }) => (await status(req.session_id)) ?? null);
  client.registerFunction(
    "run::request",
    async (req: { session_id: string }) =>
      (await call<RunRequestView | undefined>("state::get", { scope: requests, key: req.session_id })) ?? null,
  );
  client.registerFunction("turn::get_state", async (req: { session_id: string }): Promise<TurnStateView | null> => {
    const s = await status(req.session_id);
    if (!s) return null;
    const v: TurnStateView = { session_id: s.session_id, state: s.state, turn_count: s.turn_count };
    if (s.max_turns !== undefined) v.max_turns = s.max_turns;
    if (s.awaiting_approval) v.awaiting_approval = s.awaiting_approval;
    if (s.error) v.error = s.error;
    return v;
  });
  client.registerFunction("turn::subscribe", async (req: { session_id: string; function_id: string; subscription_id: string }) => {
    await call("engine::register_trigger", {
      id: `${prefix}:${req.subscription_id}`,
      trigger_type: "state",
      function_id: notify,
      config: { scope: runs, key: req.session_id },
      metadata: { subscription_id: req.subscription_id, function_id: req.function_id },
    });
    subscriptions.set(req.subscription_id, { session_id: req.session_id, function_id: req.function_id });
    return { subscription_id: req.subscription_id };
  });
  client.registerFunction("turn::unsubscribe", async (req: { subscription_id: string }) => {
    const r = await call<{ removed: boolean }>("engine::unregister_trigger", { id: `${prefix}:${req.subscription_id}` });
    subscriptions.delete(req.subscription_id);
    return { removed: r.removed };
  });
  client.registerFunction(
    notify,
    async (fire: { key: string; event_type: TurnStateChanged["event_type"]; new_value: RunStatus | null }, metadata?: unknown) => {
      const m = metadata as { subscription_id: string; function_id: string };
      const notice: TurnStateChanged = {
        subscription_id: m.subscription_id,
        session_id: fire.key,
        event_type: fire.event_type,
        state: fire.new_value?.state ?? null,
      };
      await call(m.function_id, notice);
      return { ok: true };
    },
  );

  return {
    setStatus: async (s) => void (await call("state::set", { scope: runs, key: s.session_id, value: s })),
    status,
    setRequest: async (sid, r) => void (await call("state::set", { scope: requests, key: sid, value: r })),
    subscriptions,
  };
}
