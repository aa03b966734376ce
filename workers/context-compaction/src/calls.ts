import { errorCode, errorText } from "@iii-edge/protocol";
import type { Trigger } from "@iii-edge/sdk-edge/worker";

/** `ctx.trigger` inside a handler (keeps the caller's trace), `iii.trigger` outside one. */
export type { Trigger };

/** Session-storage and state round trips: small local reads and writes. */
export const STORAGE_TIMEOUT_MS = 30_000;

export { errorCode, errorText };

export const call = <T>(trigger: Trigger, function_id: string, payload: unknown, timeoutMs = STORAGE_TIMEOUT_MS): Promise<T> =>
  trigger<unknown, T>({ function_id, payload, timeoutMs });
