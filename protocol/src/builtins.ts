// The engine's built-in functions and trigger types (protocol/README.md §6–§8): every built-in's
// input and output schema, and `BUILTINS`, the catalogue by function id. The engine parses a
// built-in's input with its schema, and the `request_format` / `response_format` that
// engine::functions::info publishes are derived from the same schemas (`builtinFormats`).
import { z } from "zod";
import { jsonBytes } from "./frames.ts";
import { MAX_LIST_PAGE, MAX_STREAM_SET_MANY_ITEMS, MAX_WORKER_INFO_BYTES } from "./limits.ts";
import { streamName } from "./streams.ts";
import * as telemetry from "./telemetry.ts";

const scopeName = z.string().min(1).max(512);
const keyName = z.string().min(1).max(1024);
const count = z.number().int().min(0);
const jsonObject = z.record(z.string(), z.unknown());
/** A built-in that takes no input: whatever is sent is ignored. */
const noInput = z.unknown();
/** A built-in that answers nothing (the `invocationresult` has no `result`). */
const noResult = z.undefined().describe("no result");

/** Paging of a listing (iii-edge extension): `offset` entries skipped, at most `limit` returned
 * (1…MAX_LIST_PAGE). Pages are in the listing's order (state: by key; engine lists: by id). */
const paging = {
  limit: z.number().int().min(1).max(MAX_LIST_PAGE).optional(),
  offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
};
export type Paging = { limit?: number; offset?: number };
/** Beside a page's array: entries in the whole (filtered) listing, and where the next page starts
 * (absent on the last page). */
const pageOutput = { total: count, next_offset: count.optional() };

// ---------------------------------------------------------------- state::* (§7.2)

/**
 * `enqueue` of state::set / state::update (iii-edge): one queue message stored in the same
 * transaction as the write, and only when the write happens (a failed `expected` enqueues
 * nothing). `queue` must be a durable-backend queue; `payload` is the message's `data`;
 * `idempotency_key` as the enqueue action's (a repeat within 24 h stores nothing and answers the
 * first receipt). The caller must be allowed to call `function_id`.
 */
export const stateEnqueue = z.object({
  function_id: z.string().min(1).max(512),
  payload: z.unknown().optional(),
  queue: z.string().min(1).max(256),
  idempotency_key: z.string().min(1).max(256).optional(),
});
export type StateEnqueue = z.infer<typeof stateEnqueue>;
export const stateSetInput = z
  .object({ scope: scopeName, key: keyName, value: z.unknown().optional(), data: z.unknown().optional(), enqueue: stateEnqueue.optional() })
  .refine((v) => v.value !== undefined || v.data !== undefined, { message: "value is required" });
export const stateKeyInput = z.object({ scope: scopeName, key: keyName });
/** `state::list`: iii's `{scope}`; with `limit`/`offset` one page of the scope's values. */
export const stateListInput = z.object({ scope: scopeName, ...paging });
export const stateListGroupsInput = z.object({ ...paging }).default({});

const path = z.string().max(256);
const mergePath = z.union([z.string().max(256), z.array(z.string().max(256)).max(32)]);
export const updateOp = z.discriminatedUnion("type", [
  z.object({ type: z.literal("set"), path: path.default(""), value: z.unknown() }),
  // Any finite number: counters of money in micro-units and of time in fractions both occur.
  z.object({ type: z.literal("increment"), path, by: z.number().finite().default(1) }),
  z.object({ type: z.literal("decrement"), path, by: z.number().finite().default(1) }),
  z.object({ type: z.literal("remove"), path }),
  z.object({ type: z.literal("merge"), path: mergePath.optional(), value: z.unknown() }),
  z.object({ type: z.literal("append"), path: mergePath.optional(), value: z.unknown() }),
]);
export type UpdateOp = z.infer<typeof updateOp>;
export const stateUpdateInput = z.object({
  scope: scopeName,
  key: keyName,
  ops: z.array(updateOp).max(1024),
  /** Compare-and-set (iii-edge): apply the ops only if the current value equals this (JSON equality,
   * key order ignored; `null` = absent or null). Otherwise `state_conflict`, nothing written. */
  expected: z.unknown().optional(),
  /** A queue message stored with the write (see `stateEnqueue`). */
  enqueue: stateEnqueue.optional(),
});

