// What other workers and the console may know of a run, and how they follow one
// (docs/harness-contracts.md §1.2 "Owned state"). The scopes this worker writes are its own: a
// reader outside it calls `run::status` / `run::request`, and a follower subscribes with
// `turn::subscribe`, so replacing the orchestrator never breaks them.
//
// A subscription is one engine-held `state` binding on this worker's turn record of the session,
// calling `turn::notify_subscriber` (below) with the subscription's id in the binding's metadata.
// The engine stores each fire in the write's own transaction and retries it until it succeeds, in
// order per record; the relay calls the subscriber and fails when it fails, so the subscriber gets
// every notice at least once, in write order — the guarantee a `state` trigger has, without the
// subscriber naming the scope or seeing the record (its `work`, its last answer): a notice says
// which run and the state the write left.
import { z } from "zod";
import { IIIError, mayUseSession, type CallerPrincipal } from "@iii-edge/protocol";
import {
  TURN_STATES,
  type RunRequestView,
  type RunStatus,
  type TurnStateChanged,
  type TurnStateRecord,
  type TurnSubscribeRequest,
  type TurnUnsubscribeResponse,
} from "@iii-edge/protocol/harness";
import { readState } from "@iii-edge/sdk-edge/worker";
import { callRequired, type Trigger } from "./calls.ts";
import { SCOPE_SUBSCRIPTIONS, SCOPE_TURN_STATE, STORAGE_TIMEOUT_MS, SUBSCRIBER_TIMEOUT_MS } from "./constants.ts";
import { viewOf } from "./record.ts";
import { loadRunRequest } from "./run-request.ts";
import { loadRecord } from "./store.ts";

/** The internal relay every subscription's binding calls. */
export const NOTIFY_SUBSCRIBER = "turn::notify_subscriber";

/** The engine binding of a subscription (one per subscription id). */
export const bindingIdOf = (subscriptionId: string): string => `turn-subscription:${subscriptionId}`;

/** The text blocks of the last assistant message, joined; null when there is no message or it has
 * no blocks at all (an empty text block is an empty answer, not none). */
export function finalTextOf(rec: Pick<TurnStateRecord, "last_assistant">): string | null {
  const blocks = rec.last_assistant?.content ?? [];
  if (blocks.length === 0) return null;
  return blocks.map((b) => (b.type === "text" ? b.text : "")).join("");
}

export function statusOf(rec: TurnStateRecord): RunStatus {
  const s: RunStatus = {
    ...viewOf(rec),
    run_id: rec.run_id,
    stop_requested: rec.stop_requested === true,
    final_text: finalTextOf(rec),
  };
  if (rec.output?.type === "json") {
    if (rec.result !== undefined) s.result = rec.result;
    if (rec.result_error !== undefined) s.result_error = rec.result_error;
  }
  return s;
}

export async function runStatus(trigger: Trigger, sid: string): Promise<RunStatus | null> {
  const loaded = await loadRecord(trigger, sid);
  return loaded ? statusOf(loaded.rec) : null;
}

/** The sub-agent link a child's run request carries, as stored (every field kept). */
const parentLink = z.looseObject({ session_id: z.string(), run_id: z.string(), depth: z.number().int() });

/** `run::request`: the settings, never the system prompt, the function schemas or the sandbox. */
export async function runRequestView(trigger: Trigger, sid: string): Promise<RunRequestView | null> {
  const { req, raw } = await loadRunRequest(trigger, sid);
  if (!req) return null;
  const v: RunRequestView = { provider: req.provider, model: req.model, mode: req.mode };
  if (req.max_turns !== undefined) v.max_turns = req.max_turns;
  if (req.skills) v.skills = [...req.skills];
  if (req.isolation !== undefined) v.isolation = req.isolation;
  if (req.budget_id !== undefined) v.budget_id = req.budget_id;
  if (req.fallback_models?.length) v.fallback_models = [...req.fallback_models];
  const parent = parentLink.safeParse((raw as { parent?: unknown } | null)?.parent);
  if (parent.success) v.parent = parent.data;
  return v;
}

