// The turn orchestrator's contracts (docs/harness-contracts.md §1.2, §2.2, §2.4, §2.7, §4.1, §5.3):
// `run::*` and `turn::*`, the record it keeps per session, and the metadata it sends with a model's calls.
import { z } from "zod";
import type { AgentEvent } from "./events.ts";
import {
  type AgentFunction,
  type AssistantMessage,
  agentMessageSchema,
  type CallGate,
  type ContentBlock,
  type FunctionResultMessage,
} from "./messages.ts";
import type { Model } from "./providers.ts";
import { sessionCopyResponse, treeDisplayName, treeEntryId, treeRequestKey, treeSessionId } from "./session-storage.ts";

export const MODES = ["plan", "ask", "agent"] as const;
export type Mode = (typeof MODES)[number];

/** Default `max_turns`: a run that asks for none still ends, and 16 rounds finish ordinary tasks. */
export const DEFAULT_MAX_TURNS = 16;

export const runStartRequest = z.object({
  session_id: z
    .string()
    .min(1)
    .max(128)
    .regex(/^[^/]+$/, "session_id must not contain '/'"),
  message_id: z.string().min(1).max(128).optional(),
  provider: z.string().min(1).max(64).optional(),
  model: z.string().min(1).max(200),
  mode: z.enum(MODES).optional(),
  messages: z.array(agentMessageSchema).max(1000).default([]),
  max_turns: z.number().int().min(1).max(1000).optional(),
  system_prompt: z.string().max(200_000).optional(),
  /** Skills (by id, `iii://<worker>/<fn>`) to load into the prompt besides the defaults. */
  skills: z.array(z.string().min(1).max(500)).max(50).optional(),
  /** Run the model's function calls in an isolated sandbox (`sandbox::create`). */
  isolation: z.boolean().optional(),
  /** The budget this run is charged to (workers/budget-tracker). */
  budget_id: z.string().min(1).max(200).optional(),
  /** Set by `cassette::replay` (docs/cassettes.md): the run replays a cassette, its calls answered by
   * `cassette::answer` and judged through `cassette::check_permissions`, never invoked. */
  replay_id: z.string().min(1).max(128).optional(),
});
export type RunStartRequest = z.infer<typeof runStartRequest>;
export const runStartResponse = z.union([
  z.object({ session_id: z.string(), started: z.literal(true) }),
  z.object({ session_id: z.string(), started: z.literal(false), reason: z.literal("session_busy") }),
]);
export type RunStartResponse = z.infer<typeof runStartResponse>;

/** What the orchestrator keeps per run (`run_request/<sid>`). */
export interface RunRequest {
  provider: string;
  model: string;
  mode: Mode | null;
  system_prompt: string;
  function_schemas: AgentFunction[];
  max_turns?: number;
  skills?: string[];
  isolation?: boolean;
  budget_id?: string;
  message_id?: string;
  /** Set by provisioning: the sandbox the run's calls use. */
  sandbox_id?: string;
  /** A replay of a cassette: nothing the model asks for is invoked. */
  replay_id?: string;
}

export const TURN_STATES = [
  "provisioning",
  "assistant_streaming",
  "function_execute",
  "function_awaiting_approval",
  "steering_check",
  "stopped",
  "failed",
] as const;
export type TurnState = (typeof TURN_STATES)[number];
/** States a queued step runs; the others are parked or terminal. */
export const STEPABLE_STATES: readonly TurnState[] = ["provisioning", "assistant_streaming", "function_execute", "steering_check"];
export const TERMINAL_STATES: readonly TurnState[] = ["stopped", "failed"];

export interface FunctionCall {
  id: string;
  function_id: string;
  arguments: unknown;
}
export interface FunctionResult {
  content: ContentBlock[];
  details: unknown;
  terminate?: boolean;
}
export type PreparedCall =
  | { route: "dispatch"; call: FunctionCall }
  | { route: "pre_approved"; call: FunctionCall }
  | { route: "synthetic"; call: FunctionCall; result: FunctionResult; is_error?: boolean };
export interface ExecutedCall {
  call: FunctionCall;
  result: FunctionResult;
  is_error: boolean;
  duration_ms: number;
  /** How it was decided, copied onto its transcript entry. */
  gate?: CallGate;
}
export const awaitingApprovalSchema = z.object({
  function_call_id: z.string(),
  function_id: z.string(),
  args: z.unknown(),
  pending_at: z.number().optional(),
  expires_at: z.number().optional(),
  /** What a person approves (§3.7): the hash of `args` after the before-call hooks, and the policy version. */
  args_hash: z.string().optional(),
  policy_version: z.string().optional(),
});
export type AwaitingApproval = z.infer<typeof awaitingApprovalSchema>;
/** Per-call checkpoint: `triggered` is written before the target is invoked, so a step
 * redelivered after a crash never invokes it twice (it gets an "interrupted" result instead). */
