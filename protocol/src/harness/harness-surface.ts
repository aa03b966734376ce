// iii's harness surface (docs/harness.md, "iii's harness surface"): `harness::send`, `harness::run`,
// `harness::stop`, `harness::status`, iii's `TurnStatus`, the `OutputContract` of a turn, and the
// payloads of the async trigger types `harness::turn_started` / `harness::turn_completed`. Names,
// fields and answers are iii's, so a client written for iii's harness works here. They drive the
// same turn as `run::*` / `turn::*` (one record per session, owned by the turn orchestrator);
// `harness::spawn` lives with the sub-agents (./sub-agents.ts) and accepts the spawn shape below.
import { z } from "zod";
import { fallbackModelRef, MAX_FALLBACK_MODELS } from "./failover.ts";
import { agentMessageSchema } from "./messages.ts";

export const HARNESS_SEND = "harness::send";
export const HARNESS_RUN = "harness::run";
export const HARNESS_STOP = "harness::stop";
export const HARNESS_STATUS = "harness::status";
export const HARNESS_TURN_STARTED = "harness::turn_started";
export const HARNESS_TURN_COMPLETED = "harness::turn_completed";

/** iii's turn status: finer than a session's coarse status, coarser than our `TurnState`. */
export const TURN_STATUSES = ["running", "awaiting_functions", "completed", "cancelled", "failed"] as const;
export type TurnStatus = (typeof TURN_STATUSES)[number];
export const TERMINAL_TURN_STATUSES: readonly TurnStatus[] = ["completed", "cancelled", "failed"];

/** How long a repeated `idempotency_key` answers the first send (iii: "TTL ~24h"): a webhook
 * source's redeliveries (Telegram, Slack) all come within hours. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** Validation retries of a typed output before the turn ends with `result_error` (iii's default). */
export const MAX_VALIDATION_RETRIES = 2;
/** The synthetic tool a model ends a typed turn with when its provider has no native structured
 * output; consumed by the harness, never dispatched. */
export const SUBMIT_RESULT_TOOL = "submit_result";
/** A JSON Schema of an output contract, bounded so it cannot crowd out the prompt. */
export const MAX_OUTPUT_SCHEMA_CHARS = 20_000;

/** `OutputContract`: what a turn must produce. `text` (default): the final assistant text.
 * `json`: a JSON value, validated against `schema` when given. */
export const outputContract = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }).strict(),
  z
    .object({
      type: z.literal("json"),
      schema: z
        .record(z.string(), z.unknown())
        .refine((s) => JSON.stringify(s).length <= MAX_OUTPUT_SCHEMA_CHARS, `schema is larger than ${MAX_OUTPUT_SCHEMA_CHARS} characters`)
        .optional(),
    })
    .strict(),
]);
export type OutputContract = z.infer<typeof outputContract>;

const sessionId = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[^/]+$/, "session_id must not contain '/'");

/** iii's `functions` block. Our policy file decides what a model may call; `allow`/`deny` are
 * accepted and kept on the run for a client that sends them. */
const functionsOptions = z
  .object({
    allow: z.array(z.string().min(1).max(256)).max(100).optional(),
    deny: z.array(z.string().min(1).max(256)).max(100).optional(),
    expose: z.enum(["agent_trigger", "native"]).optional(),
  })
  .strict();

const THINKING_LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh"] as const;

export const harnessSendOptions = z
  .object({
    system_prompt: z.string().max(200_000).optional(),
    max_turns: z.number().int().min(1).max(1000).optional(),
    thinking_level: z.enum(THINKING_LEVELS).optional(),
    output: outputContract.optional(),
    functions: functionsOptions.optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    fallback_models: z.array(fallbackModelRef).max(MAX_FALLBACK_MODELS).optional(),
  })
  .strict();
export type SendOptions = z.infer<typeof harnessSendOptions>;

/** A send's message: a string is a user text message; an AgentMessage must be `user` or `custom`. */
const sendMessage = z.union([
  z.string().min(1).max(1_000_000),
  agentMessageSchema.refine((m) => m.role === "user", { message: 'message.role must be "user"' }),
]);

/** `SendRequest`. */
export const harnessSendRequest = z
  .object({
    session_id: sessionId.optional(),
    message: sendMessage,
    model: z.string().min(1).max(200),
    provider: z.string().min(1).max(64).optional(),
    idempotency_key: z.string().min(1).max(256).optional(),
    session: z
      .object({ title: z.string().max(200).optional(), metadata: z.record(z.string(), z.unknown()).optional() })
      .strict()
      .optional(),
    options: harnessSendOptions.optional(),
  })
  .strict();
