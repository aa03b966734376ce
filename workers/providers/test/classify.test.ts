// Error classification (§4.3) and retry timing, as plain functions: the wording real servers use,
// and the rules that decide whether a user sees "rate limited", "too long" or "try again".
import { describe, expect, it } from "vitest";
import { classify, isOverflowMessage } from "../src/errors.ts";
import { anthropicErrorKind } from "../src/anthropic.ts";
import { DEFAULT_LIMITS, retryDelay } from "../src/stream.ts";

describe("classify", () => {
  it.each([
    [401, "invalid x-api-key", "auth_expired"],
    [429, "This request would exceed your maximum context length", "rate_limited"],
    [400, "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.", "context_overflow"],
    [400, "prompt is too long: 208310 tokens > 200000 maximum (invalid_request_error)", "context_overflow"],
    [413, "Request exceeds the maximum size (request_too_large)", "context_overflow"],
    [400, "the request exceeds the available context size, try increasing it (exceed_context_size_error)", "context_overflow"], // llama.cpp
    [400, "Input is too long for requested model.", "context_overflow"],
    [400, "", "context_overflow"], // a bare 400 from a gateway
    [413, "", "context_overflow"],
    [400, "Invalid value for 'tools[0].function.name'", "permanent"],
    [403, "Your organization does not have access to this model", "permanent"],
    [404, "The model `gpt-9` does not exist", "permanent"],
    [500, "The server had an error while processing your request.", "transient"],
    [529, "Overloaded", "transient"],
    [undefined, "fetch failed", "transient"],
    [undefined, "maximum context length is 8192 tokens", "context_overflow"],
  ] as const)("HTTP %s %j → %s", (status, message, kind) => {
    expect(classify(status, message)).toBe(kind);
  });

  it("rate-limit wording that mentions tokens is not an overflow", () => {
    expect(isOverflowMessage("Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 45000.")).toBe(false);
    expect(isOverflowMessage("too many tokens; rate limit exceeded")).toBe(false);
  });

  it("anthropic error types", () => {
    expect(anthropicErrorKind("authentication_error", "invalid x-api-key")).toBe("auth_expired");
    expect(anthropicErrorKind("rate_limit_error", "slow down")).toBe("rate_limited");
    expect(anthropicErrorKind("overloaded_error", "Overloaded")).toBe("transient");
    expect(anthropicErrorKind("invalid_request_error", "prompt is too long: 1 > 0")).toBe("context_overflow");
    expect(anthropicErrorKind("invalid_request_error", "tools.0.name: String should match pattern")).toBe("permanent");
    expect(anthropicErrorKind("billing_error", "credit balance too low")).toBe("permanent");
  });
});

describe("retryDelay", () => {
  const h = (init: Record<string, string>) => new Headers(init);
  const half = () => 0.5;

  it("honours retry-after-ms, retry-after seconds and an HTTP date", () => {
    expect(retryDelay(h({ "retry-after-ms": "250" }), 1, DEFAULT_LIMITS, half, 0)).toBe(250);
    expect(retryDelay(h({ "retry-after": "2" }), 1, DEFAULT_LIMITS, half, 0)).toBe(2_000);
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(retryDelay(h({ "retry-after": "Thu, 01 Jan 2026 00:00:03 GMT" }), 1, DEFAULT_LIMITS, half, now)).toBe(3_000);
  });

  it("does not wait out a retry-after beyond the bound", () => {
    expect(
      retryDelay(h({ "retry-after": String(DEFAULT_LIMITS.max_retry_after_ms / 1000 + 1) }), 1, DEFAULT_LIMITS, half, 0),
    ).toBeUndefined();
  });

  it("otherwise backs off exponentially with 50–100 % jitter, capped", () => {
    const lo = () => 0;
    const hi = () => 1;
    expect(retryDelay(h({}), 1, DEFAULT_LIMITS, lo, 0)).toBe(DEFAULT_LIMITS.retry_base_delay_ms / 2);
    expect(retryDelay(h({}), 1, DEFAULT_LIMITS, hi, 0)).toBe(DEFAULT_LIMITS.retry_base_delay_ms);
    expect(retryDelay(h({}), 2, DEFAULT_LIMITS, hi, 0)).toBe(DEFAULT_LIMITS.retry_base_delay_ms * 2);
    expect(retryDelay(h({}), 30, DEFAULT_LIMITS, hi, 0)).toBe(DEFAULT_LIMITS.retry_max_delay_ms);
  });
});
