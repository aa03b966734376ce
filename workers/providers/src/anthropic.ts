// Anthropic messages (`POST <base>/v1/messages`, `stream: true`): `message_start`, then
// `content_block_start/delta/stop` per block, `message_delta` (stop reason, usage), `message_stop`.
import { isRecord } from "@iii-edge/protocol";
import type { AgentFunction, AgentMessage, ContentBlock, ErrorKind } from "@iii-edge/protocol/harness";
import { clip, errorMessageOf, eventJson, joinUrl, num, str } from "./adapter.ts";
import type { PreparedCall, ProviderAdapter, StreamDecoder, WireRequest } from "./adapter.ts";
import type { AssistantBuilder } from "./assistant.ts";
import { classify, isOverflowMessage, StreamFailure } from "./errors.ts";
import { functionResultText, isDenied, keepsCalls, MISSING_RESULT_TEXT } from "./messages.ts";

export const ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com";
export const ANTHROPIC_VERSION = "2023-06-01";
/** The beta flag Anthropic requires on requests authorised by an OAuth access token. */
export const ANTHROPIC_OAUTH_BETA = "oauth-2025-04-20";
/** `max_tokens` is required; without one from the caller: long enough for a large file or tool
 * call, capped by the model's own maximum when the catalog knows it. */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 16_384;

type WireBlock = Record<string, unknown> & { type: string };
interface WireMessage {
  role: "user" | "assistant";
  content: WireBlock[];
}

/** Tool ids must match ^[a-zA-Z0-9_-]+$ (ids minted by another provider may not). */
const toolId = (id: string) => id.replace(/[^a-zA-Z0-9_-]/g, "_") || "call";

function mediaBlocks(blocks: readonly ContentBlock[]): WireBlock[] {
  const out: WireBlock[] = [];
  for (const b of blocks) {
    if (b.type === "text" && b.text !== "") out.push({ type: "text", text: b.text });
    else if (b.type === "image") out.push({ type: "image", source: { type: "base64", media_type: b.mime, data: b.data } });
  }
  return out;
}

function toolResult(id: string, content: readonly ContentBlock[], details: unknown, isError: boolean): WireBlock {
  const text = functionResultText(content, details);
  const blocks: WireBlock[] = [...(text ? [{ type: "text", text }] : []), ...mediaBlocks(content.filter((b) => b.type === "image"))];
  const out: WireBlock = {
    type: "tool_result",
    tool_use_id: toolId(id),
    content: blocks.length > 0 ? blocks : [{ type: "text", text: "(no output)" }],
  };
  if (isError || isDenied(details)) out.is_error = true;
  return out;
}

/** AgentMessages → Anthropic messages: results become `tool_result` blocks of a user turn, same-role
 * turns merge, signed thinking goes back only to the model that signed it, every call sent is
 * answered and every answer has its call. */
export function toAnthropicMessages(messages: readonly AgentMessage[], model: string): WireMessage[] {
  const out: WireMessage[] = [];
  const push = (role: WireMessage["role"], content: WireBlock[]) => {
    if (content.length === 0) return;
    const last = out[out.length - 1];
    if (last?.role === role) last.content.push(...content);
    else out.push({ role, content });
  };
  const sent = new Set<string>();
  let unanswered: string[] = [];
  const answer = (id: string, content: readonly ContentBlock[], details: unknown, isError: boolean) => {
    if (!sent.has(id)) return;
    unanswered = unanswered.filter((u) => u !== id);
    push("user", [toolResult(id, content, details, isError)]);
  };
  const settle = () => {
    push(
      "user",
      unanswered.map((id) => ({
        type: "tool_result",
        tool_use_id: toolId(id),
        content: [{ type: "text", text: MISSING_RESULT_TEXT }],
        is_error: true,
      })),
    );
    unanswered = [];
  };
  for (const m of messages) {
    if (m.role === "function_result") answer(m.function_call_id, m.content, m.details, m.is_error);
    else if (m.role === "user") {
      for (const b of m.content) if (b.type === "function_result") answer(b.function_call_id, b.content, undefined, b.is_error === true);
      settle();
      push("user", mediaBlocks(m.content));
    } else if (m.role === "assistant") {
      settle();
      const sameModel = m.provider === "anthropic" && m.model === model;
      const blocks: WireBlock[] = [];
      for (const b of m.content) {
        if (b.type === "text" && b.text !== "") blocks.push({ type: "text", text: b.text });
        else if (b.type === "thinking" && sameModel) {
          const sig = b.signature;
          if (typeof sig === "string" && sig !== "") blocks.push({ type: "thinking", thinking: b.text, signature: sig });
          else if (isRecord(sig) && typeof sig.redacted === "string") blocks.push({ type: "redacted_thinking", data: sig.redacted });
        } else if (b.type === "function_call" && keepsCalls(m)) {
          blocks.push({ type: "tool_use", id: toolId(b.id), name: b.function_id, input: isRecord(b.arguments) ? b.arguments : {} });
          sent.add(b.id);
          unanswered.push(b.id);
        }
      }
      push("assistant", blocks);
    }
  }
  settle();
  // The conversation must open with a user turn.
  if (out[0]?.role === "assistant") out.unshift({ role: "user", content: [{ type: "text", text: "(conversation continues)" }] });
  return out;
}

