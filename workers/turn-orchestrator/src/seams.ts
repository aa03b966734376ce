// The seams where budget tracking, function-call hooks and compaction (docs/harness-contracts.md §6.2, §6.3,
// §6.1) plug in — one named function each, its logic in budget.ts, hooks.ts and compaction.ts.
import type { AgentMessage, FunctionCall, FunctionResult, TurnStateRecord } from "@iii-edge/protocol/harness";
import { checkBudget, type BudgetRefusal } from "./budget.ts";
import type { Trigger } from "./calls.ts";
import { preflight } from "./compaction.ts";
import { afterFunctionCall, beforeFunctionCall, type BeforeCallOutcome } from "./hooks.ts";
import type { StoredRunRequest } from "./run-request.ts";
import type { Tx } from "./store.ts";
import type { Entry } from "./transcript.ts";

/** Before each provider call of a run with a `budget_id`: `budget::check` with the request's
 * estimated cost, held under the round's id (./budget.ts). A refusal (budget exceeded, or no
 * budget worker to ask: fail closed) ends the run without calling the model. */
export async function checkBudgetBeforeProviderCall(
  trigger: Trigger,
  rec: TurnStateRecord,
  req: StoredRunRequest,
  messages: readonly AgentMessage[],
): Promise<BudgetRefusal | undefined> {
  return checkBudget(trigger, rec, req, messages);
}

/** Before a call is dispatched (after the policy, or a person, allowed it): `agent::before_function_call`
 * hooks may deny it or rewrite its arguments (hooks.ts; no engine call when nobody subscribes). */
export async function runBeforeFunctionCallHooks(trigger: Trigger, sessionId: string, call: FunctionCall): Promise<BeforeCallOutcome> {
  return beforeFunctionCall(trigger, sessionId, call);
}

/** After a call returned: `agent::after_function_call` hooks may rewrite the result (hooks.ts, with
 * the subscriber-presence short-circuit of §7 item 1). */
export async function runAfterFunctionCallHooks(
  trigger: Trigger,
  sessionId: string,
  call: FunctionCall,
  result: FunctionResult,
): Promise<FunctionResult> {
  return afterFunctionCall(trigger, sessionId, call, result);
}

/** Before the provider call: the messages to send. `transcript` is the window as read by
 * `readContextWindow` (summary + tail once the session was compacted); when the request would
 * overflow the model's window (`model_meta`), `context-compaction::compact_now` compacts it first
 * and the window is read again (compaction.ts). */
export async function compactionPreflight(tx: Tx, req: StoredRunRequest, transcript: readonly Entry[]): Promise<AgentMessage[]> {
  return preflight(tx, req, transcript);
}
