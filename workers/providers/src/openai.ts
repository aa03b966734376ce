// OpenAI chat completions (`POST <base>/chat/completions`, `stream: true`), the wire format every
// OpenAI-compatible server speaks (llama.cpp, Ollama, vLLM, LM Studio, DeepSeek, OpenRouter, …).
import { isRecord } from "@iii-edge/protocol";
import type { AgentFunction, AgentMessage, ContentBlock, StopReason } from "@iii-edge/protocol/harness";
import { clip, errorMessageOf, eventJson, generatedCallId, joinUrl, num, str } from "./adapter.ts";
import type { PreparedCall, ProviderAdapter, StreamDecoder, WireRequest } from "./adapter.ts";
import type { AssistantBuilder } from "./assistant.ts";
import { classify, StreamFailure } from "./errors.ts";
import { functionResultText, keepsCalls, MISSING_RESULT_TEXT, textOf } from "./messages.ts";

export const OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1";

type ContentPart = { type: "text"; text: string } | { type: "image_url"; image_url: { url: string } };
type WireMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string | ContentPart[] }
  | {
      role: "assistant";
      content: string | null;
      tool_calls?: { id: string; type: "function"; function: { name: string; arguments: string } }[];
    }
  | { role: "tool"; tool_call_id: string; content: string };

const imagePart = (b: { mime: string; data: string }): ContentPart => ({
  type: "image_url",
  image_url: { url: `data:${b.mime};base64,${b.data}` },
});

function userContent(blocks: readonly ContentBlock[]): string | ContentPart[] | undefined {
  const parts: ContentPart[] = [];
  for (const b of blocks) {
    if (b.type === "text" && b.text !== "") parts.push({ type: "text", text: b.text });
    else if (b.type === "image") parts.push(imagePart(b));
  }
  if (parts.length === 0) return undefined;
  return parts.every((p) => p.type === "text") ? parts.map((p) => (p as { text: string }).text).join("\n") : parts;
}

/** AgentMessages → chat messages: results become `tool` messages (their images follow as a user
 * message, which tool messages cannot carry); every call sent gets an answer and every answer
 * sent has its call, as the API requires. */
export function toOpenAIMessages(system: string | null, messages: readonly AgentMessage[]): WireMessage[] {
  const out: WireMessage[] = [];
  if (system) out.push({ role: "system", content: system });
  let unanswered: string[] = [];
  let resultImages: ContentPart[] = [];
  const settle = () => {
    for (const id of unanswered) out.push({ role: "tool", tool_call_id: id, content: MISSING_RESULT_TEXT });
    unanswered = [];
    if (resultImages.length > 0)
      out.push({ role: "user", content: [{ type: "text", text: "Images returned by the function calls above:" }, ...resultImages] });
    resultImages = [];
  };
  const sent = new Set<string>();
  const answer = (id: string, content: readonly ContentBlock[], details: unknown) => {
    if (!sent.has(id)) return; // its call was not sent (a failed turn's): a lone result is rejected
    out.push({ role: "tool", tool_call_id: id, content: functionResultText(content, details) });
    unanswered = unanswered.filter((u) => u !== id);
    for (const b of content) if (b.type === "image") resultImages.push(imagePart(b));
  };
  for (const m of messages) {
    if (m.role === "function_result") {
      answer(m.function_call_id, m.content, m.details);
      continue;
    }
    if (m.role === "user") {
      for (const b of m.content) if (b.type === "function_result") answer(b.function_call_id, b.content, undefined);
      settle();
      const content = userContent(m.content);
      if (content !== undefined) out.push({ role: "user", content });
    } else if (m.role === "assistant") {
      settle();
      const text = textOf(m.content);
      const calls = keepsCalls(m) ? m.content.filter((b) => b.type === "function_call") : [];
      if (!text && calls.length === 0) continue;
      const msg: WireMessage = { role: "assistant", content: text || null };
      if (calls.length > 0) {
        msg.tool_calls = calls.map((c) => ({
          id: c.id,
          type: "function",
          function: { name: c.function_id, arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments ?? {}) },
        }));
        unanswered = calls.map((c) => c.id);
        for (const c of calls) sent.add(c.id);
      }
      out.push(msg);
    }
  }
  settle();
  return out;
}

export function toOpenAITools(tools: readonly AgentFunction[]) {
  return tools.map((t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.parameters } }));
}

/** api.openai.com itself wants `max_completion_tokens` (its reasoning models reject `max_tokens`);
 * compatible servers know `max_tokens`. */
const isOpenAIItself = (base: string) => /^https:\/\/api\.openai\.com(\/|$)/.test(base);

const STOP_REASONS: Record<string, StopReason> = {
  stop: "end",
  length: "length",
  tool_calls: "function_call",
  function_call: "function_call",
};

