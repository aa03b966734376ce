// Typed calls to the engine's built-ins the console reads (protocol's BUILTINS shapes), with
// paging followed to the end where a listing has pages.
import type { BuiltinOutput, FunctionDetail, FunctionSummary, RegisteredTriggerEntry } from "@iii-edge/protocol";
import type { BrowserClient } from "@iii-edge/sdk-browser";

/** Pages a listing is followed for (1000 entries each): a console shows at most this many. */
export const MAX_LIST_PAGES = 10;

/** Every entry of an `engine::*::list` listing (`{<key>: [...], next_offset?}`). */
export async function listAll<T>(
  iii: BrowserClient,
  function_id: string,
  key: string,
  payload: Record<string, unknown> = {},
): Promise<T[]> {
  const out: T[] = [];
  let offset: number | undefined = 0;
  for (let i = 0; i < MAX_LIST_PAGES && offset !== undefined; i++) {
    const page: Record<string, unknown> & { next_offset?: number } = await iii.trigger({ function_id, payload: { ...payload, offset } });
    out.push(...((page[key] as T[] | undefined) ?? []));
    offset = page.next_offset;
  }
  return out;
}

// The rows of the listings, as the built-ins' contracts (protocol's BUILTINS) describe them.
export type WorkerEntry = BuiltinOutput<"engine::workers::list">["workers"][number];
export type FunctionEntry = FunctionSummary;
export type { FunctionDetail };
export type TriggerTypeEntry = BuiltinOutput<"engine::triggers::list">["triggers"][number];
export type BindingEntry = RegisteredTriggerEntry;
export type CronJob = BuiltinOutput<"engine::cron::jobs">["jobs"][number];

export const isInternal = (f: FunctionEntry) => f.function_id.startsWith("engine::") || f.metadata?.internal === true;