/** A stored value, or nothing (absent key). */
const storedValue = z.unknown();
/** A write's answer: the value before (null when there was none) and after. */
export const valueChange = z.object({ old_value: z.unknown(), new_value: z.unknown() });
/** An update's answer: per-op errors for ops that were skipped (the others still applied). */
export const updateOutput = valueChange.extend({
  errors: z.array(z.object({ op_index: count, code: z.string(), message: z.string() })).optional(),
});
export type UpdateOutput = z.infer<typeof updateOutput>;
/** With `enqueue`: the receipt of the message stored with the write (the first one's for a
 * repeated idempotency key). */
const enqueuedReceipt = { messageReceiptId: z.string().optional() };
export const stateSetOutput = valueChange.extend(enqueuedReceipt);
export type StateSetOutput = z.infer<typeof stateSetOutput>;
export const stateUpdateOutput = updateOutput.extend(enqueuedReceipt);
export type StateUpdateOutput = z.infer<typeof stateUpdateOutput>;
export const stateListGroupsOutput = z.object({ groups: z.array(z.string()), ...pageOutput });
export const stateListKeysInput = z.object({ scope: scopeName, ...paging });
export const stateListKeysOutput = z.object({ keys: z.array(z.string()), ...pageOutput });

// ---------------------------------------------------------------- engine::* (§7.1, §6)

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
    if (size > MAX_WORKER_INFO_BYTES)
      ctx.addIssue({
        code: "custom",
        message: `worker info is ${Number.isFinite(size) ? `${size} bytes of JSON` : "nested too deeply"}, over the ${MAX_WORKER_INFO_BYTES}-byte limit`,
      });
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
export const registerTriggerInput = z.object({
  trigger_type: z.string().min(1),
  function_id: z.string().min(1),
  config: z.unknown().optional(),
  metadata: z.unknown().optional(),
  id: z.string().min(1).optional(),
});
export const unregisterTriggerInput = z.object({ id: z.string().min(1) });

// ---------------------------------------------------------------- who may call a function, who serves it

/**
 * The registration metadata key that says whether a model may call a function. `{"model": "never"}`
 * marks it as the harness's or the engine's own machinery (the kernel): the policy refuses a model's
 * call to it before any rule of the permissions file is read. The mark only ever takes rights away,
 * so any registrant may set it; the harness's workers set it on their own functions where they are
 * registered (the worker kit's `kernel` flag), and the engine on its built-ins below.
 */
export const MODEL_METADATA_KEY = "model";
export const MODEL_NEVER = "never";

/** The engine's built-ins a model may call: reads only, and the state and stream reads among them
 * are limited by the policy to the scopes the calling session owns. Every other built-in writes,
 * wires or reaches across sessions (state writes, publish, queues, channels, bindings, traces) and
 * is marked `model: "never"`: a built-in added later is the kernel's until it is listed here. */
export const MODEL_CALLABLE_BUILTINS: ReadonlySet<string> = new Set([
  "engine::functions::list",
  "engine::functions::info",
  "engine::triggers::list",
  "state::get",
  "state::list",
  "state::list_keys",
  "stream::get",
  "stream::list",
  "stream::list_items",
]);

/** Is a function with this registration metadata closed to models? */
export function isModelNever(metadata: unknown): boolean {
  return (
    typeof metadata === "object" &&
    metadata !== null &&
    !Array.isArray(metadata) &&
    (metadata as Record<string, unknown>)[MODEL_METADATA_KEY] === MODEL_NEVER
  );
}

/** `served_by` of a built-in: the engine itself. */
export const SERVED_BY_ENGINE = "engine";
/** `served_by` of a function hosted by the deployed Worker (a service binding the deployment
 * configured): only whoever deploys can put a function there. */
