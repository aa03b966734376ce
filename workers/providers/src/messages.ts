// The transcript and tools as a provider receives them (docs/harness-contracts.md §4.4): checked once,
// normalised into well-formed AgentMessages/AgentFunctions that each wire converter (openai.ts,
// anthropic.ts) maps.
import { isRecord, formatIssues } from "@iii-edge/protocol";
import { agentMessageSchema, type AgentFunction, type AgentMessage, type ContentBlock } from "@iii-edge/protocol/harness";
import { str } from "./adapter.ts";
import { StreamFailure } from "./errors.ts";

type Loose = Record<string, unknown>;

/** Well-formed blocks only: a block a converter cannot read is dropped, not guessed at. */
export function normaliseBlocks(content: unknown): ContentBlock[] {
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }];
  if (!Array.isArray(content)) return [];
  const out: ContentBlock[] = [];
  for (const b of content) {
    if (!isRecord(b)) continue;
    if (b.type === "text" && typeof b.text === "string") out.push({ type: "text", text: b.text });
    else if (b.type === "image" && typeof b.mime === "string" && typeof b.data === "string")
      out.push({ type: "image", mime: b.mime, data: b.data });
    else if (b.type === "thinking" && typeof b.text === "string")
      out.push(b.signature === undefined ? { type: "thinking", text: b.text } : { type: "thinking", text: b.text, signature: b.signature });
    else if (b.type === "function_call" && typeof b.id === "string" && typeof b.function_id === "string")
      out.push({ type: "function_call", id: b.id, function_id: b.function_id, arguments: b.arguments ?? {} });
    else if (b.type === "function_result" && typeof b.function_call_id === "string") {
      const block: ContentBlock = { type: "function_result", function_call_id: b.function_call_id, content: normaliseBlocks(b.content) };
      if (b.is_error === true) block.is_error = true;
      out.push(block);
    }
  }
  return out;
}

/** Every message checked (a bad one fails the request with its index); custom messages dropped
 * (they never go to providers). */
export function normaliseMessages(raw: readonly unknown[]): AgentMessage[] {
  const out: AgentMessage[] = [];
  raw.forEach((m, i) => {
    const parsed = agentMessageSchema.safeParse(m);
    if (!parsed.success)
      throw new StreamFailure("permanent", `invalid request: messages[${i}] is not an AgentMessage (${formatIssues(parsed.error)})`);
    const v: Loose = parsed.data;
    const timestamp = typeof v.timestamp === "number" ? v.timestamp : 0;
    switch (v.role) {
      case "user":
        out.push({ role: "user", content: normaliseBlocks(v.content), timestamp });
        break;
      case "assistant": {
        const stop = str(v.stop_reason);
        out.push({
          role: "assistant",
          content: normaliseBlocks(v.content),
          stop_reason: stop === "length" || stop === "function_call" || stop === "aborted" || stop === "error" ? stop : "end",
          model: str(v.model) ?? "",
          provider: str(v.provider) ?? "",
          timestamp,
        });
        break;
      }
      case "function_result":
        out.push({
          role: "function_result",
          function_call_id: String(v.function_call_id),
          function_id: str(v.function_id) ?? "",
          content: normaliseBlocks(v.content),
          details: v.details,
          is_error: v.is_error === true,
          timestamp,
        });
        break;
      default:
        break; // custom
    }
  });
  return out;
}

/** Function schemas → tools; a malformed one fails the request (the model would otherwise be
 * offered a tool it cannot call). */
export function normaliseTools(raw: readonly unknown[] | undefined): AgentFunction[] {
  return (raw ?? []).map((t, i) => {
    if (!isRecord(t) || typeof t.name !== "string" || t.name === "")
      throw new StreamFailure("permanent", `invalid request: tools[${i}] needs a non-empty name`);
    const parameters = isRecord(t.parameters) ? t.parameters : { type: "object", properties: {} };
    return { name: t.name, description: str(t.description) ?? "", parameters };
  });
}

/** A denied call's result, as the model reads it, starts with a `[PERMISSION_DENIED]` line and the
 * denial envelope as one line of JSON, so the model can read why. */
export const PERMISSION_DENIED_MARKER = "[PERMISSION_DENIED]";
export function isDenied(details: unknown): boolean {
  return isRecord(details) && details.status === "denied";
}

/** A function result's text as the model reads it. */
export function functionResultText(content: readonly ContentBlock[], details: unknown): string {
  const text = content
    .filter((b): b is { type: "text"; text: string } => b.type === "text")
    .map((b) => b.text)
    .join("\n");
  if (!isDenied(details) || text.startsWith(PERMISSION_DENIED_MARKER)) return text;
  return `${PERMISSION_DENIED_MARKER}\n${JSON.stringify(details)}${text ? `\n${text}` : ""}`;
}

export const textOf = (content: readonly ContentBlock[]): string =>
  content
    .filter((b): b is { type: "text"; text: string } => b.type === "text")
    .map((b) => b.text)
    .join("");

/** What a call with no recorded result gets, so the provider sees every call answered. */
export const MISSING_RESULT_TEXT = "No result was recorded for this call (it was interrupted before it finished).";

/** An assistant turn that failed or was aborted carries no calls worth answering. */
export const keepsCalls = (m: { stop_reason: string }): boolean => m.stop_reason !== "error" && m.stop_reason !== "aborted";
