// The closed set of error codes iii-edge puts on the wire (docs/engineering.md Style §3), in one
// casing: lower snake_case. The iii codes come first (iii's reference engine spells a few of them in
// upper case — FORBIDDEN, NOT_FOUND, INVALID_ARGUMENTS, VALUE_TOO_LARGE, *_ERROR — iii-sdk compares
// none of them); iii-edge additions follow. The engine writes only these (tests/unit/error-codes.test.ts);
// anything else thrown is normalised once into an ErrorBody by `toErrorBody`, keeping its cause.
// (A worker's own error codes, relayed from its invocationresult, are its contract and pass as sent.)
import type { ErrorBody } from "./frames.ts";

export const ERROR_CODES = [
  // iii (protocol/README.md §4.9)
  "function_not_found",
  "invocation_failed",
  "function_not_invokable",
  "invocation_stopped",
  "invocation_error",
  "channel_send_failed",
  "enqueue_error",
  "forbidden",
  "deserialization_error",
  "serialization_error",
  "trigger_registration_failed",
  "trigger_type_not_found",
  "timeout",
  "not_found",
  "invalid_arguments",
  "value_too_large",
  "set_error",
  "get_error",
  "delete_error",
  "update_error",
  "list_error",
  "topic_not_set",
  "url_validation_failed",
  "http_request_failed",
  "http_response_failed",
  "invalid_response",
  "http_error",
  // iii-edge
  "invalid_frame",
  "frame_too_large",
  "rate_limited",
  "invalid_input",
  "not_connected",
  "queue_not_found",
  "unauthorized",
  "result_too_large",
  "too_many_calls",
  "too_many_connections",
  "middleware_timeout",
  "condition_not_met",
  "stream_set_error",
  "stream_update_error",
  "channel_limit",
  "state_conflict",
  "quota_exceeded",
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** An error that knows its wire code. Throw it from a handler or built-in to choose the code. */
export class IIIError extends Error {
  /** One of ERROR_CODES when the engine throws it; as sent for `relayed` errors. */
  readonly code: ErrorCode | (string & {});
  /** A worker's handler may choose its own code (its contract with its callers); the engine writes
   * only codes of ERROR_CODES (tests/unit/error-codes.test.ts checks every one it writes). */
  constructor(code: ErrorCode | (string & {}), message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "IIIError";
    this.code = code;
  }
  toBody(): ErrorBody {
    return { code: this.code, message: this.message };
  }
  /** An error that arrived over the wire (a worker's, or the engine's seen from a client): its
   * code passes as sent, outside the closed set if the sender chose so. */
  static relayed(body: ErrorBody, options?: { cause?: unknown }): IIIError {
    const e = new IIIError("invocation_failed", body.message, options);
    (e as { code: string }).code = body.code;
    return e;
  }
}

/**
 * Normalise anything thrown into an ErrorBody. An object with a string `code` keeps it (so
 * `IIIError`, sandbox errors and remote errors pass through); everything else becomes `fallback`.
 */
export function toErrorBody(thrown: unknown, fallback: ErrorCode = "invocation_failed"): ErrorBody {
  if (thrown instanceof Error) {
    const own = (thrown as unknown as { code?: unknown }).code;
    const code = typeof own === "string" ? own : fallback;
    const body: ErrorBody = { code, message: thrown.message };
    if (thrown.stack && !(thrown instanceof IIIError)) body.stacktrace = thrown.stack;
    return body;
  }
  if (thrown && typeof thrown === "object" && typeof (thrown as ErrorBody).code === "string") {
    const t = thrown as ErrorBody;
    return { code: t.code, message: String(t.message ?? t.code) };
  }
  return { code: fallback, message: String(thrown) };
}
