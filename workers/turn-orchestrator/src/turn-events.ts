// iii's async turn events (docs/harness.md, "iii's harness surface"): `harness::turn_started` when a
// run's record is created, `harness::turn_completed` when a write makes it terminal. A worker binds
// one with `registerTrigger({type, function_id, config?: {session_id?, parent_session_id?}})`.
//
// The orchestrator runs inside the engine's Worker as well as in Node, and only a socket worker can
// provide a trigger type, so the bindings are not delivered to a provider: the engine keeps them
// (listed, status `parked` while no one provides the type) and the orchestrator reads them from
// `engine::registered-triggers::list` when a turn starts or ends and calls each bound function
// asynchronously (`void`: the turn never waits for a listener). Each fires from the write that
// moved the record, which a compare-and-set lets happen once per run: at most once per turn.
import {
  HARNESS_TURN_COMPLETED,
  HARNESS_TURN_STARTED,
  type TurnCompletedEvent,
  type TurnStartedEvent,
  type TurnStateRecord,
  type TurnStatus,
} from "@iii-edge/protocol/harness";
import { z } from "zod";
import { errorCode, errorText, type Trigger } from "./calls.ts";
import { loadRunRequest } from "./run-request.ts";

/** The engine's binding list is a local read of its catalog. */
const LIST_TIMEOUT_MS = 2_000;
/** Bindings read per fire: one page; more listeners of one turn event than this is not a deployment. */
const MAX_BINDINGS = 1_000;

const bindingsPage = z.looseObject({
  registered_triggers: z.array(z.looseObject({ function_id: z.string(), config: z.unknown() })),
});
const filterConfig = z.looseObject({ session_id: z.string().optional(), parent_session_id: z.string().optional() });

type Parent = { session_id: string; turn_id: string; function_call_id: string };

/** The sub-agent parent a run request records (sub-agents' `run::start` link), as iii's payload names it. */
async function parentOf(trigger: Trigger, sid: string): Promise<Parent | undefined> {
  const { raw } = await loadRunRequest(trigger, sid);
  const p = z
    .looseObject({ parent: z.looseObject({ session_id: z.string(), run_id: z.string(), function_call_id: z.string().optional() }) })
    .safeParse(raw);
  if (!p.success) return undefined;
  return { session_id: p.data.parent.session_id, turn_id: p.data.parent.run_id, function_call_id: p.data.parent.function_call_id ?? "" };
}

function matches(config: unknown, sid: string, parent: Parent | undefined): boolean {
  const c = filterConfig.safeParse(config ?? {});
  if (!c.success) return true;
  if (c.data.session_id !== undefined && c.data.session_id !== sid) return false;
  if (c.data.parent_session_id !== undefined && c.data.parent_session_id !== parent?.session_id) return false;
  return true;
}

/** Call every function bound to `type` whose filter takes this session (best effort: a turn goes
 * on whatever its listeners do). */
async function fire(trigger: Trigger, type: string, sid: string, build: (parent: Parent | undefined) => unknown): Promise<void> {
  try {
    const page = bindingsPage.parse(
      await trigger({
        function_id: "engine::registered-triggers::list",
        payload: { trigger_type: type, limit: MAX_BINDINGS },
        timeoutMs: LIST_TIMEOUT_MS,
      }),
    );
    if (page.registered_triggers.length === 0) return;
    const parent = await parentOf(trigger, sid);
    const payload = build(parent);
    for (const b of page.registered_triggers) {
      if (!matches(b.config, sid, parent)) continue;
      await trigger({ function_id: b.function_id, payload, action: { type: "void" } }).catch((e: unknown) =>
        console.warn(`turn-orchestrator: ${type} to ${b.function_id} not sent: ${errorText(e)}`),
      );
    }
  } catch (e) {
    // An engine without the listing (a test's hand-made surface) has no bindings either.
    if (errorCode(e) === "function_not_found") return;
    console.warn(`turn-orchestrator: ${type} of ${sid} not fired: ${errorText(e)}`);
  }
}

export function fireTurnStarted(trigger: Trigger, rec: TurnStateRecord): Promise<void> {
  return fire(trigger, HARNESS_TURN_STARTED, rec.session_id, (parent) => {
    const ev: TurnStartedEvent = { session_id: rec.session_id, turn_id: rec.run_id, timestamp: Date.now() };
    if (parent) ev.parent = parent;
    return ev;
  });
}

/** iii's status of a record (our states are finer). */
export function turnStatusOf(rec: Pick<TurnStateRecord, "state" | "stop_requested">): TurnStatus {
  switch (rec.state) {
    case "function_execute":
    case "function_awaiting_approval":
      return "awaiting_functions";
    case "stopped":
      return rec.stop_requested ? "cancelled" : "completed";
    case "failed":
      return "failed";
    default:
      return "running";
  }
}

/** A turn's result: the output contract's value for a `json` contract, else the final text. */
export function resultOf(rec: TurnStateRecord): { result?: unknown; result_error?: string } {
  if (rec.output?.type === "json") {
    const out: { result?: unknown; result_error?: string } = {};
    if (rec.result !== undefined) out.result = rec.result;
    if (rec.result_error !== undefined) out.result_error = rec.result_error;
    return out;
  }
  const blocks = rec.last_assistant?.content ?? [];
  return blocks.length === 0 ? {} : { result: blocks.map((b) => (b.type === "text" ? b.text : "")).join("") };
}

export function fireTurnCompleted(trigger: Trigger, rec: TurnStateRecord): Promise<void> {
  return fire(trigger, HARNESS_TURN_COMPLETED, rec.session_id, (parent) => {
    const status = turnStatusOf(rec) as TurnCompletedEvent["status"];
    const ev: TurnCompletedEvent = { session_id: rec.session_id, turn_id: rec.run_id, status, ...resultOf(rec), timestamp: Date.now() };
    if (status === "failed" && rec.error) ev.reason = rec.error.message;
    if (parent) ev.parent = parent;
    return ev;
  });
}
