// What reaches a run from outside its steps: reading its state, stopping it, steering it, reading
// its events from a cursor, and the approval wake (docs/harness-contracts.md §1.2, §2.7, §3.4, §4.1).
import { z } from "zod";
import type { Tracer } from "@iii-edge/sdk-edge/worker";
import {
  AGENT_EVENTS_STREAM,
  INBOX_STEERING,
  type AgentEvent,
  type RunEventsResponse,
  type TurnStateView,
  type TurnStopResponse,
} from "@iii-edge/protocol/harness";
import { callRequired, invalid, type Trigger } from "./calls.ts";
import { stopChildren } from "./children.ts";
import { EVENTS_DEFAULT_LIMIT, EVENT_SEQ_DIGITS, SCOPE_APPROVALS, STOP_CAS_ATTEMPTS } from "./constants.ts";
import { parseDecision } from "./gate.ts";
import { normaliseMessage } from "./messages.ts";
import { boundedKey, eventItemId, eventSeqOf, isTerminal, parseRecord, viewOf } from "./record.ts";
import { StateConflict, casWriteValue, enqueue, loadRaw, loadRecord, stepMessage } from "./store.ts";
import { inTurn } from "./trace.ts";

export async function getState(trigger: Trigger, sid: string): Promise<TurnStateView | null> {
  const loaded = await loadRecord(trigger, sid);
  return loaded ? viewOf(loaded.rec) : null;
}

/**
 * `turn::stop`: cooperative (§2.7). The flag goes on the record (compare-and-set; steps saving at
 * the same moment keep it, see store.writeRecord) and every step checks it first. A parked run
 * also gets an `aborted` decision per waiting call, so the approval wake closes the batch; and the
 * current state is woken once more, so a run whose queued step was lost still stops.
 */
export async function stopRun(trigger: Trigger, sid: string, tracer?: Tracer): Promise<TurnStopResponse> {
  for (let attempt = 0; attempt < STOP_CAS_ATTEMPTS; attempt++) {
    const raw = await loadRaw(trigger, sid);
    const rec = parseRecord(raw);
    if (!rec) return { session_id: sid, stopping: false, state: null };
    if (isTerminal(rec.state)) {
      // Its children may outlive it (an end whose cascade was lost): a stop still reaches them.
      await stopChildren(trigger, sid, "parent_stopped");
      return { session_id: sid, stopping: false, state: rec.state };
    }
    if (!rec.stop_requested) {
      // Only the flag changes (never the parsed copy, whose defaults would differ from what is
      // stored): a step racing with this write sees a difference in the flag alone and keeps it.
      const flagged = { ...(raw as Record<string, unknown>), stop_requested: true };
      try {
        await casWriteValue(trigger, sid, flagged, raw);
      } catch (e) {
        if (e instanceof StateConflict) continue;
        throw e;
      }
    }
    if (rec.state === "function_awaiting_approval") {
      for (const a of rec.awaiting_approval ?? []) {
        await callRequired(trigger, "state::set", {
          scope: SCOPE_APPROVALS,
          key: `${sid}/${a.function_call_id}`,
          value: { decision: "aborted", reason: "session_aborted" },
        });
      }
    }
    // The wake belongs to the run's trace (the stop request has its own).
    await inTurn(tracer, rec, () => enqueue(trigger, stepMessage(sid, rec.state, rec.step, boundedKey(`${sid}:${rec.step}:stop`))));
    await stopChildren(trigger, sid, "parent_stopped");
    return { session_id: sid, stopping: true, state: rec.state };
  }
  throw new StateConflict(sid);
}

/** `run::steer`: a message for the running turn, taken at its next steering_check; `ok: false`
 * when the inbox is full. */
export async function steer(trigger: Trigger, sid: string, message: unknown): Promise<{ ok: boolean }> {
  const r = await callRequired<{ ok?: unknown }>(trigger, "session-inbox::push", {
    name: INBOX_STEERING,
    session_id: sid,
    item: normaliseMessage(message),
  });
  return { ok: r?.ok !== false };
}

/**
 * `run::events`: the session's `agent::events` items after `after`, in id order, one page
 * (`stream::list_items`): what a follower that dropped reads to catch up with nothing skipped.
 */
export async function readEvents(
  trigger: Trigger,
  sid: string,
  after: string | null | undefined,
  limit = EVENTS_DEFAULT_LIMIT,
): Promise<RunEventsResponse> {
  if (after) {
    // A cursor is an event id exactly as a page gave it (`next`): one of another shape (say, an older
    // zero-padding) or one this session never had would otherwise read as "nothing after it".
    if (eventSeqOf(sid, after) === undefined || after.length < sid.length + 1 + EVENT_SEQ_DIGITS) {
      throw invalid(
        `after: '${after}' is not an event id of session ${sid}: ids look like '${eventItemId(sid, 42)}'; pass the \`next\` of the page you read`,
      );
    }
    const known = await callRequired<unknown>(trigger, "stream::get", { stream_name: AGENT_EVENTS_STREAM, group_id: sid, item_id: after });
    if (known === null || known === undefined)
      throw invalid(`after: session ${sid} has no event '${after}': pass the \`next\` of the page you read`);
  }
  const page = await callRequired<{ items: { item_id: string; data: unknown }[]; next: string | null }>(trigger, "stream::list_items", {
    stream_name: AGENT_EVENTS_STREAM,
    group_id: sid,
    ...(after ? { after } : {}),
    limit,
  });
  const events: RunEventsResponse["events"] = page.items.map((i) => ({ item_id: i.item_id, data: i.data as AgentEvent }));
  return { events, next: events.length > 0 ? events[events.length - 1].item_id : (after ?? null) };
}

const approvalEvent = z.looseObject({ event_type: z.string(), key: z.string(), new_value: z.unknown().optional() });
const APPROVAL_KEY = /^[^/]+\/[^/]+$/;

/**
 * `turn::on_approval` — the one `state` trigger on scope `approvals` (§3.4). Deliveries may
 * repeat or arrive late: the decision is read fresh by the step, and the wake's idempotency key
 * and the stale guard make repeats harmless.
 */
export async function onApproval(trigger: Trigger, payload: unknown, tracer?: Tracer): Promise<{ ok: true; woke: boolean }> {
  const ev = approvalEvent.safeParse(payload);
  if (!ev.success) return { ok: true, woke: false };
  const { event_type, key, new_value } = ev.data;
  if (event_type !== "state:created" && event_type !== "state:updated") return { ok: true, woke: false };
  if (!APPROVAL_KEY.test(key)) return { ok: true, woke: false };
  const decision = parseDecision(new_value);
  if (!decision) return { ok: true, woke: false };
  const [sid, cid] = key.split("/");
  const loaded = await loadRecord(trigger, sid);
  if (!loaded || isTerminal(loaded.rec.state) || loaded.rec.state !== "function_awaiting_approval") return { ok: true, woke: false };
  const { step } = loaded.rec;
  // The decision came in the approver's own trace; the step it wakes is part of the run's.
  await inTurn(tracer, loaded.rec, () =>
    enqueue(
      trigger,
      stepMessage(sid, "function_awaiting_approval", step, boundedKey(`${sid}:${step}:approval:${cid}:${decision.decision}`)),
    ),
  );
  return { ok: true, woke: true };
}