export const SERVED_BY_DEPLOYMENT = "deployment";

export const functionSummary = z.object({
  function_id: z.string(),
  worker_name: z.string(),
  description: z.string().optional(),
  metadata: jsonObject.optional(),
});
export type FunctionSummary = z.infer<typeof functionSummary>;
const triggerStatus = z.enum(["active", "parked"]);
/** One function in engine::functions::info: its formats, and the bindings that call it. */
export const functionDetail = z.object({
  function_id: z.string(),
  worker_name: z.string(),
  /** Absent for built-ins. */
  kind: z.enum(["worker", "edge", "http"]).optional(),
  description: z.string().optional(),
  request_schema: z.unknown().optional(),
  response_schema: z.unknown().optional(),
  metadata: jsonObject.optional(),
  /** Who serves it: "engine" (a built-in), "deployment" (the deployed Worker's service bindings), or
   * the principal (the token's `sub`; "anonymous" on the open local engine) of the connection that
   * registered it. The policy trusts an auto-allowed id only from the server it names. */
  served_by: z.string().optional(),
  registered_triggers: z.array(z.object({ id: z.string(), trigger_type: z.string(), config: z.unknown(), status: triggerStatus })),
});
export type FunctionDetail = z.infer<typeof functionDetail>;
export const functionsInfoOutput = z.union([
  functionDetail,
  z.object({ functions: z.array(z.union([functionDetail, z.object({ function_id: z.string(), error: z.literal("not_found") })])) }),
]);
const reported = z.string().nullable();
export const workerEntry = z.object({
  id: z.string(),
  name: z.string(),
  description: reported,
  version: reported,
  runtime: reported,
  os: reported,
  pid: z.number().nullable(),
  isolation: reported,
  metadata: jsonObject.nullable(),
  status: z.literal("connected"),
  function_count: count,
  connected_at_ms: z.number(),
  active_invocations: count,
});
export const triggerTypeEntry = z.object({ id: z.string(), worker_name: z.string(), description: z.string() });
export const registeredTriggerEntry = z.object({
  id: z.string(),
  trigger_type: z.string(),
  function_id: z.string(),
  worker_name: z.string(),
  config: z.unknown(),
  config_summary: z.string(),
  status: triggerStatus,
  /** Who made it: the principal (`sub`) of the engine::register_trigger caller or of the registering
   * connection; null for an edge host's manifest. */
  made_by: z.string().nullable().optional(),
  /** Whether it outlives its maker's connections (a connection's own binding never does). */
  durable: z.boolean().optional(),
});
export type RegisteredTriggerEntry = z.infer<typeof registeredTriggerEntry>;
export const cronJob = z.object({
  job_id: z.string(),
  expression: z.string(),
  /** RFC 3339, UTC. */
  next_time: z.string().nullable(),
  last_scheduled_time: z.string().nullable(),
  running: z.boolean(),
  runs: count,
  skipped: count,
});

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

export interface FunctionsChangedPayload {
  event: "functions_changed";
  functions: FunctionSummary[];
}
/** `engine::triggers-available`: the bindings as engine::registered-triggers::list lists them
 * (engine::* trigger types left out), or with config {delta: true} only what changed. */
export type TriggersChangedPayload =
  | { event: "triggers_changed"; triggers: RegisteredTriggerEntry[] }
  | { event: "triggers_changed"; added: RegisteredTriggerEntry[]; removed: string[] };
export interface WorkersChangedPayload {
  event: "worker_connected" | "worker_disconnected" | "worker_metadata_updated";
  worker_id: string;
}