class OpenAIDecoder implements StreamDecoder {
  private readonly calls = new Map<number, number>();
  private finishReason: string | undefined;
  private readonly b: AssistantBuilder;
  constructor(b: AssistantBuilder) {
    this.b = b;
  }

  event(e: { data: string }): boolean {
    if (e.data.trim() === "[DONE]") {
      this.complete();
      return true;
    }
    const chunk = eventJson("openai", e.data);
    if (!isRecord(chunk)) return false;
    if (chunk.error !== undefined && chunk.error !== null) this.streamError(chunk.error);
    if (isRecord(chunk.usage)) this.usage(chunk.usage);
    const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
    if (!isRecord(choice)) return false;
    const delta = isRecord(choice.delta) ? choice.delta : {};
    // `reasoning_content`: llama.cpp, vLLM, DeepSeek; `reasoning`: Ollama, OpenRouter.
    const reasoning = str(delta.reasoning_content) ?? str(delta.reasoning);
    if (reasoning) this.b.thinking(reasoning);
    const text = str(delta.content);
    if (text) this.b.text(text);
    if (Array.isArray(delta.tool_calls)) {
      delta.tool_calls.forEach((tc, position) => {
        if (!isRecord(tc)) return;
        const key = num(tc.index) ?? position;
        const fn = isRecord(tc.function) ? tc.function : {};
        let at = this.calls.get(key);
        if (at === undefined) {
          at = this.b.beginCall(str(tc.id) || generatedCallId(), str(fn.name) ?? "");
          this.calls.set(key, at);
        } else if (str(fn.name)) this.b.nameCall(at, str(fn.name)!);
        const args = str(fn.arguments);
        if (args) this.b.callArguments(at, args);
      });
    }
    const finish = str(choice.finish_reason);
    if (finish) this.finishReason = finish;
    return false;
  }

  private usage(u: Record<string, unknown>): void {
    const prompt = num(u.prompt_tokens);
    const cached = isRecord(u.prompt_tokens_details) ? num(u.prompt_tokens_details.cached_tokens) : undefined;
    const reasoning = isRecord(u.completion_tokens_details) ? num(u.completion_tokens_details.reasoning_tokens) : undefined;
    this.b.usage({
      input: prompt === undefined ? undefined : prompt - (cached ?? 0),
      output: num(u.completion_tokens),
      cache_read: cached,
      reasoning,
    });
  }

  private streamError(err: unknown): never {
    const e = isRecord(err) ? err : { message: String(err) };
    const message = clip(str(e.message) ?? JSON.stringify(err));
    const status = num(e.code) ?? num(e.status);
    const label = `${str(e.type) ?? ""} ${str(e.code) ?? ""}`;
    const kind = status === undefined && /rate.?limit/i.test(label) ? "rate_limited" : classify(status, message);
    throw new StreamFailure(kind, `openai: ${message}`);
  }

  private complete(): void {
    if (this.finishReason === "content_filter") {
      this.b.fail("permanent", "openai: the provider's content filter stopped the response");
      return;
    }
    this.b.finish(STOP_REASONS[this.finishReason ?? "stop"] ?? "end");
  }

  end(): void {
    // Some compatible servers end without `[DONE]`; a response that reported its finish is whole.
    if (this.finishReason) this.complete();
    else throw new StreamFailure("transient", "openai: the stream ended before the response was complete");
  }
}

/** OpenAI's structured output: `json_schema` holds the model to the schema; without one,
 * `json_object` asks for any JSON value. Not strict: strict mode refuses schemas that leave
 * `additionalProperties` open, which a caller's schema may well do (the harness validates anyway). */
export function openAIResponseFormat(f: { type: "json"; schema?: Record<string, unknown> }): Record<string, unknown> {
  if (!f.schema) return { type: "json_object" };
  return { type: "json_schema", json_schema: { name: "result", schema: f.schema, strict: false } };
}

export const openai: ProviderAdapter = {
  name: "openai",
  default_base_url: OPENAI_DEFAULT_BASE_URL,
  keyless_with_custom_base_url: true,
  request(call: PreparedCall): WireRequest {
    const c = call.credential;
    const token = c.type === "api_key" ? c.key : c.access_token;
    const body: Record<string, unknown> = {
      model: call.model,
      messages: toOpenAIMessages(call.system_prompt, call.messages),
      stream: true,
      stream_options: { include_usage: true },
    };
    if (call.tools.length > 0) body.tools = toOpenAITools(call.tools);
    if (call.response_format) body.response_format = openAIResponseFormat(call.response_format);
    if (call.max_tokens !== undefined) body[isOpenAIItself(call.base_url) ? "max_completion_tokens" : "max_tokens"] = call.max_tokens;
    return {
      url: joinUrl(call.base_url, "/chat/completions"),
      // No key (a local server that takes none): no authorization header at all.
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), "content-type": "application/json", accept: "text/event-stream" },
      body,
    };
  },
  decoder: (b) => new OpenAIDecoder(b),
  errorMessage: errorMessageOf,
};
