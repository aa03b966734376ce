// What one provider's wire format supplies to the shared streaming loop (stream.ts): the HTTP
// request for a call, and a decoder that turns its SSE events into AssistantBuilder calls.
import type { AgentFunction, AgentMessage, Credential, Model } from "@iii-edge/protocol/harness";
import type { AssistantBuilder } from "./assistant.ts";
import type { EventSourceMessage } from "./sse.ts";
import { isRecord } from "@iii-edge/protocol";
import { StreamFailure } from "./errors.ts";

export interface PreparedCall {
  model: string;
  system_prompt: string | null;
  messages: AgentMessage[];
  tools: AgentFunction[];
  max_tokens?: number;
  /** A typed turn's output, for providers with native structured output (OpenAI-compatible). */
  response_format?: { type: "json"; schema?: Record<string, unknown> };
  credential: Credential;
  base_url: string;
  /** The catalog's entry, or null when the model is unknown (then nothing is assumed about it). */
  model_meta: Model | null;
}

export interface WireRequest {
  url: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

export interface StreamDecoder {
  /** One SSE event; true once the response is complete (the builder has finished). Throws
   * StreamFailure for a provider error event or an unreadable one. */
  event(event: EventSourceMessage): boolean;
  /** The body ended without a terminal event: finish if the response was complete, else throw. */
  end(): void;
}

export interface ProviderAdapter {
  /** `provider::<name>::stream`, the auth provider name and AssistantMessage.provider. */
  readonly name: "openai" | "anthropic";
  /** Where the provider's own API is (the base URL when none is configured). */
  readonly default_base_url: string;
  /** With a base URL of its own (a local server), a request may go without any credential. */
  readonly keyless_with_custom_base_url: boolean;
  request(call: PreparedCall): WireRequest;
  decoder(builder: AssistantBuilder): StreamDecoder;
  /** The human-readable message of an error response body. */
  errorMessage(body: string): string;
}

/** Bound on an error message quoted into a frame: enough for any provider's explanation. */
export const MAX_ERROR_MESSAGE_CHARS = 600;

export const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
export const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

export function clip(text: string): string {
  const t = text.trim();
  return t.length > MAX_ERROR_MESSAGE_CHARS ? `${t.slice(0, MAX_ERROR_MESSAGE_CHARS)}…` : t;
}

/** One SSE event's data as JSON; an event that is not JSON fails the stream as `transient`. */
export function eventJson(provider: string, data: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    throw new StreamFailure("transient", `${provider}: the stream sent an event that is not JSON: ${clip(data)}`);
  }
}

/** `{error:{message, code|type}}` (with the code, which carries words such as
 * `context_length_exceeded` that classification reads), `{message}`, `{detail}`, or the text. */
export function errorMessageOf(body: string): string {
  try {
    const j: unknown = JSON.parse(body);
    if (isRecord(j)) {
      const e = j.error;
      if (isRecord(e) && typeof e.message === "string") {
        const code = str(e.code) ?? str(e.type);
        return clip(code && !e.message.includes(code) ? `${e.message} (${code})` : e.message);
      }
      if (typeof e === "string") return clip(e);
      if (typeof j.message === "string") return clip(j.message);
      if (typeof j.detail === "string") return clip(j.detail);
    }
  } catch {
    // not JSON: the text is the message
  }
  return clip(body);
}

export function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, "")}${path}`;
}

/** A call id for a server that sent none (some local OpenAI-compatible servers). */
export function generatedCallId(): string {
  return `call_${crypto.randomUUID().replace(/-/g, "").slice(0, 24)}`;
}
