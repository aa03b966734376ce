// The iii wire protocol (protocol/README.md §3), once. The engine and both SDKs parse
// every inbound frame with these schemas and build every outbound frame with these types.
// Unknown fields are ignored (iii-sdk 0.22.1 leaks `message_type` into several frames), so object
// schemas are non-strict; absent optional fields stay absent.
import { z } from "zod";
import {
  MAX_DESCRIPTION_BYTES,
  MAX_HTTP_INVOCATION_BYTES,
  MAX_ID_LENGTH,
  MAX_INVOCATION_ID_LENGTH,
  MAX_INVOKE_TIMEOUT_MS,
  MAX_METADATA_BYTES,
  MAX_QUEUE_NAME_LENGTH,
  MAX_SCHEMA_BYTES,
  MAX_TRIGGER_CONFIG_BYTES,
  NAMESPACE_PATTERN,
} from "./limits.ts";

/** JSON value carried in `data`, `result`, `config`, `metadata`. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export const json: z.ZodType<Json> = z.lazy(() =>
  z.union([z.null(), z.boolean(), z.number(), z.string(), z.array(json), z.record(z.string(), json)]),
);
/** Anything JSON.parse produced; structure is checked where it matters, not here. */
const anyJson = z.unknown();
const nonEmpty = z.string().min(1).max(MAX_ID_LENGTH);
const optString = z.string().optional();
const jsonObject = z.record(z.string(), z.unknown());

/** UTF-8 size of a string (lone surrogates count 3 bytes: what TextEncoder makes of them). */
export function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 2; // a pair: 2 units, 4 bytes
      i++;
    } else n += 2;
  }
  return n;
}

/** UTF-8 size of a value as JSON; Infinity when it cannot be serialised (nested too deep). */
export function jsonBytes(v: unknown): number {
  if (v === undefined) return 0;
  try {
    const text = JSON.stringify(v);
    return text === undefined ? 0 : utf8Length(text);
  } catch {
    return Infinity;
  }
}

/** `schema`, refused when its JSON is over `max` bytes: what a registration stores (and every
 * listing repeats) is bounded where the frame is parsed, so an oversized one changes nothing. */
export function boundedJson<T extends z.ZodType>(schema: T, max: number) {
  return schema.superRefine((v, ctx) => {
    const size = jsonBytes(v);
    if (size > max) {
      const what = Number.isFinite(size) ? `${size} bytes of JSON` : "nested too deeply to store";
      ctx.addIssue({ code: "custom", message: `${what}, over the ${max}-byte limit` });
    }
  });
}
/** Text of at most `max` UTF-8 bytes. */
const boundedText = (max: number) =>
  z.string().superRefine((s, ctx) => {
    // Cheap first: ≤3 bytes per UTF-16 unit.
    if (s.length * 3 <= max) return;
    const size = utf8Length(s);
    if (size > max) ctx.addIssue({ code: "custom", message: `${size} bytes, over the ${max}-byte limit` });
  });
const description = boundedText(MAX_DESCRIPTION_BYTES).optional();
const schemaJson = boundedJson(anyJson, MAX_SCHEMA_BYTES).optional();

export const errorBody = z.object({
  code: z.string(),
  message: z.string(),
  stacktrace: z.string().optional(),
});
export type ErrorBody = z.infer<typeof errorBody>;

export const workerRegistered = z.object({
  type: z.literal("workerregistered"),
  worker_id: z.string(),
  reattach_token: z.string().optional(),
});

export const reattach = z.object({
  type: z.literal("reattach"),
  previous_worker_id: z.string(),
  reattach_token: z.string().optional(),
});

/** iii's HTTP-invoked function registration (§9). */
export const httpInvocation = z.object({
  url: z.string().min(1),
  method: z.enum(["GET", "POST", "PUT", "PATCH", "DELETE"]).optional(),
  timeout_ms: z.number().int().positive().optional(),
  headers: z.record(z.string(), z.string()).optional(),
  auth: z
    .discriminatedUnion("type", [
      z.object({ type: z.literal("hmac"), secret_key: z.string() }),
      z.object({ type: z.literal("bearer"), token_key: z.string() }),
      z.object({ type: z.literal("api_key"), header: z.string(), value_key: z.string() }),
    ])
    .optional(),
});
export type HttpInvocation = z.infer<typeof httpInvocation>;

export const registerFunction = z.object({
  type: z.literal("registerfunction"),
  id: nonEmpty,
  description,
  request_format: schemaJson,
  response_format: schemaJson,
  metadata: boundedJson(jsonObject, MAX_METADATA_BYTES).optional(),
  invocation: boundedJson(httpInvocation, MAX_HTTP_INVOCATION_BYTES).optional(),
});

export const unregisterFunction = z.object({ type: z.literal("unregisterfunction"), id: nonEmpty });

export const registerTriggerType = z.object({
  type: z.literal("registertriggertype"),
  id: nonEmpty,
  description,
  trigger_request_format: schemaJson,
  call_request_format: schemaJson,
});

