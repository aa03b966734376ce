// The closed sets of error codes iii-edge puts on the wire (docs/engineering.md Style §3), in one
// casing: lower snake_case. ERROR_CODES is the engine's and the SDKs': iii's codes first (iii's
// reference engine spells a few of them in upper case — FORBIDDEN, NOT_FOUND, INVALID_ARGUMENTS,
// VALUE_TOO_LARGE, *_ERROR — iii-sdk compares none of them), then iii-edge's. HARNESS_ERROR_CODES are
// the agent harness workers' contract with their callers. `IIIError` takes only these, checked by
// the type; a code that arrived from another worker's invocationresult is that worker's contract and
// passes as sent, as a `RelayedCode` (IIIError.relayed). Anything else thrown is normalised once into
// an ErrorBody by `toErrorBody`, keeping its cause.
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
  // A stored state value that its reader's schema refuses (the worker kit's readState/casState).
  "invalid_state",
  "quota_exceeded",
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** The harness workers' own codes (workers/*): what a turn, a session, a budget or a sandbox may
 * refuse with, beyond the engine's set. */
export const HARNESS_ERROR_CODES = [
  "already_exists",
  "budget_busy",
  "budget_exhausted",
  "budget_unreadable",
  "child_not_found",
  "child_session_busy",
  "credential_unreadable",
  "depth_exceeded",
  "leaf_conflict",
  "not_configured",
  "parent_not_running",
  "policy_unavailable",
  "resume_failed",
  "sandbox_unavailable",
  "session_exists",
  "session_full",
  "summary_failed",
  "tokenizer_unavailable",
  "too_many_alerts",
  "too_many_children",
  "too_many_exemptions",
  "too_many_holds",
  "too_many_waiters",
  "turn_not_found",
  "turn_running",
] as const;
export type HarnessErrorCode = (typeof HARNESS_ERROR_CODES)[number];

/** A code this process did not choose: it arrived in another party's error body and is passed on
 * as sent. Only `IIIError.relayed` and `relayedCode` make one. */
export type RelayedCode = string & { readonly relayedCode: unique symbol };

/** Mark a code read off the wire as relayed (not checked against the closed sets). */
export function relayedCode(code: string): RelayedCode {
  return code as RelayedCode;
}

/** An error that knows its wire code. Throw it from a handler or built-in to choose the code. */
export class IIIError extends Error {
  readonly code: ErrorCode | HarnessErrorCode | RelayedCode;
  constructor(code: ErrorCode | HarnessErrorCode | RelayedCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "IIIError";
    this.code = code;
  }
  toBody(): ErrorBody {
    return toErrorBody(this);
  }
  /** An error that arrived over the wire (a worker's, or the engine's seen from a client): its
   * code passes as sent, outside the closed sets if the sender chose so. */
  static relayed(body: ErrorBody, options?: { cause?: unknown }): IIIError {
    return new IIIError(relayedCode(body.code), body.message, options);
  }
  /** A worker's own code (`card_declined`): its contract with its callers, outside the engine's
   * sets on purpose. `new IIIError` takes only the closed sets, so a typo there is a type error. */
  static custom(code: string, message: string, options?: { cause?: unknown }): IIIError {
    return new IIIError(relayedCode(code), message, options);
  }
}

/** How deep a chain of causes is followed into a message: enough for "the call failed because the
 * store refused because …", bounded so a cyclic cause cannot loop. */
const MAX_CAUSE_DEPTH = 4;

/** "message (cause: inner message (cause: …))": what each cause said, so a caller reading the
 * body learns why, not only what. */
function withCauses(e: Error): string {
  let text = e.message;
  let cause: unknown = e.cause;
  for (let depth = 0; cause !== undefined && cause !== null && depth < MAX_CAUSE_DEPTH; depth++) {
    const said = cause instanceof Error ? cause.message : typeof cause === "string" ? cause : JSON.stringify(cause);
    if (said && !text.includes(said)) text += ` (cause: ${said})`;
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return text;
}

/**
 * Normalise anything thrown into an ErrorBody. An object with a string `code` keeps it (so
 * `IIIError`, sandbox errors and remote errors pass through); everything else becomes `fallback`.
 * The message keeps what the error's causes said.
 */
export function toErrorBody(thrown: unknown, fallback: ErrorCode = "invocation_failed"): ErrorBody {
  if (thrown instanceof Error) {
    const own = (thrown as unknown as { code?: unknown }).code;
    const code = typeof own === "string" ? own : fallback;
    const body: ErrorBody = { code, message: withCauses(thrown) };
    if (thrown.stack && !(thrown instanceof IIIError)) body.stacktrace = thrown.stack;
    return body;
  }
  if (thrown && typeof thrown === "object" && typeof (thrown as ErrorBody).code === "string") {
    const t = thrown as ErrorBody;
    return { code: t.code, message: String(t.message ?? t.code) };
  }
  return { code: fallback, message: String(thrown) };
}

/** How much of an error's text is kept where it is recorded or shown (a turn's event, a log): a
 * stack or a provider's HTML error page is not a message. */
export const MAX_ERROR_TEXT = 2_000;

/** The wire code of a failed call or thrown error, if it has one. */
export function errorCode(e: unknown): string | undefined {
  const code = e && typeof e === "object" ? (e as { code?: unknown }).code : undefined;
  return typeof code === "string" ? code : undefined;
}

/** What a failed call or thrown error says, bounded to `max` characters. */
export function errorText(e: unknown, max = MAX_ERROR_TEXT): string {
  const msg = e instanceof Error ? e.message : typeof e === "string" ? e : JSON.stringify(e);
  return (msg ?? String(e)).slice(0, max);
}
