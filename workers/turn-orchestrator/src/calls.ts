// How the orchestrator reaches everything else: by function id, through the engine, with a
// deadline on every call; and how a failed call is read (its wire code).
import { IIIError, errorCode, errorText } from "@iii-edge/protocol";
import { STORAGE_TIMEOUT_MS } from "./constants.ts";
import type { Trigger } from "@iii-edge/sdk-edge/worker";

/** `ctx.trigger` inside a handler (keeps the caller's trace), `iii.trigger` outside one. */
export type { Trigger };

/** Something a step cannot finish now but may on a retry (storage unreachable, a dependency not
 * registered again yet after a restart): rethrown so the queue's retry/backoff applies and the
 * session is not failed (§2.4). Subclasses (e.g. a compaction lease held elsewhere) count too. */
export class TransientError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TransientError";
  }
}

export { errorCode, errorText };

/** Codes that say "the call did not get through, or its answer got lost" rather than "it answered
 * with an error": the engine or the socket, not the callee. */
const TRANSPORT_CODES = new Set([
  "invocation_stopped",
  "not_connected",
  "channel_send_failed",
  "invocation_error",
  "too_many_calls",
  "rate_limited",
  "timeout",
]);
export const isTransportFailure = (e: unknown): boolean => TRANSPORT_CODES.has(errorCode(e) ?? "");

/**
 * A call to infrastructure the step cannot do without (session storage, state, inboxes): a
 * transport failure or a missing function (its worker reconnecting after a restart) is transient;
 * anything else is a real error.
 */
export async function callRequired<T>(trigger: Trigger, function_id: string, payload: unknown, timeoutMs = STORAGE_TIMEOUT_MS): Promise<T> {
  try {
    return await trigger<unknown, T>({ function_id, payload, timeoutMs });
  } catch (e) {
    if (isTransportFailure(e) || errorCode(e) === "function_not_found")
      throw new TransientError(`${function_id}: ${errorText(e)}`, { cause: e });
    throw e;
  }
}

/** `trigger` failing as callRequired does, for the kit's helpers that take a trigger. */
export const requiredTrigger = (trigger: Trigger): Trigger =>
  ((req: Parameters<Trigger>[0]) => callRequired(trigger, req.function_id, req.payload, req.timeoutMs)) as Trigger;

/** A call whose failure is logged and forgotten (events, best-effort cleanup). */
export async function callBestEffort(
  trigger: Trigger,
  function_id: string,
  payload: unknown,
  timeoutMs = STORAGE_TIMEOUT_MS,
): Promise<unknown> {
  try {
    return await trigger({ function_id, payload, timeoutMs });
  } catch (e) {
    console.warn(`turn-orchestrator: ${function_id} failed (ignored): ${errorText(e)}`);
    return undefined;
  }
}

/** A typed error for bad input (nothing changes). */
export const invalid = (message: string): IIIError => new IIIError("invalid_input", message);