/** Names of the engine's trigger types. */
export const TRIGGER_TYPES = {
  state: "state",
  functionsAvailable: "engine::functions-available",
  workersAvailable: "engine::workers-available",
  triggersAvailable: "engine::triggers-available",
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
export const streamChannelRef = z.object({
  channel_id: z.string().min(1).max(128),
  access_key: z.string().min(1).max(256),
  direction: z.enum(CHANNEL_DIRECTIONS),
});
export type StreamChannelRef = z.infer<typeof streamChannelRef>;
/** `buffer_size`: items a channel holds while its reader is not attached (engine default 64, most 1024). */
export const channelsCreateInput = z.object({ buffer_size: z.number().int().min(1).max(1024).nullish() });

/** Longest message engine::log::* writes: a log line, not a payload (the rest is cut). */
export const MAX_LOG_MESSAGE_CHARS = 4096;
/** engine::log::{info,warn,error,debug,trace}: a worker's log line, written to the engine's log
 * (iii-sdk's logger; iii's RBAC listener lets every connection call them). */
export const logInput = z.object({ message: z.string(), data: z.unknown().optional() }).passthrough();

// ---------------------------------------------------------------- stream::* (§7.3)

const streamItemKey = z.object({ stream_name: streamName, group_id: streamName, item_id: streamName });
export const streamSetInput = streamItemKey.extend({ data: z.unknown() });
export const streamItemInput = streamItemKey;
export const streamGroupInput = z.object({ stream_name: streamName, group_id: streamName });
export const streamInput = z.object({ stream_name: streamName });
export const streamSendInput = z.object({
  stream_name: streamName,
  group_id: streamName,
  id: streamName.optional(),
  type: z.string().min(1).max(256),
  data: z.unknown().optional(),
});
/** iii-edge: `stream::list_items` — a group's items with their ids, in item-id order, after a cursor
 * (the last item id seen), one page at a time: a follower that dropped resumes without a gap. */
export const streamListItemsInput = z.object({
  stream_name: streamName,
  group_id: streamName,
  after: streamName.optional(),
  limit: z.number().int().min(1).max(MAX_LIST_PAGE).optional(),
});
export const streamListItemsOutput = z.object({
  items: z.array(z.object({ item_id: z.string(), data: z.unknown() })),
  next: z.string().nullable(),
});
/** iii-edge: `stream::set_many` — items of one group stored in one transaction, in order, each as
 * `stream::set` stores it (the same pushes and `stream` trigger fires, in the same order). Answers
 * how many it stored: the old values a batch of sets would answer are not worth a frame of them. */
export const streamSetManyInput = z.object({
  stream_name: streamName,
  group_id: streamName,
  items: z.array(z.object({ item_id: streamName, data: z.unknown() })).max(MAX_STREAM_SET_MANY_ITEMS),
});
export const streamSetManyOutput = z.object({ count: z.number().int().nonnegative() });
export const streamUpdateInput = streamItemKey.extend({ ops: z.array(updateOp).max(1024) });

// ---------------------------------------------------------------- pub/sub (§7.4, §7.5)

export const publishInput = z.object({ topic: z.string().max(512).optional(), data: z.unknown().optional() });

// ---------------------------------------------------------------- queues (§7.1 "Queue worker")

/** Most dead letters one engine::queue::dlq_messages page returns. */
export const DLQ_PAGE_MAX = 1_000;
const queueName = z.string().min(1).max(256);
const messageId = z.string().min(1).max(256);
export const queueEnqueueInput = z.object({
  queue: queueName,
  function_id: z.string().min(1).max(512),
  data: z.unknown().optional(),
  idempotency_key: z.string().min(1).max(256).optional(),
});
export const queueTopicInput = z.object({ topic: queueName });
export const dlqMessagesInput = z.object({
  topic: queueName.optional(),
  queue: queueName.optional(),
  offset: z.number().int().min(0).default(0),
  limit: z.number().int().min(1).max(DLQ_PAGE_MAX).default(100),
});
export const queueInput = z.object({ queue: queueName });
export const queueMessageInput = z.object({ queue: queueName, message_id: messageId });

const queueBackend = z.enum(["cloudflare", "durable"]);
const queueType = z.enum(["standard", "fifo"]);
/** What an enqueue answers: the message's receipt (the invocation id of every attempt). */
export const enqueueReceipt = z.object({ messageReceiptId: z.string() });
export const queueConfigOutput = z.object({
  name: z.string(),
  backend: queueBackend,
  max_retries: count,
  backoff_ms: count,
  concurrency: count,
  type: queueType,
  message_group_field: z.string().optional(),
  timeout_ms: count,
});
export const deadLetterEntry = z.object({
  message_id: z.string(),
  id: z.string(),
  queue: z.string(),
  function_id: z.string(),
  data: z.unknown(),
  attempts: count,
  error: z.string(),
  enqueued_at: z.number(),
  failed_at: z.number(),
  traceparent: z.string().optional(),
});

// ---------------------------------------------------------------- the catalogue

const contract = <I extends z.ZodType, O extends z.ZodType>(input: I, output: O) => ({ input, output });

/** Every built-in function: the schema its input is parsed with, and the shape of its result. */
export const BUILTINS = {
  "engine::workers::register": contract(workersRegisterInput, z.object({ success: z.literal(true) })),
  "engine::functions::list": contract(functionsListInput, z.object({ functions: z.array(functionSummary), ...pageOutput })),
  "engine::functions::info": contract(functionsInfoInput, functionsInfoOutput),
  "engine::workers::list": contract(workersListInput, z.object({ workers: z.array(workerEntry), ...pageOutput })),
  "engine::triggers::list": contract(triggersListInput, z.object({ triggers: z.array(triggerTypeEntry), ...pageOutput })),
  "engine::registered-triggers::list": contract(
    registeredTriggersListInput,
    z.object({ registered_triggers: z.array(registeredTriggerEntry), ...pageOutput }),
  ),
  "engine::register_trigger": contract(registerTriggerInput, z.object({ id: z.string() })),
  "engine::unregister_trigger": contract(unregisterTriggerInput, z.object({ removed: z.boolean() })),
  "engine::edge::refresh": contract(noInput, z.object({ hosts: z.array(z.string()), functions: z.array(z.string()) })),
  "engine::channels::create": contract(channelsCreateInput, z.object({ writer: streamChannelRef, reader: streamChannelRef })),
  "engine::log::info": contract(logInput, z.null()),
  "engine::log::warn": contract(logInput, z.null()),
  "engine::log::error": contract(logInput, z.null()),
  "engine::log::debug": contract(logInput, z.null()),
  "engine::log::trace": contract(logInput, z.null()),
  "engine::cron::jobs": contract(noInput, z.object({ jobs: z.array(cronJob) })),

  "state::set": contract(stateSetInput, stateSetOutput),
  "state::get": contract(stateKeyInput, storedValue),
  /** Answers the previous value itself (nothing when there was none). */
  "state::delete": contract(stateKeyInput, storedValue),
  "state::update": contract(stateUpdateInput, stateUpdateOutput),
  "state::list": contract(stateListInput, z.array(z.unknown())),
  "state::list_groups": contract(stateListGroupsInput, stateListGroupsOutput),
  "state::list_keys": contract(stateListKeysInput, stateListKeysOutput),

  "stream::set": contract(streamSetInput, valueChange),
  "stream::set_many": contract(streamSetManyInput, streamSetManyOutput),
  "stream::get": contract(streamItemInput, storedValue),
  "stream::delete": contract(streamItemInput, z.object({ old_value: z.unknown() })),
  "stream::list": contract(streamGroupInput, z.array(z.unknown())),
  "stream::list_groups": contract(streamInput, z.array(z.string())),
  "stream::list_items": contract(streamListItemsInput, streamListItemsOutput),
  "stream::list_all": contract(noInput, z.object({ stream: z.array(z.object({ id: z.string(), groups: z.array(z.string()) })), count })),
  "stream::send": contract(streamSendInput, noResult),
  "stream::update": contract(streamUpdateInput, updateOutput),

  publish: contract(publishInput, noResult),
  /** The receipts are an iii-edge addition (iii answers nothing). */
  "iii::durable::publish": contract(publishInput, z.object({ messageReceiptIds: z.array(z.string()) })),

  "engine::queue::enqueue": contract(queueEnqueueInput, enqueueReceipt),
  "engine::queue::list_topics": contract(
    noInput,
    z.object({
      topics: z.array(
        z.object({ name: z.string(), backend: queueBackend.nullable(), type: queueType.nullable(), depth: count, inflight: count }),
      ),
    }),
  ),
  "engine::queue::topic_stats": contract(queueTopicInput, z.object({ topic: z.string(), config: queueConfigOutput, depth: count })),
  "engine::queue::dlq_topics": contract(noInput, z.object({ topics: z.array(z.object({ topic: z.string(), count })) })),
  "engine::queue::dlq_messages": contract(dlqMessagesInput, z.object({ topic: z.string(), messages: z.array(deadLetterEntry) })),
  /** iii's queue status: what waits, what runs and what has dead-lettered, for one queue. */
  "iii::queue::status": contract(
    queueInput,
    z.object({ queue: z.string(), backend: queueBackend.nullable(), pending: count, inflight: count, dlq_count: count }),
  ),
  "iii::queue::redrive": contract(queueInput, z.object({ queue: z.string(), redriven: count })),
  "iii::queue::redrive_message": contract(
    queueMessageInput,
    z.object({ queue: z.string(), message_id: z.string(), redriven: z.literal(true) }),
  ),
  "iii::queue::discard_message": contract(
    queueMessageInput,
    z.object({ queue: z.string(), message_id: z.string(), discarded: z.literal(true) }),
  ),

  // Observability (shapes of iii v0.23, ./telemetry.ts).
  "engine::traces::list": contract(telemetry.tracesListInput, telemetry.tracesListOutput),
  "engine::traces::tree": contract(telemetry.tracesTreeInput, telemetry.tracesTreeOutput),
  "engine::traces::group_by": contract(telemetry.tracesGroupByInput, telemetry.tracesGroupByOutput),
  "engine::traces::clear": contract(telemetry.tracesClearInput, telemetry.tracesClearOutput),
  "engine::logs::list": contract(telemetry.logsListInput, telemetry.logsListOutput),
  "engine::metrics::list": contract(telemetry.metricsListInput, telemetry.metricsListOutput),
} as const;
export type BuiltinId = keyof typeof BUILTINS;
export type BuiltinInput<Id extends BuiltinId> = z.output<(typeof BUILTINS)[Id]["input"]>;
export type BuiltinOutput<Id extends BuiltinId> = z.input<(typeof BUILTINS)[Id]["output"]>;
/** A queue as `engine::queue::list_topics` lists it. */
export type QueueTopic = BuiltinOutput<"engine::queue::list_topics">["topics"][number];
/** A dead letter as `engine::queue::dlq_messages` pages it. */
export type DeadLetterEntry = z.infer<typeof deadLetterEntry>;

/** How a built-in's schemas are published: JSON Schema of what it accepts and of what it answers. */
export function formatsOf(contract: { input: z.ZodType; output: z.ZodType }): { request_format: unknown; response_format: unknown } {
  // unrepresentable: "any" — a refinement or `undefined` (no result) has no JSON Schema of its own.
  return {
    request_format: z.toJSONSchema(contract.input, { io: "input", unrepresentable: "any" }),
    response_format: z.toJSONSchema(contract.output, { io: "output", unrepresentable: "any" }),
  };
}

/** The `request_format` a function publishes: JSON Schema of what its request schema accepts. */
export function requestFormat(schema: z.ZodType): unknown {
  return z.toJSONSchema(schema, { io: "input", unrepresentable: "any" });
}
/** The `response_format` a function publishes: JSON Schema of what its response schema describes. */
export function responseFormat(schema: z.ZodType): unknown {
  return z.toJSONSchema(schema, { io: "output", unrepresentable: "any" });
}

const formatCache = new Map<BuiltinId, { request_format: unknown; response_format: unknown }>();
/** `formatsOf(BUILTINS[id])`, computed once per isolate, when first asked for. */
export function builtinFormats(id: BuiltinId): { request_format: unknown; response_format: unknown } {
  let f = formatCache.get(id);
  if (!f) formatCache.set(id, (f = formatsOf(BUILTINS[id])));
  return f;
}