export type CallCheckpoint = "triggered" | "pending" | "done";

export interface TurnStateRecord {
  session_id: string;
  state: TurnState;
  /** Bumped by every saved transition: a queued step carries the step it was enqueued for. */
  step: number;
  turn_count: number;
  max_turns?: number;
  last_assistant?: AssistantMessage | null;
  function_results: FunctionResultMessage[];
  turn_end_emitted: boolean;
  started_at_ms: number;
  updated_at_ms: number;
  assistant_body_streamed?: boolean;
  model_meta?: Model | null;
  error?: { kind: string; message: string };
  stop_requested?: boolean;
  work?: {
    prepared: PreparedCall[];
    executed: Record<string, ExecutedCall>;
    calls: Record<string, CallCheckpoint>;
    /** Each call's decision so far, kept across a park until its result is recorded. */
    gates?: Record<string, CallGate>;
  };
  awaiting_approval?: AwaitingApproval[];
  /** Run key for deterministic entry ids (`e_<run>_<k>_assistant`, `e_<run>_<call id>`). */
  run_id: string;
  /** Sends merged into this run (`harness::send` while it runs): bumped by compare-and-set after
   * the message is appended, so the loop knows a message may sit after its watermark. */
  merge_seq?: number;
  /** `merge_seq` as the latest generate step read it, before it read the transcript. */
  folded_seq?: number;
  /** The last transcript entry the latest generate step read: user messages after it arrived
   * during the turn (steering by entry position, never by clock). */
  watermark_entry_id?: string;
  /** The turn's output contract (`harness::send` / `harness::spawn` `options.output`). */
  output?: { type: "text" } | { type: "json"; schema?: Record<string, unknown> };
  /** The validated output (a `json` contract), or the raw text beside `result_error`. */
  result?: unknown;
  result_error?: string;
  /** Nudges sent for an output that did not validate (at most MAX_VALIDATION_RETRIES). */
  validation_retries?: number;
  /** The run replays a cassette (`run::start`'s `replay_id`): its calls are answered, not invoked. */
  replay_id?: string;
}

/** What clients see of a record (`turn::get_state`): never `work` or `last_assistant`. */
export const turnStateViewSchema = z.object({
  session_id: z.string(),
  state: z.enum(TURN_STATES),
  turn_count: z.number(),
  max_turns: z.number().optional(),
  awaiting_approval: z.array(awaitingApprovalSchema).optional(),
  error: z.object({ kind: z.string(), message: z.string() }).optional(),
});
export type TurnStateView = z.infer<typeof turnStateViewSchema>;
/** `turn::get_state`: the view, or null when the session has no record. */
export const turnGetStateResponse = turnStateViewSchema.nullable();

/** Per-session inboxes the orchestrator drains at `steering_check`. */
export const INBOX_STEERING = "steering";
export const INBOX_FOLLOWUP = "followup";

/** The durable FIFO queue (grouped by `session_id`) that carries the `turn::<state>` steps. */
export const TURN_STEP_QUEUE = "turn-step";
/** What a queued step carries: the record's `step` it was enqueued for (the stale guard's key). */
export interface TurnStepPayload {
  session_id: string;
  step: number;
}
export type TurnStepResult =
  | { ok: true; from_state: TurnState; to_state: TurnState }
  | { ok: true; skipped: true; reason: "stale" | "state_conflict" }
  | { ok: false; from_state: TurnState; to_state: "failed"; error: string };

