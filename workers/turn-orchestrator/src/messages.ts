// Messages the orchestrator writes itself (notices, failures, stops) and the normalisation of
// messages that come from clients (seed messages, steering).
import type { AgentMessage, AssistantMessage, ContentBlock, ErrorKind, FunctionCall, StopReason } from "@iii-edge/protocol/harness";
import { HARNESS_MODEL, MAX_ERROR_TEXT } from "./constants.ts";

export function syntheticAssistant(
  text: string,
  stop_reason: StopReason,
  extra: { error_kind?: ErrorKind; model?: string; provider?: string } = {},
): AssistantMessage {
  const m: AssistantMessage = {
    role: "assistant",
    content: [{ type: "text", text }],
    stop_reason,
    model: extra.model ?? HARNESS_MODEL,
    provider: extra.provider ?? HARNESS_MODEL,
    timestamp: Date.now(),
  };
  if (stop_reason === "error" || stop_reason === "aborted") {
    m.error_message = text.slice(0, MAX_ERROR_TEXT);
    m.error_kind = extra.error_kind ?? "transient";
  }
  return m;
}

/** A client's message as a transcript message: string content becomes one text block, a missing
 * timestamp becomes now. (Validated by `agentMessageSchema` before it gets here.) */
export function normaliseMessage(input: unknown, now = Date.now()): AgentMessage {
  if (typeof input === "string") return { role: "user", content: [{ type: "text", text: input }], timestamp: now };
  const m = { ...(input as Record<string, unknown>) };
  if (typeof m.content === "string") m.content = [{ type: "text", text: m.content }];
  if (typeof m.timestamp !== "number") m.timestamp = now;
  return m as unknown as AgentMessage;
}

/** The `function_call` blocks of an assistant message, in order. */
export function functionCallsOf(m: AssistantMessage): FunctionCall[] {
  const out: FunctionCall[] = [];
  for (const b of m.content ?? [])
    if (b && b.type === "function_call") out.push({ id: b.id, function_id: b.function_id, arguments: b.arguments });
  return out;
}

export const textBlock = (text: string): ContentBlock => ({ type: "text", text });

/** Messages the provider sees: `custom` ones never go to a model (§4.4). */
export const forProvider = (messages: AgentMessage[]): AgentMessage[] => messages.filter((m) => m.role !== "custom");