export type SendRequest = z.infer<typeof harnessSendRequest>;

/** `SendResponse`. */
export const harnessSendResponse = z.object({
  session_id: z.string(),
  /** The new turn, or the running turn when merged. */
  turn_id: z.string(),
  accepted: z.literal(true),
  /** true: folded into the turn that was running (steering). */
  merged: z.boolean().optional(),
  /** true: the idempotency_key matched an earlier send; nothing was appended or started. */
  deduplicated: z.boolean().optional(),
});
export type SendResponse = z.infer<typeof harnessSendResponse>;

/** `harness::run`: a send that answers once the turn it started or joined is terminal. */
export const harnessRunRequest = harnessSendRequest.extend({
  /** How long to wait for the terminal status (default RUN_DEFAULT_TIMEOUT_MS). */
  timeout_ms: z.number().int().min(1).max(600_000).optional(),
});
export type HarnessRunRequest = z.infer<typeof harnessRunRequest>;
/** A turn's ordinary length on a loaded box; a caller with a longer job passes `timeout_ms`. */
export const RUN_DEFAULT_TIMEOUT_MS = 120_000;

export const harnessStopRequest = z.object({ session_id: sessionId, turn_id: z.string().min(1).max(128).optional() }).strict();
export type StopRequest = z.infer<typeof harnessStopRequest>;
export const harnessStopResponse = z.object({ stopping: z.boolean() });
export type StopResponse = z.infer<typeof harnessStopResponse>;

export const harnessStatusRequest = z.object({ session_id: sessionId }).strict();
export type StatusRequest = z.infer<typeof harnessStatusRequest>;

/** `StatusResponse` (null for an unknown session). */
export const harnessStatusResponse = z
  .object({
    session_id: z.string(),
    turn_id: z.string().nullable(),
    status: z.enum(TURN_STATUSES),
    step: z.number().int(),
    turn_count: z.number().int(),
    max_turns: z.number().int(),
    depth: z.number().int(),
    pending_function_calls: z.array(z.string()),
    children: z.array(z.object({ function_call_id: z.string(), session_id: z.string(), turn_id: z.string() })),
    result: z.unknown().optional(),
    result_error: z.string().optional(),
    /** Why the turn failed (iii carries it on the turn record and `turn_completed`). */
    reason: z.string().optional(),
  })
  .nullable();
export type StatusResponse = z.infer<typeof harnessStatusResponse>;

/** `harness::run`'s answer: the terminal status (or the last one seen when `timeout_ms` ran out:
 * `timed_out: true`, the turn goes on). */
export const harnessRunResponse = z.object({
  session_id: z.string(),
  turn_id: z.string(),
  status: z.enum(TURN_STATUSES),
  merged: z.boolean().optional(),
  deduplicated: z.boolean().optional(),
  result: z.unknown().optional(),
  result_error: z.string().optional(),
  reason: z.string().optional(),
  timed_out: z.boolean().optional(),
});
export type HarnessRunResponse = z.infer<typeof harnessRunResponse>;

/** The parent of a sub-agent's turn, as the trigger payloads carry it. */
const turnParent = z.object({ session_id: z.string(), turn_id: z.string(), function_call_id: z.string() });

/** The config of a `harness::turn_started` / `harness::turn_completed` binding: a filter. */
export const turnEventConfig = z
  .object({ session_id: z.string().optional(), parent_session_id: z.string().optional() })
  .nullable()
  .optional();
export type TurnEventConfig = z.infer<typeof turnEventConfig>;

/** `TurnStartedEvent`. */
export const turnStartedEvent = z.object({
  session_id: z.string(),
  turn_id: z.string(),
  parent: turnParent.optional(),
  timestamp: z.number(),
});
export type TurnStartedEvent = z.infer<typeof turnStartedEvent>;

/** `TurnCompletedEvent`. */
export const turnCompletedEvent = z.object({
  session_id: z.string(),
  turn_id: z.string(),
  status: z.enum(["completed", "cancelled", "failed"]),
  result: z.unknown().optional(),
  result_error: z.string().optional(),
  reason: z.string().optional(),
  parent: turnParent.optional(),
  timestamp: z.number(),
});
export type TurnCompletedEvent = z.infer<typeof turnCompletedEvent>;

/** The orchestrator's `harness_idem/<key digest>` row: what a repeated key answers. */
export const idempotencyRecord = z.object({
  session_id: z.string(),
  turn_id: z.string().nullable(),
  merged: z.boolean().optional(),
  ts: z.number(),
});
export type IdempotencyRecord = z.infer<typeof idempotencyRecord>;
