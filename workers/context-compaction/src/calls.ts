// How the worker reaches the engine and the other workers: by function id, with a deadline on
// every call, and how a failed call is read.
import type { TriggerRequest } from "@iii-edge/sdk-edge/client";
import { errorCode, errorText } from "@iii-edge/protocol";

/** `ctx.trigger` inside a handler (keeps the caller's trace), `iii.trigger` outside one. */
export type Trigger = <TInput = unknown, TOutput = unknown>(request: TriggerRequest<TInput>) => Promise<TOutput>;

/** Session-storage and state round trips: small local reads and writes. */
export const STORAGE_TIMEOUT_MS = 30_000;

export { errorCode, errorText };

export const call = <T>(trigger: Trigger, function_id: string, payload: unknown, timeoutMs = STORAGE_TIMEOUT_MS): Promise<T> =>
  trigger<unknown, T>({ function_id, payload, timeoutMs });
