// Error classification (docs/harness-contracts.md §4.3): HTTP 401 → auth_expired; 429 → rate_limited; a
// context-overflow message (that is not a rate-limit message) → context_overflow; 5xx → transient;
// other 4xx → permanent; no status → transient. `retryable` is implied by the kind (rate_limited,
// transient).
import type { ErrorKind } from "@iii-edge/protocol/harness";

/** How each provider words "the prompt does not fit" (OpenAI, Anthropic, llama.cpp, vLLM, Ollama, …). */
const OVERFLOW_PATTERNS: readonly RegExp[] = [
  /prompt is too long/i,
  /request_too_large/i,
  /request too large/i,
  /exceeds? the (?:model'?s )?(?:maximum )?context (?:window|length|size)/i,
  /maximum context length is \d+ tokens/i,
  /context_length_exceeded/i,
  /context length exceeded/i,
  /model_context_window_exceeded/i,
  /too many tokens/i,
  /exceeds? (?:the )?(?:available )?context size/i,
  /exceed_context_size/i,
  /input (?:is )?too long/i,
  /reduce the length of the messages/i,
];
/** Rate-limit wording that also mentions tokens ("tokens per min"), so it is not an overflow. */
const RATE_LIMIT_PATTERNS: readonly RegExp[] = [
  /rate.?limit/i,
  /throttl/i,
  /too many requests/i,
  /tokens per (?:min|minute|day)/i,
  /\b[TR]PM\b/,
  /quota/i,
];

export function isOverflowMessage(message: string): boolean {
  return OVERFLOW_PATTERNS.some((p) => p.test(message)) && !RATE_LIMIT_PATTERNS.some((p) => p.test(message));
}

export function classify(status: number | undefined, message: string): ErrorKind {
  if (status === 401) return "auth_expired";
  if (status === 429) return "rate_limited";
  if (isOverflowMessage(message)) return "context_overflow";
  if (status === undefined) return "transient";
  if (status >= 500) return "transient";
  // A bare 400/413 with no body is how some gateways answer an oversized request.
  if ((status === 400 || status === 413) && message.trim() === "") return "context_overflow";
  if (status >= 400) return "permanent";
  return "transient";
}

/** A failure the stream turns into its terminal `error` frame. */
export class StreamFailure extends Error {
  readonly kind: ErrorKind;
  constructor(kind: ErrorKind, message: string) {
    super(message);
    this.name = "StreamFailure";
    this.kind = kind;
  }
}