export function toAnthropicTools(tools: readonly AgentFunction[]) {
  return tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters }));
}

/** Prompt caching: a breakpoint on the system prompt and on the newest user turn, so each round
 * reads the previous round's prefix from cache. */
const EPHEMERAL = { type: "ephemeral" } as const;

class AnthropicDecoder implements StreamDecoder {
  private readonly blocks = new Map<number, number>();
  private stopReason: string | undefined;
  private readonly b: AssistantBuilder;
  constructor(b: AssistantBuilder) {
    this.b = b;
  }

  event(e: { event?: string; data: string }): boolean {
    const d = eventJson("anthropic", e.data);
    if (!isRecord(d)) return false;
    switch (str(d.type) ?? e.event) {
      case "message_start": {
        const u = isRecord(d.message) && isRecord(d.message.usage) ? d.message.usage : undefined;
        if (u) this.usage(u);
        return false;
      }
      case "content_block_start": {
        const cb = isRecord(d.content_block) ? d.content_block : {};
        const index = num(d.index) ?? this.blocks.size;
        let at: number | undefined;
        if (cb.type === "text") {
          at = this.b.beginText();
          this.b.text(str(cb.text) ?? "");
        } else if (cb.type === "thinking") {
          at = this.b.beginThinking();
          this.b.thinking(str(cb.thinking) ?? "");
          if (str(cb.signature)) this.b.signature(str(cb.signature)!);
        } else if (cb.type === "redacted_thinking") {
          at = this.b.beginThinking({ redacted: str(cb.data) ?? "" });
        } else if (cb.type === "tool_use") {
          at = this.b.beginCall(str(cb.id) ?? "", str(cb.name) ?? "");
          if (isRecord(cb.input) && Object.keys(cb.input).length > 0) this.b.callArguments(at, JSON.stringify(cb.input));
        }
        if (at !== undefined) this.blocks.set(index, at);
        return false;
      }
      case "content_block_delta": {
        const at = this.blocks.get(num(d.index) ?? -1);
        const delta = isRecord(d.delta) ? d.delta : {};
        if (delta.type === "text_delta") this.b.text(str(delta.text) ?? "");
        else if (delta.type === "thinking_delta") this.b.thinking(str(delta.thinking) ?? "");
        else if (delta.type === "signature_delta") this.b.signature(str(delta.signature) ?? "");
        else if (delta.type === "input_json_delta" && at !== undefined) this.b.callArguments(at, str(delta.partial_json) ?? "");
        return false;
      }
      case "content_block_stop": {
        const at = this.blocks.get(num(d.index) ?? -1);
        if (at !== undefined) this.b.closeBlock(at);
        return false;
      }
      case "message_delta": {
        if (isRecord(d.delta) && str(d.delta.stop_reason)) this.stopReason = str(d.delta.stop_reason);
        if (isRecord(d.usage)) this.usage(d.usage);
        return false;
      }
      case "message_stop":
        this.complete();
        return true;
      case "error":
        return this.streamError(d.error);
      default:
        return false; // ping, and event types added later
    }
  }

