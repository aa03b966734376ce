// Agent messages as the harness stores them, for suites that write a transcript by hand.
import { AGENT_TRIGGER, type AssistantMessage, type ContentBlock } from "@iii-edge/protocol/harness";

/**
 * An assistant round that ends in one call through the model's one tool, `agent_trigger
 * {function, payload}`: `lead` (what the model said or thought first), then the call `id`.
 */
export function callingRound(
  lead: ContentBlock,
  call: { id: string; function: string; payload: unknown },
  from: Pick<AssistantMessage, "model" | "provider" | "timestamp">,
): AssistantMessage {
  const { id, function: fn, payload } = call;
  const block: ContentBlock = { type: "function_call", id, function_id: AGENT_TRIGGER, arguments: { function: fn, payload } };
  return { role: "assistant", content: [lead, block], stop_reason: "function_call", ...from };
}
