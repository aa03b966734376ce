// Following a child: two engine-held subscriptions made by the spawn (they survive this worker's
// restarts, the orchestrator's and the engine's, and go when the child is done).
// - `turn::subscribe` on the child's run → ON_CHILD_STATE: the orchestrator's notice of each change
//   of the run, delivered at least once, in order (protocol TurnStateChanged): the child's end
//   wakes the joins parked on it, frees its place and allotment on the parent, settles its budget;
//   a live child whose parent's run is over is stopped (the safety net under the orchestrator's
//   cascade).
// - `stream` on `agent::events/<child>` → ON_CHILD_EVENT: each event is mirrored to every ancestor's
//   group as a `child_event` custom event (`stream::send`: pushed to followers and stream triggers,
//   never stored among the ancestor's items, whose ids the orchestrator numbers). Best effort, like
//   the events themselves; the child's own group is the lossless record.
import { z } from "zod";
import {
  AGENT_EVENTS_STREAM,
  CHILD_EVENT,
  SUB_AGENT_UNMIRRORED_EVENTS,
  TURN_UNSUBSCRIBE,
  type AgentEvent,
  type SubAgentChildEvent,
  type TurnUnsubscribeResponse,
} from "@iii-edge/protocol/harness";
import { settleChildBudget } from "./budget.ts";
import { LINK_CACHE_MAX, SCOPE_LINKS, STOP_TIMEOUT_MS } from "./constants.ts";
import { notifyEnded, wakeJoiners } from "./join.ts";
import {
  call,
  errorText,
  isTerminalState,
  readState,
  casOptions,
  casState,
  readTurn,
  subAgentLink,
  type SubAgentLink,
  type Trigger,
} from "./records.ts";
import { markEndedOnParent } from "./spawn.ts";

/** The notice (protocol TurnStateChanged). A link made before the orchestrator offered
 * subscriptions still has a plain binding that sends the engine's own fire, naming the session as
 * `key`: read too, so those children are still followed to their end. */
const childNotice = z.union([
  z.looseObject({ session_id: z.string(), event_type: z.string() }),
  z.looseObject({ key: z.string(), event_type: z.string() }).transform((f) => ({ session_id: f.key, event_type: f.event_type })),
]);

async function unregister(trigger: Trigger, id: string): Promise<void> {
  try {
    await call(trigger, "engine::unregister_trigger", { id });
  } catch (e) {
    console.warn(`sub-agents: trigger ${id} not removed: ${errorText(e)}`);
  }
}

/** End the subscription on a child's run (or, for an older link, its plain binding). */
async function unsubscribe(trigger: Trigger, id: string): Promise<void> {
  try {
    const r = await call<TurnUnsubscribeResponse>(trigger, TURN_UNSUBSCRIBE, { subscription_id: id });
    if (r?.removed) return;
  } catch (e) {
    console.warn(`sub-agents: subscription ${id} not ended: ${errorText(e)}`);
    return;
  }
  await unregister(trigger, id);
}

/** ON_CHILD_STATE. Reads the child's run fresh (the notice only says which run moved), so a
 * repeated or late notice does the same as the first. A failure throws: the notice comes again. */
