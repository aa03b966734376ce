// The sub-agents worker's contracts (docs/harness-contracts.md §2.2, §2.7): `harness::spawn|join|children`.
import { z } from "zod";
import type { AgentEvent } from "./events.ts";
import { fallbackModelRef, MAX_FALLBACK_MODELS } from "./failover.ts";
import { outputContract } from "./harness-surface.ts";
import { type AwaitingApproval, awaitingApprovalSchema, MODES, runStartRequest, TURN_STATES } from "./turn-orchestrator.ts";

// `harness::spawn` starts a child session with its own turn loop under a running parent;
// `harness::join` parks the parent's call (like an approval: no queue step held) until the child
// ends; `harness::children` lists a parent's children. The child's events are mirrored live into
// the parent's `agent::events` group as `child_event` custom events (`stream::send`, never stored
// items: the parent's item ids are the orchestrator's to number), so a console following the
// parent sees a child's pending approval. Stopping or ending the parent stops its children.

export const HARNESS_SPAWN = "harness::spawn";
export const HARNESS_JOIN = "harness::join";
export const HARNESS_CHILDREN = "harness::children";
/** Internal: the orchestrator calls it when a run is stopped or ends (best effort). */
export const HARNESS_STOP_CHILDREN = "harness::stop_children";

/** Deepest child (the root is depth 0): planner → worker → helper covers delegation in practice;
 * every level multiplies cost and the chain a person follows to answer a nested approval. */
export const SUB_AGENT_MAX_DEPTH = 3;
/** Live children of one parent: each is a concurrent turn loop (a provider stream, queue steps);
 * past 8 a provider's rate limit, not the work, sets the pace, and a console can still show them. */
export const SUB_AGENT_MAX_LIVE_CHILDREN = 8;
/** Sessions spawned under one root run, every depth counted: with the default max_turns (16) this
 * bounds one user message's tree to ~512 model calls, and stops a spawn → join → spawn loop. */
export const SUB_AGENT_MAX_PER_TREE = 32;
/** A task is the child's first user message: a long brief fits, a transcript dump does not. */
export const SUB_AGENT_TASK_MAX_CHARS = 100_000;
/** How long a parked join waits when the model gives no `timeout_ms` (half an hour: a sub-task
 * that takes longer is better split, or waited for with an explicit timeout). */
export const JOIN_DEFAULT_TIMEOUT_MS = 30 * 60_000;
/** Longest `timeout_ms` accepted: a day; a child that runs longer is stopped by a person anyway. */
export const JOIN_MAX_TIMEOUT_MS = 24 * 60 * 60_000;
/** Longest a direct (non-model) caller's `harness::join` holds its call open: under the engine's
 * 30 s default call deadline, so the wait answers instead of timing out. */
export const JOIN_MAX_INLINE_WAIT_MS = 25_000;

const subAgentSessionIdSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[^/]+$/, "session_id must not contain '/'");
const functionCallIdSchema = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[^/]+$/, "function_call_id must not contain '/'");

/** The parent link a child's run request carries (`run_request/<child>.parent`): informational —
 * the sub-agents worker's own records are what it acts on. */
export const subAgentParentLink = z.object({
  session_id: subAgentSessionIdSchema,
  run_id: z.string().min(1).max(256),
  function_call_id: z.string().min(1).max(256).optional(),
  depth: z.number().int().min(1).max(SUB_AGENT_MAX_DEPTH),
  root_session_id: subAgentSessionIdSchema,
});
export type SubAgentParentLink = z.infer<typeof subAgentParentLink>;
/** `run::start` as the orchestrator registers it: the contract's request plus the optional link. */
export const runStartWithParentRequest = runStartRequest.extend({ parent: subAgentParentLink.optional() });

/** The calling session and call of a model's `harness::*` call, as the sub-agents worker keys them
 * (ids go into state keys: no '/'). */
export const subAgentModelCall = z.object({ session_id: subAgentSessionIdSchema, function_call_id: functionCallIdSchema });
export type SubAgentModelCall = z.infer<typeof subAgentModelCall>;

