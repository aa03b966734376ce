// The hook fan-out worker's contracts (docs/harness-contracts.md §1.10, §6.3): publish-and-collect
// and the before/after function call hooks.
import { z } from "zod";
import type { DenialEnvelope } from "./approval-gate.ts";
import type { ContentBlock } from "./messages.ts";
import type { FunctionCall } from "./turn-orchestrator.ts";

// Publish-and-collect: `hook-fanout::publish_collect` publishes a HookEnvelope to a topic's durable
// subscribers (`iii::durable::publish`); each answers with `stream::set` on HOOK_REPLY_STREAM, group
// = the envelope's `event_id`; the collector resolves on the expected replies, quiescence or the
// deadline, and merges the replies by the request's rule.

export const PUBLISH_COLLECT = "hook-fanout::publish_collect";
/** Where subscribers answer: group `event_id`, one item per reply (item id: the subscriber's own,
 * stable across its retries, so a redelivered subscriber overwrites its reply instead of adding one). */
export const HOOK_REPLY_STREAM = "agent::hook_reply";
/** Published before an allowed function call is dispatched (payload BeforeFunctionCallPayload). */
export const BEFORE_FUNCTION_CALL_TOPIC = "agent::before_function_call";
/** Published after a function call returned (payload AfterFunctionCallPayload). */
export const AFTER_FUNCTION_CALL_TOPIC = "agent::after_function_call";

export const MERGE_RULES = ["first_block_wins", "field_merge", "pipeline_last_wins"] as const;
export type MergeRule = (typeof MERGE_RULES)[number];

/** The deadline when a request gives none (§6.3). */
export const HOOK_DEFAULT_TIMEOUT_MS = 10_000;
/** Shortest deadline accepted (§6.3 floor): below it a subscriber on the durable queue cannot answer. */
export const HOOK_MIN_TIMEOUT_MS = 50;
/** Longest deadline accepted: a hook is a check around a call, not the call (a call's own budget
 * is 120 s); a minute bounds how long a collector holds memory and its caller's step. */
export const HOOK_MAX_TIMEOUT_MS = 60_000;
/** Quiescence when a request gives none (§6.3): this long after the last reply with no other. */
export const HOOK_DEFAULT_QUIESCENCE_MS = 200;
/** Most replies one event collects (and `expected_replies` accepts): far past any real fan-out,
 * and it bounds a collector's memory against a subscriber that writes replies in a loop. */
export const HOOK_MAX_REPLIES = 256;
/** Longest topic name: topics are ids like `agent::after_function_call`. */
export const HOOK_MAX_TOPIC_LENGTH = 256;

export const publishCollectRequest = z.object({
  topic: z.string().min(1).max(HOOK_MAX_TOPIC_LENGTH),
  payload: z.unknown(),
  merge_rule: z.enum(MERGE_RULES),
  timeout_ms: z.number().int().min(HOOK_MIN_TIMEOUT_MS).max(HOOK_MAX_TIMEOUT_MS).default(HOOK_DEFAULT_TIMEOUT_MS),
  /** Resolve as soon as this many replies arrived. Absent: the number of subscribers the publish
   * reached (iii-edge's `messageReceiptIds`), so a full set of answers ends the wait at once. */
  expected_replies: z.number().int().min(1).max(HOOK_MAX_REPLIES).optional(),
  quiescence_ms: z.number().int().min(0).max(HOOK_MAX_TIMEOUT_MS).default(HOOK_DEFAULT_QUIESCENCE_MS),
});
export type PublishCollectRequest = z.input<typeof publishCollectRequest>;

/** What a subscriber receives (the published data). */
export interface HookEnvelope<P = unknown> {
  event_id: string;
  reply_stream: typeof HOOK_REPLY_STREAM;
  payload: P;
}

/** Why a collection ended: the expected replies arrived, quiescence after the last reply, the
 * deadline, the publish reached nobody, or the publish failed. */
export const HOOK_RESOLUTIONS = ["expected", "quiescence", "deadline", "no_subscribers", "publish_failed"] as const;
export type HookResolution = (typeof HOOK_RESOLUTIONS)[number];

export const publishCollectResponse = z.object({
  event_id: z.string(),
  /** The replies (de-duplicated by item id), in arrival order. */
  replies: z.array(z.unknown()),
  merged: z.unknown(),
  /** `subscribers`: how many subscribed functions the publish reached. */
  publish: z.union([z.object({ ok: z.literal(true), subscribers: z.number() }), z.object({ ok: z.literal(false), error: z.string() })]),
  /** Present (true) when the publish itself failed. */
  publish_failed: z.literal(true).optional(),
  resolved_by: z.enum(HOOK_RESOLUTIONS),
  /** How long the collection took, publish included. */
  elapsed_ms: z.number(),
});
export type PublishCollectResponse = z.infer<typeof publishCollectResponse>;

/** `agent::before_function_call`: a call the policy (or a person) allowed, before it runs. A
 * subscriber keys any side effect on `function_call.id` (a retried step may publish it again). */
export interface BeforeFunctionCallPayload {
  session_id: string;
  function_call: FunctionCall;
}
/** A before-hook's reply: `block:true` denies the call (`reason` is what the model reads);
 * otherwise `arguments`, if an object, is laid over the call's arguments field by field (several
 * hooks' rewrites combine; the later reply wins a field both set). `{}` = no change, and lets the
 * collector stop waiting for this subscriber. */
export interface BeforeFunctionCallReply {
  block?: boolean;
  reason?: string;
  arguments?: Record<string, unknown>;
}
/** `agent::after_function_call`: the call (with the arguments it ran with) and its result, the
 * result's fields at the top level so that `field_merge` rewrites them in place. */
export interface AfterFunctionCallPayload {
  session_id: string;
  function_call: FunctionCall;
  content: ContentBlock[];
  details: unknown;
  terminate?: boolean;
  is_error: boolean;
}
/** An after-hook's reply (`field_merge`): `content` replaces, `details` is shallow-merged,
 * `terminate` overwrites. `{}` = no change. */
export interface AfterFunctionCallReply {
  content?: ContentBlock[];
  details?: Record<string, unknown>;
  terminate?: boolean;
}

/** A call a before-hook blocked: the DenialEnvelope's shape with `denied_by:"hook"`. */
export interface HookDenialEnvelope extends Omit<DenialEnvelope, "denied_by"> {
  denied_by: "hook";
  hook_topic: string;
}
