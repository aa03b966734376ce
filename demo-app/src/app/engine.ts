// Typed calls to the engine's built-ins the console reads (protocol's BUILTINS shapes), with
// paging followed to the end where a listing has pages.
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

export interface WorkerEntry {
  id: string;
  name: string;
  runtime: string | null;
  version: string | null;
  os: string | null;
  description: string | null;
  metadata: Record<string, unknown> | null;
  function_count: number;
  connected_at_ms: number;
  active_invocations: number;
}

export interface FunctionEntry {
  function_id: string;
  worker_name: string;
  description?: string;
  metadata?: Record<string, unknown>;
}

export interface FunctionDetail extends FunctionEntry {
  kind?: string;
  request_schema?: unknown;
  response_schema?: unknown;
  registered_triggers: { id: string; trigger_type: string; config: unknown; status: string }[];
}

export interface TriggerTypeEntry {
  id: string;
  worker_name: string;
  description: string;
}

export interface BindingEntry {
  id: string;
  trigger_type: string;
  function_id: string;
  worker_name: string;
  config: unknown;
  config_summary: string;
  status: "active" | "parked";
}

export interface CronJob {
  job_id: string;
  expression: string;
  next_time: string | null;
  last_scheduled_time: string | null;
  running: boolean;
  runs: number;
  skipped: number;
}

export const isInternal = (f: FunctionEntry) => f.function_id.startsWith("engine::") || f.metadata?.internal === true;