  private usage(u: Record<string, unknown>): void {
    this.b.usage({
      input: num(u.input_tokens),
      output: num(u.output_tokens),
      cache_read: num(u.cache_read_input_tokens),
      cache_write: num(u.cache_creation_input_tokens),
    });
  }

  private streamError(err: unknown): never {
    const e = isRecord(err) ? err : {};
    const type = str(e.type) ?? "";
    const message = clip(str(e.message) ?? type) || "unknown error";
    throw new StreamFailure(anthropicErrorKind(type, message), `anthropic: ${message} (${type || "error"})`);
  }

  private complete(): void {
    switch (this.stopReason) {
      case "max_tokens":
        return this.b.finish("length");
      case "tool_use":
        return this.b.finish("function_call");
      case "refusal":
        return this.b.fail("permanent", "anthropic: the model declined to continue (refusal)");
      case "model_context_window_exceeded":
        return this.b.fail(
          "context_overflow",
          "anthropic: the response reached the model's context window (model_context_window_exceeded)",
        );
      default:
        return this.b.finish("end"); // end_turn, stop_sequence, pause_turn
    }
  }

  end(): void {
    if (this.stopReason) this.complete();
    else throw new StreamFailure("transient", "anthropic: the stream ended before the response was complete");
  }
}

/** Anthropic's error `type`s (in an `event: error` or an error body) → ErrorKind. */
export function anthropicErrorKind(type: string, message: string): ErrorKind {
  switch (type) {
    case "authentication_error":
      return "auth_expired";
    case "rate_limit_error":
      return "rate_limited";
    case "request_too_large":
      return "context_overflow";
    case "overloaded_error":
    case "api_error":
    case "timeout_error":
      return "transient";
    case "invalid_request_error":
    case "permission_error":
    case "not_found_error":
    case "billing_error":
      return isOverflowMessage(message) ? "context_overflow" : "permanent";
    default:
      return classify(undefined, message);
  }
}

export const anthropic: ProviderAdapter = {
  name: "anthropic",
  default_base_url: ANTHROPIC_DEFAULT_BASE_URL,
  keyless_with_custom_base_url: false,
  request(call: PreparedCall): WireRequest {
    const c = call.credential;
    const headers: Record<string, string> = {
      "anthropic-version": ANTHROPIC_VERSION,
      "content-type": "application/json",
      accept: "text/event-stream",
    };
    if (c.type === "api_key") headers["x-api-key"] = c.key;
    else {
      headers.authorization = `Bearer ${c.access_token}`;
      headers["anthropic-beta"] = ANTHROPIC_OAUTH_BETA;
    }
    const cache = call.model_meta?.supports_cache !== false;
    const messages = toAnthropicMessages(call.messages, call.model);
    if (cache) {
      const lastUser = [...messages].reverse().find((m) => m.role === "user");
      const lastBlock = lastUser?.content[lastUser.content.length - 1];
      if (lastBlock) lastBlock.cache_control = EPHEMERAL;
    }
    const maxOut = call.model_meta?.max_output_tokens;
    const body: Record<string, unknown> = {
      model: call.model,
      max_tokens: call.max_tokens ?? (maxOut ? Math.min(maxOut, ANTHROPIC_DEFAULT_MAX_TOKENS) : ANTHROPIC_DEFAULT_MAX_TOKENS),
      stream: true,
      messages,
    };
    if (call.system_prompt) body.system = [{ type: "text", text: call.system_prompt, ...(cache ? { cache_control: EPHEMERAL } : {}) }];
    if (call.tools.length > 0) body.tools = toAnthropicTools(call.tools);
    // The SDKs' base URL has no /v1; accept one that has it.
    const base = call.base_url.replace(/\/+$/, "");
    return { url: joinUrl(base, base.endsWith("/v1") ? "/messages" : "/v1/messages"), headers, body };
  },
  decoder: (b) => new AnthropicDecoder(b),
  errorMessage: errorMessageOf,
};
