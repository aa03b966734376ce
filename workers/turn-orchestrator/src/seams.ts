// Part 2 seams: where budget tracking (§6.2), function-call hooks (§6.3) and compaction (§6.1)
// plug in. Each is one named function that does nothing yet; the call sites are final.
import type { AgentMessage, FunctionCall, FunctionResult, TurnStateRecord } from "@iii-edge/protocol/harness";
import type { Trigger } from "./calls.ts";
import type { StoredRunRequest } from "./run-request.ts";

/** Before each provider call of a run with a `budget_id`: `budget::check` will go here (a refused
 * budget ends the round with an error assistant). Part 1: allows everything. */
export async function checkBudgetBeforeProviderCall(_trigger: Trigger, _rec: TurnStateRecord, _req: StoredRunRequest): Promise<void> {}

/** Before a call is dispatched (after the policy allowed it): `agent::before_function_call` hooks
 * may rewrite the arguments. Part 1: the call unchanged. */
export async function runBeforeFunctionCallHooks(_trigger: Trigger, call: FunctionCall): Promise<FunctionCall> {
  return call;
}

/** After a call returned: `agent::after_function_call` hooks may rewrite the result (with the
 * subscriber-presence short-circuit of §7 item 1). Part 1: the result unchanged. */
export async function runAfterFunctionCallHooks(_trigger: Trigger, _call: FunctionCall, result: FunctionResult): Promise<FunctionResult> {
  return result;
}

/** Before the provider call: synchronous compaction when the transcript would overflow the
 * model's window (`model_meta`). Part 1: the transcript unchanged. */
export async function compactionPreflight(_trigger: Trigger, _rec: TurnStateRecord, messages: AgentMessage[]): Promise<AgentMessage[]> {
  return messages;
}
