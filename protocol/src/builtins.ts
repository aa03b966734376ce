// Payloads of the engine's built-in functions and trigger types (wire-protocol.md §6–§8).
import { z } from "zod";

const scopeName = z.string().min(1).max(512);
const keyName = z.string().min(1).max(1024);

export const stateSetInput = z
  .object({ scope: scopeName, key: keyName, value: z.unknown().optional(), data: z.unknown().optional() })
  .refine((v) => v.value !== undefined || v.data !== undefined, { message: "value is required" });
export const stateKeyInput = z.object({ scope: scopeName, key: keyName });
export const stateScopeInput = z.object({ scope: scopeName });

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
  .passthrough();
export const registeredTriggersListInput = z
  .object({
    search: z.string().optional(),
    trigger_type: z.string().optional(),
    function_id: z.string().optional(),
    worker: z.string().optional(),
    include_internal: z.boolean().optional(),
  })
  .default({});
export const triggersListInput = z
  .object({ search: z.string().optional(), prefix: z.string().optional(), include_internal: z.boolean().optional() })
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