/** `harness::spawn`. Called by a model, the parent is the calling session (`parent_session_id`, if
 * given, must be it); a worker names the parent. `function_call_id` makes the child id
 * deterministic, so a repeated spawn finds the same child. */
const taskText = z.string().trim().min(1, "task must say what the sub-agent should do").max(SUB_AGENT_TASK_MAX_CHARS);
/** iii's spawn `task` may be a user AgentMessage: its text blocks are the task. */
const taskMessage = z
  .looseObject({
    role: z.literal("user"),
    content: z.union([z.string(), z.array(z.looseObject({ type: z.string(), text: z.string().optional() }))]),
  })
  .transform((m) =>
    typeof m.content === "string" ? m.content : m.content.map((b) => (b.type === "text" ? (b.text ?? "") : "")).join("\n"),
  );

/** iii's `SpawnRequest.options`. `output` is the child's deliverable; `fallback_models` default
 * to the parent run's; `system_prompt`, `thinking_level`, `functions`, `max_children` and
 * `pending_timeout_ms` are accepted for iii's clients: our policy file, provisioning's prompt and
 * the sub-agent limits decide those here. */
export const harnessSpawnOptions = z.object({
  system_prompt: z.string().max(200_000).optional(),
  max_turns: z.number().int().min(1).max(1000).optional(),
  thinking_level: z.string().max(16).optional(),
  output: outputContract.optional(),
  functions: z
    .object({
      allow: z.array(z.string().max(256)).max(100).optional(),
      deny: z.array(z.string().max(256)).max(100).optional(),
      expose: z.enum(["agent_trigger", "native"]).optional(),
    })
    .optional(),
  max_children: z.number().int().min(0).max(100).optional(),
  pending_timeout_ms: z.number().int().min(1).optional(),
  fallback_models: z.array(fallbackModelRef).max(MAX_FALLBACK_MODELS).optional(),
});

export const harnessSpawnRequest = z.object({
  parent_session_id: subAgentSessionIdSchema.optional(),
  task: z.union([taskText, taskMessage.pipe(taskText)]),
  options: harnessSpawnOptions.optional(),
  /** iii's spawn into an existing session (a fork): not offered here, refused rather than ignored. */
  session_id: z
    .string()
    .optional()
    .refine(
      (v) => v === undefined,
      "session_id: spawning into an existing session is not supported; run::fork it, then run::resume the fork",
    ),
  model: z.string().min(1).max(200).optional(),
  provider: z.string().min(1).max(64).optional(),
  mode: z.enum(MODES).optional(),
  max_turns: z.number().int().min(1).max(1000).optional(),
  /** A fraction of the parent budget's unallotted remaining money the child may spend. */
  budget_share: z.number().gt(0).max(1).optional(),
});
export type HarnessSpawnRequest = z.infer<typeof harnessSpawnRequest>;
export const harnessSpawnResponse = z.object({
  child_session_id: z.string(),
  /** true: the child's run is started (by this call or an earlier delivery of the same spawn). */
  started: z.boolean(),
  depth: z.number(),
  /** true: this spawn had happened before; nothing new was started. */
  existing: z.literal(true).optional(),
  budget_id: z.string().optional(),
  /** What the model should do next. */
  message: z.string(),
  /** iii's `SpawnResponse.child_turn_id`: the child's run. */
  child_turn_id: z.string(),
});
export type HarnessSpawnResponse = z.infer<typeof harnessSpawnResponse>;

export const harnessJoinRequest = z.object({
  child_session_id: subAgentSessionIdSchema,
  timeout_ms: z.number().int().min(0).max(JOIN_MAX_TIMEOUT_MS).optional(),
});
export type HarnessJoinRequest = z.infer<typeof harnessJoinRequest>;
/** A child that ended: its final assistant text, rounds, and why it failed if it did. */
const runError = z.object({ kind: z.string(), message: z.string() });
export const harnessJoinResult = z.object({
  child_session_id: z.string(),
  state: z.enum(["stopped", "failed"]),
  final_message: z.string().nullable(),
  turn_count: z.number(),
  error: runError.optional(),
  /** The child's output-contract result (spawn `options.output`), or why it has none. */
  result: z.unknown().optional(),
  result_error: z.string().optional(),
});
export type HarnessJoinResult = z.infer<typeof harnessJoinResult>;
/** The child is still running. Returned to the orchestrator's dispatch it parks the call (see
 * `isJoinPending`); a resumed call that still finds the child running gets it as its result. */