export async function onChildState(trigger: Trigger, payload: unknown, now: number = Date.now()): Promise<{ ok: true; ended?: boolean }> {
  const fire = childNotice.safeParse(payload);
  if (!fire.success || fire.data.event_type === "state:deleted") return { ok: true };
  const child = fire.data.session_id;
  const link = await readState(trigger, { scope: SCOPE_LINKS, key: child }, subAgentLink);
  if (!link) return { ok: true };
  const t = await readTurn(trigger, child);
  if (!t) return { ok: true };
  if (!isTerminalState(t.state)) {
    if (t.stop_requested) return { ok: true };
    const parent = await readTurn(trigger, link.parent_session_id);
    if (!parent || isTerminalState(parent.state) || parent.run_id !== link.parent_run_id) {
      await call(trigger, "turn::stop", { session_id: child }, STOP_TIMEOUT_MS);
    }
    return { ok: true };
  }
  const state = t.state;
  if (!link.ended) {
    await casState(
      trigger,
      { scope: SCOPE_LINKS, key: child },
      (cur) => (cur && !cur.ended ? { ...cur, ended: { state, at_ms: now } } : undefined),
      casOptions(subAgentLink),
    );
  }
  notifyEnded(child);
  await wakeJoiners(trigger, link, state, now);
  await markEndedOnParent(trigger, link.parent_session_id, child);
  if (link.budget.mode === "share" && !link.budget.settled) {
    const budget = await settleChildBudget(trigger, link.budget, child);
    await casState(trigger, { scope: SCOPE_LINKS, key: child }, (cur) => (cur ? { ...cur, budget } : undefined), casOptions(subAgentLink));
  }
  await unsubscribe(trigger, link.triggers.state);
  return { ok: true, ended: true };
}

// ------------------------------------------------------------------ the event mirror

type Mirror = Pick<SubAgentLink, "child_session_id" | "parent_session_id" | "ancestors" | "depth" | "triggers">;
/** Links by child id (a cache: a miss reads the link again; links never change these fields). */
const mirrors = new Map<string, Mirror>();

async function mirrorOf(trigger: Trigger, child: string): Promise<Mirror | undefined> {
  const hit = mirrors.get(child);
  if (hit) return hit;
  const link = await readState(trigger, { scope: SCOPE_LINKS, key: child }, subAgentLink);
  if (!link) return undefined;
  if (mirrors.size >= LINK_CACHE_MAX) mirrors.delete(mirrors.keys().next().value as string);
  const m: Mirror = {
    child_session_id: link.child_session_id,
    parent_session_id: link.parent_session_id,
    ancestors: link.ancestors,
    depth: link.depth,
    triggers: link.triggers,
  };
  mirrors.set(child, m);
  return m;
}

const streamFire = z.looseObject({
  groupId: z.string(),
  id: z.string().nullable().optional(),
  event: z.looseObject({ type: z.string(), data: z.unknown().optional() }),
});

/** ON_CHILD_EVENT: a stored event of the child (`create`) goes to each ancestor; custom events
 * (a grandchild's mirror arriving in this child's group) and updates are not forwarded again. */
export async function onChildEvent(trigger: Trigger, payload: unknown): Promise<{ ok: true; mirrored: number }> {
  const fire = streamFire.safeParse(payload);
  if (!fire.success || fire.data.event.type !== "create" || !fire.data.id) return { ok: true, mirrored: 0 };
  const data = fire.data.event.data as AgentEvent | undefined;
  if (!data || typeof data !== "object" || typeof data.type !== "string") return { ok: true, mirrored: 0 };
  const m = await mirrorOf(trigger, fire.data.groupId);
  if (!m) return { ok: true, mirrored: 0 };
  let mirrored = 0;
  if (!SUB_AGENT_UNMIRRORED_EVENTS.includes(data.type)) {
    const event: SubAgentChildEvent = {
      type: CHILD_EVENT,
      child_session_id: m.child_session_id,
      parent_session_id: m.parent_session_id,
      depth: m.depth,
      item_id: fire.data.id,
      event: data,
    };
    for (const ancestor of m.ancestors) {
      try {
        await call(trigger, "stream::send", { stream_name: AGENT_EVENTS_STREAM, group_id: ancestor, type: CHILD_EVENT, data: event });
        mirrored++;
      } catch (e) {
        console.warn(`sub-agents: ${data.type} of ${m.child_session_id} not mirrored to ${ancestor}: ${errorText(e)}`);
      }
    }
  }
  // The run's last event: nothing more to follow.
  if (data.type === "agent_end") {
    await unregister(trigger, m.triggers.events);
    mirrors.delete(m.child_session_id);
  }
  return { ok: true, mirrored };
}