const orchestratorSessionId = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[^/]+$/, "session_id must not contain '/'");
/** `turn::get_state`, `turn::stop`. */
export const turnSessionRequest = z.object({ session_id: orchestratorSessionId });
export const turnStopResponse = z.object({
  session_id: z.string(),
  /** false: nothing to stop (no record, or the run already ended). */
  stopping: z.boolean(),
  state: z.enum(TURN_STATES).nullable(),
});
export type TurnStopResponse = z.infer<typeof turnStopResponse>;
/** `run::steer`: plain text becomes a user message. */
export const runSteerRequest = z.object({
  session_id: orchestratorSessionId,
  message: z.union([z.string().min(1).max(200_000), agentMessageSchema]),
});
/** `ok` false: the session's steering inbox is full. */
export const runSteerResponse = z.object({ ok: z.boolean() });
/** Most `agent::events` items one `run::events` page returns. */
export const RUN_EVENTS_MAX_LIMIT = 1_000;
/** `run::events`: `after` is an item id (`<sid>-<seq>`) from an earlier page or a stream push. */
export const runEventsRequest = z.object({
  session_id: orchestratorSessionId,
  after: z.string().min(1).max(300).nullable().optional(),
  limit: z.number().int().min(1).max(RUN_EVENTS_MAX_LIMIT).optional(),
});
export const runEventsResponse = z.object({
  events: z.array(z.object({ item_id: z.string(), data: z.custom<AgentEvent>() })),
  /** Pass as `after` next time: the last item returned, or the `after` given when none was new. */
  next: z.string().nullable(),
});
export type RunEventsResponse = z.infer<typeof runEventsResponse>;

// Running on a branch (`run::resume|rerun_from|fork`, §5.3). Settings a resumed run does not name
// come from the session's last run request, else from the run request of the session it was forked
// or cloned from.
const runSettings = {
  provider: runStartRequest.shape.provider,
  model: runStartRequest.shape.model.optional(),
  mode: runStartRequest.shape.mode,
  max_turns: runStartRequest.shape.max_turns,
  system_prompt: runStartRequest.shape.system_prompt,
  skills: runStartRequest.shape.skills,
  isolation: runStartRequest.shape.isolation,
  budget_id: runStartRequest.shape.budget_id,
};
const runMessage = z.union([z.string().min(1).max(200_000), agentMessageSchema]);
const runKey = runStartRequest.shape.message_id;

/** `run::resume`: a new run on the existing transcript of a stopped or failed session (or a copy
 * that never ran), with an optional new message. `message_id` names the run (a repeat starts
 * nothing: `already_started`); without it the run id is derived from the session's state. */
export const runResumeRequest = z.object({ session_id: treeSessionId, message: runMessage.optional(), message_id: runKey, ...runSettings });
export type RunResumeRequest = z.infer<typeof runResumeRequest>;
/** `run::rerun_from` (time travel): the user message `entry_id`, edited (`message`, default: as it
 * was), becomes a new branch under that entry's parent, and a run answers it. */
export const runRerunFromRequest = z.object({
  session_id: treeSessionId,
  entry_id: treeEntryId,
  message: runMessage.optional(),
  message_id: runKey,
  ...runSettings,
});
export type RunRerunFromRequest = z.infer<typeof runRerunFromRequest>;
/** `run::fork`: `session-tree::fork`, then — when `message` is given or `run: true` — a run on the
 * new session (`run::resume` there, with the source's settings). */
export const runForkRequest = z.object({
  session_id: treeSessionId,
  entry_id: treeEntryId,
  new_session_id: treeSessionId.optional(),
  request_key: treeRequestKey.optional(),
  display_name: treeDisplayName.optional(),
  run: z.boolean().optional(),
  message: runMessage.optional(),
  message_id: runKey,
  ...runSettings,
});
export type RunForkRequest = z.infer<typeof runForkRequest>;

export const runResumeResponse = z.union([
  z.object({ session_id: z.string(), run_id: z.string(), started: z.literal(true) }),
  z.object({
    session_id: z.string(),
    run_id: z.string().optional(),
    started: z.literal(false),
    reason: z.enum(["session_busy", "already_started"]),
  }),
]);
export type RunResumeResponse = z.infer<typeof runResumeResponse>;
/** The entry the run answers (the edited message's copy) and where it hangs. */
const rerunPlacement = z.object({
  entry_id: z.string().optional(),
  parent_id: z.string().nullable().optional(),
  previous_leaf_id: z.string().nullable().optional(),
});
export const runRerunResponse = z.intersection(runResumeResponse, rerunPlacement);
export type RunRerunResponse = z.infer<typeof runRerunResponse>;
export const runForkResponse = sessionCopyResponse.extend({ run: runResumeResponse.optional() });
export type RunForkResponse = z.infer<typeof runForkResponse>;

/** The invocation `metadata` the orchestrator sends with every call a model makes (gate.ts
 * `callMetadata`). The model's arguments are the call's `data`, unchanged; who is calling
 * travels beside them, so a function with a strict schema accepts the call. A model cannot set
 * metadata: `session_id` is the calling session. */