export const harnessJoinPending = z.object({
  pending: z.literal(true),
  held_by: z.literal(HARNESS_JOIN),
  child_session_id: z.string(),
  state: z.enum(TURN_STATES).nullable(),
  expires_at: z.number().optional(),
  message: z.string(),
});
export type HarnessJoinPending = z.infer<typeof harnessJoinPending>;
export const harnessJoinResponse = z.union([harnessJoinResult, harnessJoinPending]);
export type HarnessJoinResponse = z.infer<typeof harnessJoinResponse>;

/** Whether a call's result is a join to park on (only `harness::join`'s own answer counts, so no
 * other function can make the orchestrator call it twice). */
export function isJoinPending(functionId: string, details: unknown): details is HarnessJoinPending {
  if (functionId !== HARNESS_JOIN || !details || typeof details !== "object") return false;
  const d = details as Record<string, unknown>;
  return d.pending === true && d.held_by === HARNESS_JOIN && typeof d.child_session_id === "string";
}

/** An `awaiting_approval` entry that waits for a child rather than a person: a console shows
 * "waiting for sub-agent <child_session_id>" instead of approve/deny. The sub-agents worker writes
 * the `allow` decision when the child ends (or the join times out); a person's decision on it
 * ends the wait early (allow: the current state of the child; deny: a denial). */
export type AwaitingChild = AwaitingApproval & { held_by: typeof HARNESS_JOIN; child_session_id: string };
export const isAwaitingChild = (a: AwaitingApproval): a is AwaitingChild =>
  (a as Partial<AwaitingChild>).held_by === HARNESS_JOIN && typeof (a as Partial<AwaitingChild>).child_session_id === "string";

export const harnessChildrenRequest = z.object({ parent_session_id: subAgentSessionIdSchema.optional() });
export const subAgentChildViewSchema = z.object({
  child_session_id: z.string(),
  depth: z.number(),
  task: z.string(),
  created_at_ms: z.number(),
  /** null: the child's run has not written its record yet. */
  state: z.enum(TURN_STATES).nullable(),
  turn_count: z.number(),
  awaiting_approval: z.array(awaitingApprovalSchema).optional(),
  error: runError.optional(),
});
export type SubAgentChildView = z.infer<typeof subAgentChildViewSchema>;
export const harnessChildrenResponse = z.object({ parent_session_id: z.string(), children: z.array(subAgentChildViewSchema) });
export type HarnessChildrenResponse = z.infer<typeof harnessChildrenResponse>;
export const harnessStopChildrenRequest = z.object({ parent_session_id: subAgentSessionIdSchema, reason: z.string().max(200).optional() });

/** The `stream::send` event type of a mirrored child event on `agent::events/<ancestor>`. */
export const CHILD_EVENT = "child_event";
/** What a console following a session gets for each event of a descendant (push
 * `{event: {type: "event", event: {type: "child_event", data: SubAgentChildEvent}}}`). `item_id` is
 * the event's id in the child's own group: order and dedupe by it; catch up with `run::events` on
 * `child_session_id`. Token deltas (`message_update`) are not mirrored. */
export interface SubAgentChildEvent {
  type: typeof CHILD_EVENT;
  child_session_id: string;
  parent_session_id: string;
  depth: number;
  item_id: string;
  event: AgentEvent;
}
/** Event types not mirrored: deltas would multiply a parent's traffic by its live children. */
export const SUB_AGENT_UNMIRRORED_EVENTS: readonly AgentEvent["type"][] = ["message_update"];
