// The orchestrator's side of sub-agents (workers/sub-agents; docs/harness-contracts.md §2.2 `pending` +
// `child_session_id`, §2.7 cascade). Two hooks, nothing else: a `harness::join` whose child is
// still running parks its call like an approval (no queue step is held while the child works; the
// sub-agents worker writes the `allow` decision that wakes it when the child ends), and a run that
// is stopped or ends stops the children it spawned. The children themselves are the sub-agents
// worker's records, reached by function id only.
import {
  HARNESS_JOIN,
  HARNESS_STOP_CHILDREN,
  isJoinPending,
  type AwaitingChild,
  type FunctionCall,
  type FunctionResult,
} from "@iii-edge/protocol/harness";
import { errorCode, errorText, type Trigger } from "./calls.ts";

/** `harness::stop_children` stops each live child with `turn::stop` (which cascades further down,
 * at most SUB_AGENT_MAX_DEPTH levels): a handful of local calls, bounded so a slow sub-agents worker
 * cannot hold a `turn::stop` or the end of a run. */
export const STOP_CHILDREN_TIMEOUT_MS = 15_000;

export type ChildStopReason = "parent_stopped" | "parent_ended" | "parent_failed";

/**
 * Stop the live children of `sid` (best effort). No sub-agents worker registered means no child was
 * ever spawned: nothing to do, nothing logged. A failure is logged; the children's own records
 * still stop them later (the sub-agents worker stops a child whose parent's run is over).
 */
export async function stopChildren(trigger: Trigger, sid: string, reason: ChildStopReason): Promise<void> {
  try {
    await trigger({ function_id: HARNESS_STOP_CHILDREN, payload: { parent_session_id: sid, reason }, timeoutMs: STOP_CHILDREN_TIMEOUT_MS });
  } catch (e) {
    if (errorCode(e) === "function_not_found") return;
    console.warn(`turn-orchestrator: stopping the sub-agents of ${sid} failed (their own records stop them later): ${errorText(e)}`);
  }
}

/**
 * A first dispatch of `harness::join` that answered "still running": the call parks as an
 * `awaiting_approval` entry marked `held_by: "harness::join"` with the child's id. Anything else
 * (another function, a resumed call) is an ordinary result.
 */
export function childWaitOf(call: FunctionCall, result: FunctionResult, now: number = Date.now()): AwaitingChild | undefined {
  if (!isJoinPending(call.function_id, result.details)) return undefined;
  const entry: AwaitingChild = {
    function_call_id: call.id,
    function_id: call.function_id,
    args: call.arguments,
    pending_at: now,
    held_by: HARNESS_JOIN,
    child_session_id: result.details.child_session_id,
  };
  if (typeof result.details.expires_at === "number") entry.expires_at = result.details.expires_at;
  return entry;
}