export const unregisterTriggerType = z.object({
  type: z.literal("unregistertriggertype"),
  id: nonEmpty,
  description: optString,
});

export const registerTrigger = z.object({
  type: z.literal("registertrigger"),
  id: nonEmpty,
  trigger_type: nonEmpty,
  function_id: nonEmpty,
  /** Missing config is treated as null (the SDK drops `undefined`). */
  config: boundedJson(anyJson, MAX_TRIGGER_CONFIG_BYTES).optional(),
  metadata: boundedJson(anyJson, MAX_METADATA_BYTES).optional(),
});

export const unregisterTrigger = z.object({
  type: z.literal("unregistertrigger"),
  id: nonEmpty,
  trigger_type: optString,
});

export const triggerRegistrationResult = z.object({
  type: z.literal("triggerregistrationresult"),
  id: z.string(),
  trigger_type: z.string(),
  function_id: z.string(),
  error: errorBody.optional(),
});

export const triggerAction = z.discriminatedUnion("type", [
  z.object({ type: z.literal("void") }),
  z.object({
    type: z.literal("enqueue"),
    queue: z.string().min(1).max(MAX_QUEUE_NAME_LENGTH),
    /** iii-edge extension: a repeat with the same key returns the first receipt. */
    idempotency_key: z.string().min(1).max(MAX_QUEUE_NAME_LENGTH).optional(),
  }),
]);
export type TriggerAction = z.infer<typeof triggerAction>;

// invokeFunction and invocationResult are also checked without zod, on the hot path of every routed
// call (call-frames.ts): a rule changed here is changed there too, and tests/unit/call-frames.test.ts
// fails until it is.
export const invokeFunction = z.object({
  type: z.literal("invokefunction"),
  invocation_id: z.string().min(1).max(MAX_INVOCATION_ID_LENGTH).optional(),
  function_id: nonEmpty,
  /** Missing data is treated as null (iii-sdk omits `undefined` payloads). */
  data: anyJson.optional(),
  metadata: anyJson.optional(),
  traceparent: optString,
  baggage: optString,
  action: triggerAction.optional(),
  /** iii-edge extension: the engine-side deadline for this call (default 30 s). */
  timeout_ms: z.number().int().positive().max(MAX_INVOKE_TIMEOUT_MS).optional(),
  /** iii 0.23+: the namespace to resolve `function_id` in (absent: the connection's own). */
  namespace: z.string().regex(NAMESPACE_PATTERN).optional(),
});

export const invocationResult = z.object({
  type: z.literal("invocationresult"),
  invocation_id: z.string().min(1).max(MAX_INVOCATION_ID_LENGTH),
  function_id: z.string(),
  result: anyJson.optional(),
  error: errorBody.optional(),
  traceparent: optString,
  baggage: optString,
});

export const registerService = z.object({
  type: z.literal("registerservice"),
  id: nonEmpty,
  name: optString,
  description: optString,
  parent_service_id: optString,
});

export const ping = z.object({ type: z.literal("ping") });
export const pong = z.object({ type: z.literal("pong") });

/** E→W: a frame the engine could not take (iii-edge; the iii SDKs ignore unknown types). */
export const errorFrame = z.object({ type: z.literal("error"), error: errorBody });

/** Every frame a worker may send to the engine. */
export const workerFrame = z.discriminatedUnion("type", [
  reattach,
  registerFunction,
  unregisterFunction,
  registerTriggerType,
  unregisterTriggerType,
  registerTrigger,
  unregisterTrigger,
  triggerRegistrationResult,
  invokeFunction,
  invocationResult,
  registerService,
  ping,
  pong,
  workerRegistered,
]);
export type WorkerFrame = z.infer<typeof workerFrame>;

/** Every frame the engine may send to a worker. */
export const engineFrame = z.discriminatedUnion("type", [
  workerRegistered,
  registerTrigger,
  unregisterTrigger,
  triggerRegistrationResult,
  invokeFunction,
  invocationResult,
  ping,
  pong,
  errorFrame,
]);
export type EngineFrame = z.infer<typeof engineFrame>;

export type RegisterFunction = z.infer<typeof registerFunction>;
export type RegisterTrigger = z.infer<typeof registerTrigger>;
export type RegisterTriggerType = z.infer<typeof registerTriggerType>;
export type InvokeFunction = z.infer<typeof invokeFunction>;
export type InvocationResult = z.infer<typeof invocationResult>;
export type TriggerRegistrationResult = z.infer<typeof triggerRegistrationResult>;

export const FRAME_TYPES = [
  "workerregistered",
  "reattach",
  "registerfunction",
  "unregisterfunction",
  "registertriggertype",
  "unregistertriggertype",
  "registertrigger",
  "unregistertrigger",
  "triggerregistrationresult",
  "invokefunction",
  "invocationresult",
  "registerservice",
  "ping",
  "pong",
  "error",
] as const;
