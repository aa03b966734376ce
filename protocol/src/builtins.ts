// Payloads of the engine's built-in functions and trigger types (wire-protocol.md §6–§8).
import { z } from "zod";
import { jsonBytes } from "./frames.ts";
import { MAX_LIST_PAGE, MAX_WORKER_INFO_BYTES } from "./limits.ts";

const scopeName = z.string().min(1).max(512);
const keyName = z.string().min(1).max(1024);

export const stateSetInput = z
  .object({ scope: scopeName, key: keyName, value: z.unknown().optional(), data: z.unknown().optional() })
  .refine((v) => v.value !== undefined || v.data !== undefined, { message: "value is required" });
export const stateKeyInput = z.object({ scope: scopeName, key: keyName });
export const stateScopeInput = z.object({ scope: scopeName });

/** Paging of a listing (iii-edge extension): `offset` entries skipped, at most `limit` returned
 * (1…MAX_LIST_PAGE). Pages are in the listing's order (state: by key; engine lists: by id). */
const paging = {
  limit: z.number().int().min(1).max(MAX_LIST_PAGE).optional(),
  offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
};
export type Paging = { limit?: number; offset?: number };
/** `state::list`: the spec's `{scope}`; with `limit`/`offset` one page of the scope's values. */
export const stateListInput = z.object({ scope: scopeName, ...paging });
export const stateListGroupsInput = z.object({ ...paging }).default({});

const path = z.string().max(256);
const mergePath = z.union([z.string().max(256), z.array(z.string().max(256)).max(32)]);
export const updateOp = z.discriminatedUnion("type", [
  z.object({ type: z.literal("set"), path: path.default(""), value: z.unknown() }),
  z.object({ type: z.literal("increment"), path, by: z.number().int().default(1) }),
  z.object({ type: z.literal("decrement"), path, by: z.number().int().default(1) }),
  z.object({ type: z.literal("remove"), path }),
  z.object({ type: z.literal("merge"), path: mergePath.optional(), value: z.unknown() }),
  z.object({ type: z.literal("append"), path: mergePath.optional(), value: z.unknown() }),
]);
export type UpdateOp = z.infer<typeof updateOp>;
export const stateUpdateInput = z.object({ scope: scopeName, key: keyName, ops: z.array(updateOp).max(1024) });

export const functionsListInput = z
  .object({
    search: z.string().optional(),
    prefix: z.string().optional(),
    worker: z.string().optional(),
    workers: z.array(z.string()).optional(),
    include_internal: z.boolean().optional(),
    ...paging,
  })
  .default({});
export const functionsInfoInput = z.union([
  z.object({ function_id: z.string().min(1) }),
  z.object({ function_ids: z.array(z.string().min(1)).min(1).max(32) }),
]);
export const workersRegisterInput = z
  .object({
    runtime: z.string().nullish(),
    version: z.string().nullish(),
    name: z.string().nullish(),
    description: z.string().nullish(),
    os: z.string().nullish(),
    pid: z.number().nullish(),
    isolation: z.string().nullish(),
    telemetry: z.record(z.string(), z.unknown()).nullish(),
    metadata: z.record(z.string(), z.unknown()).nullish(),
  })
  .passthrough()
  // Everything it says is kept and listed for every connection: bounded as a whole.
  .superRefine((v, ctx) => {
    const size = jsonBytes(v);
    if (size > MAX_WORKER_INFO_BYTES) ctx.addIssue({ code: "custom", message: `worker info is ${Number.isFinite(size) ? `${size} bytes of JSON` : "nested too deeply"}, over the ${MAX_WORKER_INFO_BYTES}-byte limit` });
  });
export const workersListInput = z.object({ search: z.string().optional(), runtime: z.string().optional(), ...paging }).default({});
export const registeredTriggersListInput = z
  .object({
    search: z.string().optional(),
    trigger_type: z.string().optional(),
    function_id: z.string().optional(),
    worker: z.string().optional(),
    include_internal: z.boolean().optional(),
    ...paging,
  })
  .default({});
export const triggersListInput = z
  .object({ search: z.string().optional(), prefix: z.string().optional(), include_internal: z.boolean().optional(), ...paging })
  .default({});

/** `state` trigger config and payload (§8.3). */
export const stateTriggerConfig = z
  .object({ scope: z.string().optional(), key: z.string().optional(), condition_function_id: z.string().optional() })
  .nullish();
export type StateEventType = "state:created" | "state:updated" | "state:deleted";
export interface StateTriggerPayload {
  type: "state";
  event_type: StateEventType;
  scope: string;
  key: string;
  old_value: unknown;
  new_value: unknown;
}

export interface FunctionSummary {
  function_id: string;
  worker_name: string;
  description?: string;
  metadata?: Record<string, unknown>;
}
export interface FunctionsChangedPayload {
  event: "functions_changed";
  functions: FunctionSummary[];
}
export interface WorkersChangedPayload {
  event: "worker_connected" | "worker_disconnected" | "worker_metadata_updated";
  worker_id: string;
}

/** Names of the engine's trigger types. */
export const TRIGGER_TYPES = {
  state: "state",
  functionsAvailable: "engine::functions-available",
  workersAvailable: "engine::workers-available",
  http: "http",
  cron: "cron",
  subscribe: "subscribe",
  durableSubscriber: "durable:subscriber",
  stream: "stream",
  streamJoin: "stream:join",
  streamLeave: "stream:leave",
  queue: "queue",
} as const;

/** Channels (§10): a `StreamChannelRef` and `engine::channels::create`'s input. */
export const CHANNEL_DIRECTIONS = ["read", "write"] as const;
export type ChannelDirection = (typeof CHANNEL_DIRECTIONS)[number];
export const streamChannelRef = z.object({ channel_id: z.string().min(1).max(128), access_key: z.string().min(1).max(256), direction: z.enum(CHANNEL_DIRECTIONS) });
export type StreamChannelRef = z.infer<typeof streamChannelRef>;
/** `buffer_size`: items a channel holds while its reader is not attached (engine default 64, most 1024). */
export const channelsCreateInput = z.object({ buffer_size: z.number().int().min(1).max(1024).nullish() });
