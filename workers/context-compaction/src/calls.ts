// How the worker reaches the engine and the other workers: by function id, with a deadline on
// every call, and how a failed call is read.
import type { TriggerRequest } from "@iii-edge/sdk-edge/client";

/** `ctx.trigger` inside a handler (keeps the caller's trace), `iii.trigger` outside one. */
export type Trigger = <TInput = unknown, TOutput = unknown>(request: TriggerRequest<TInput>) => Promise<TOutput>;

/** Session-storage and state round trips: small local reads and writes. */
export const STORAGE_TIMEOUT_MS = 30_000;

export function errorCode(e: unknown): string | undefined {
  const code = e && typeof e === "object" ? (e as { code?: unknown }).code : undefined;
  return typeof code === "string" ? code : undefined;
}

export function errorText(e: unknown): string {
  const msg = e instanceof Error ? e.message : typeof e === "string" ? e : JSON.stringify(e);
  return (msg ?? String(e)).slice(0, 2_000);
}

export const call = <T>(trigger: Trigger, function_id: string, payload: unknown, timeoutMs = STORAGE_TIMEOUT_MS): Promise<T> => trigger<unknown, T>({ function_id, payload, timeoutMs });
