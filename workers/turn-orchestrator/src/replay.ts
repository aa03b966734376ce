// A run that replays a cassette (docs/cassettes.md; `run::start`'s `replay_id`): the same steps as
// any run, except that a call the policy allows is answered by `cassette::answer` with the result
// the recorded turn got — the function is never invoked — and a call that needs a person takes the
// recorded person's decision instead of parking.
import { type ApprovalDecision, type FunctionCall, type FunctionResult, replayAnswerResponse } from "@iii-edge/protocol/harness";
import type { Trigger } from "./calls.ts";
import { FUNCTION_CALL_TIMEOUT_MS } from "./constants.ts";
import { targetErrorResult } from "./gate.ts";
import { textBlock } from "./messages.ts";

/** What a replayed call that needs a person gets when the recorded turn has no decision for it. */
export const NO_RECORDED_DECISION: ApprovalDecision = {
  decision: "deny",
  reason: "replay: this call needs a person's approval and the recorded turn has no decision for it",
};

async function ask(trigger: Trigger, call: FunctionCall, sid: string, replayId: string, approval: boolean) {
  const payload = { replay_id: replayId, session_id: sid, function_call_id: call.id, function_id: call.function_id, approval };
  const raw = await trigger({ function_id: "cassette::answer", payload, timeoutMs: FUNCTION_CALL_TIMEOUT_MS });
  const parsed = replayAnswerResponse.safeParse(raw);
  if (!parsed.success) throw new Error(`cassette::answer answered something unreadable for call ${call.id}`);
  return parsed.data;
}

/** The recorded result of `call`; an error result the model reads when the cassette has none. */
export async function answerFromCassette(trigger: Trigger, call: FunctionCall, sid: string, replayId: string): Promise<FunctionResult> {
  try {
    const a = await ask(trigger, call, sid, replayId, false);
    if ("result" in a) return { content: a.result.content as FunctionResult["content"], details: a.result.details };
    const reason = a.found ? "the cassette holds a decision, not a result, for it" : a.reason;
    return {
      content: [textBlock(`Replay: no recorded result for \`${call.function_id}\` (${reason}).`)],
      details: { error: "not_in_cassette", function_id: call.function_id, reason },
      terminate: false,
    };
  } catch (e) {
    return targetErrorResult(call, e, FUNCTION_CALL_TIMEOUT_MS);
  }
}

/** The recorded person's decision on `call`, or undefined when the recorded turn asked nobody. */
export async function recordedDecision(
  trigger: Trigger,
  call: FunctionCall,
  sid: string,
  replayId: string,
): Promise<ApprovalDecision | undefined> {
  try {
    const a = await ask(trigger, call, sid, replayId, true);
    if (!("decision" in a)) return undefined;
    if (a.decision === "expired") return { decision: "deny", reason: "approval expired (recorded)", expired: true };
    return { decision: a.decision, reason: a.decision === "allow" ? null : "denied by a person (recorded)" };
  } catch {
    return undefined;
  }
}