// ------------------------------------------------------------------ subscriptions

const subscriptionRecord = z.object({ session_id: z.string(), function_id: z.string() });

/** A caller with a principal may subscribe only with a grant naming the session (what the owner
 * check accepts with no owner known): owning the session is not enough, because the orchestrator
 * calls the subscriber's function with its own hand. */
const mayFollow = (caller: CallerPrincipal | undefined, sid: string): boolean => mayUseSession(caller, sid, undefined);

export async function subscribe(
  trigger: Trigger,
  caller: CallerPrincipal | undefined,
  req: TurnSubscribeRequest,
): Promise<{ subscription_id: string }> {
  if (!mayFollow(caller, req.session_id))
    throw new IIIError(
      "forbidden",
      `subscriptions are for this deployment's own workers: '${caller!.sub}' has no grant naming ${req.session_id}`,
    );
  // The record first: a fire that comes before it is written finds no subscription and is dropped,
  // and the binding made next is only ever read after it.
  await callRequired(trigger, "state::set", {
    scope: SCOPE_SUBSCRIPTIONS,
    key: req.subscription_id,
    value: { session_id: req.session_id, function_id: req.function_id },
  });
  await callRequired(trigger, "engine::register_trigger", {
    id: bindingIdOf(req.subscription_id),
    trigger_type: "state",
    function_id: NOTIFY_SUBSCRIBER,
    config: { scope: SCOPE_TURN_STATE, key: req.session_id },
    metadata: { subscription_id: req.subscription_id },
  });
  return { subscription_id: req.subscription_id };
}

export async function unsubscribe(
  trigger: Trigger,
  caller: CallerPrincipal | undefined,
  subscriptionId: string,
): Promise<TurnUnsubscribeResponse> {
  const sub = await readState(trigger, { scope: SCOPE_SUBSCRIPTIONS, key: subscriptionId }, subscriptionRecord, {
    timeoutMs: STORAGE_TIMEOUT_MS,
  });
  if (!sub) return { removed: false };
  if (!mayFollow(caller, sub.session_id)) throw new IIIError("forbidden", `'${caller!.sub}' has no grant naming ${sub.session_id}`);
  await callRequired(trigger, "engine::unregister_trigger", { id: bindingIdOf(subscriptionId) });
  await callRequired(trigger, "state::delete", { scope: SCOPE_SUBSCRIPTIONS, key: subscriptionId });
  return { removed: true };
}

const stateFire = z.looseObject({
  event_type: z.enum(["state:created", "state:updated", "state:deleted"]),
  key: z.string(),
  new_value: z
    .looseObject({ state: z.enum(TURN_STATES) })
    .nullable()
    .catch(null),
});
const fireMetadata = z.looseObject({ subscription_id: z.string() });

/**
 * NOTIFY_SUBSCRIBER: one fire of a subscription's binding. The subscriber is whatever its record
 * names (never the metadata alone, which a direct caller could forge), and only for that record's
 * session. A subscriber's failure is this call's failure: the engine retries the fire.
 */
export async function notifySubscriber(trigger: Trigger, payload: unknown, metadata: unknown): Promise<{ ok: true; notified: boolean }> {
  const fire = stateFire.safeParse(payload);
  const meta = fireMetadata.safeParse(metadata);
  if (!fire.success || !meta.success) return { ok: true, notified: false };
  const sub = await readState(trigger, { scope: SCOPE_SUBSCRIPTIONS, key: meta.data.subscription_id }, subscriptionRecord, {
    timeoutMs: STORAGE_TIMEOUT_MS,
  });
  if (!sub || sub.session_id !== fire.data.key) return { ok: true, notified: false };
  const notice: TurnStateChanged = {
    subscription_id: meta.data.subscription_id,
    session_id: fire.data.key,
    event_type: fire.data.event_type,
    state: fire.data.event_type === "state:deleted" ? null : (fire.data.new_value?.state ?? null),
  };
  await trigger({ function_id: sub.function_id, payload: notice, timeoutMs: SUBSCRIBER_TIMEOUT_MS });
  return { ok: true, notified: true };
}