export const harnessCallMetadata = z.object({
  session_id: z.string().min(1).max(128),
  function_call_id: z.string().min(1).max(256),
  function_id: z.string().min(1).max(300),
});
export type HarnessCallMetadata = z.infer<typeof harnessCallMetadata>;

/** The harness call a handler's `metadata` describes, or undefined when something other than the
 * orchestrator called (a worker, a trigger binding's own metadata). */
export function harnessCallOf(metadata: unknown): HarnessCallMetadata | undefined {
  const r = harnessCallMetadata.safeParse(metadata);
  return r.success ? r.data : undefined;
}

// What other workers and the console may know of a run. The orchestrator's state scopes are its
// own: everything outside it reads a run through these functions and follows one with a
// subscription, so a replacement orchestrator that serves this contract is all they need.

/** `run::status` `{session_id}` → RunStatus | null: `turn::get_state`'s view plus what a worker
 * following a run acts on (which run, whether a stop was asked, the last answer's text). */
export const RUN_STATUS = "run::status";
/** `run::request` `{session_id}` → RunRequestView | null: what the session's last run asked for. */
export const RUN_REQUEST = "run::request";
/** `turn::subscribe` / `turn::unsubscribe`: an engine-held subscription to one session's run. */
export const TURN_SUBSCRIBE = "turn::subscribe";
export const TURN_UNSUBSCRIBE = "turn::unsubscribe";

export const runStatusSchema = z.object({
  session_id: z.string(),
  /** The run the state belongs to (a new `run::start` on the session makes a new one). */
  run_id: z.string(),
  state: z.enum(TURN_STATES),
  turn_count: z.number().int(),
  max_turns: z.number().int().optional(),
  stop_requested: z.boolean(),
  awaiting_approval: z
    .array(
      awaitingApprovalSchema.extend({
        /** A parked `harness::join` (not a person's approval): the child it waits for. */
        held_by: z.string().optional(),
        child_session_id: z.string().optional(),
      }),
    )
    .optional(),
  error: z.object({ kind: z.string(), message: z.string() }).optional(),
  /** The text of the run's last assistant message; null when it has none. */
  final_text: z.string().nullable(),
  /** A run with a `json` output contract: the validated value, or `result_error` beside the raw answer. */
  result: z.unknown().optional(),
  result_error: z.string().optional(),
});
export type RunStatus = z.infer<typeof runStatusSchema>;

export const runRequestViewSchema = z.object({
  provider: z.string(),
  model: z.string(),
  mode: z.enum(MODES).nullable(),
  max_turns: z.number().int().optional(),
  skills: z.array(z.string()).optional(),
  isolation: z.boolean().optional(),
  budget_id: z.string().optional(),
  /** `options.fallback_models` of the run, in order (a spawned child inherits them). */
  fallback_models: z.array(z.string()).optional(),
  /** Set when a sub-agent spawn started the run. */
  parent: z.looseObject({ session_id: z.string(), run_id: z.string(), depth: z.number().int() }).optional(),
});
export type RunRequestView = z.infer<typeof runRequestViewSchema>;

const subscriptionId = z.string().min(1).max(200);
/** `turn::subscribe`: `function_id` is called with a TurnStateChanged after every write of the
 * session's turn record, at least once and in write order, until `turn::unsubscribe`; a handler
 * that fails is called again with the same notice before any later one. The subscription is held
 * by the engine: it outlives the subscriber's and the orchestrator's restarts. Repeating a
 * subscribe with the same id is a no-op. Only this deployment's own workers may subscribe (the
 * orchestrator calls `function_id` with its own hand): a caller with a principal needs a grant
 * that names the session. */
export const turnSubscribeRequest = z.object({
  session_id: orchestratorSessionId,
  function_id: z.string().min(1).max(256),
  subscription_id: subscriptionId,
});
export type TurnSubscribeRequest = z.infer<typeof turnSubscribeRequest>;
export const turnUnsubscribeRequest = z.object({ subscription_id: subscriptionId });
export interface TurnUnsubscribeResponse {
  /** false: no such subscription (never made, or removed already). */
  removed: boolean;
}
/** What a subscriber's function gets: a notice with the state the write left (null: the run's
 * record was deleted). Act on `run::status` read fresh, so a repeated or late notice does the same
 * as the first. */
export const turnStateChangedSchema = z.object({
  subscription_id: z.string(),
  session_id: z.string(),
  event_type: z.enum(["state:created", "state:updated", "state:deleted"]),
  state: z.enum(TURN_STATES).nullable(),
});
export type TurnStateChanged = z.infer<typeof turnStateChangedSchema>;
