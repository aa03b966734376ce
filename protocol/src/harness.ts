// The agent harness's contracts (../shared/spec/harness-stack.md, TS-7 ids and shapes, GREEN
// durability): the messages and events every harness worker and UI reads, and the payloads of the
// functions workers call on each other. Workers share these through `@iii-edge/protocol/harness`,
// never through each other's files. Field names are the spec's, snake_case, as written there.
import { z } from "zod";

// ------------------------------------------------------------------ messages (§4.4)

export type StopReason = "end" | "length" | "function_call" | "aborted" | "error";
export type ErrorKind = "auth_expired" | "rate_limited" | "context_overflow" | "transient" | "permanent";
export const STOP_REASONS = ["end", "length", "function_call", "aborted", "error"] as const;
export const ERROR_KINDS = ["auth_expired", "rate_limited", "context_overflow", "transient", "permanent"] as const;

export type ContentBlock =
  | { type: "text"; text: string }
  | { type: "image"; mime: string; data: string }
  | { type: "thinking"; text: string; signature?: unknown }
  | { type: "function_call"; id: string; function_id: string; arguments: unknown }
  | { type: "function_result"; function_call_id: string; content: ContentBlock[]; is_error?: boolean };

/** Token counts as the provider reported them. */
export interface Usage {
  input?: number;
  output?: number;
  cache_read?: number;
  cache_write?: number;
  reasoning?: number;
  cost_usd?: number;
}

export interface UserMessage {
  role: "user";
  content: ContentBlock[];
  timestamp: number;
}
export interface AssistantMessage {
  role: "assistant";
  content: ContentBlock[];
  stop_reason: StopReason;
  error_message?: string | null;
  error_kind?: ErrorKind | null;
  usage?: Usage | null;
  model: string;
  provider: string;
  timestamp: number;
}
export interface FunctionResultMessage {
  role: "function_result";
  function_call_id: string;
  function_id: string;
  content: ContentBlock[];
  details: unknown;
  is_error: boolean;
  timestamp: number;
}
export interface CustomMessage {
  role: "custom";
  custom_type: string;
  content: unknown;
  display?: string;
  details?: unknown;
  timestamp: number;
}
export type AgentMessage = UserMessage | AssistantMessage | FunctionResultMessage | CustomMessage;

/** A function schema as a provider tool (§4.4 AgentFunction). */
export interface AgentFunction {
  name: string;
  description: string;
  parameters: unknown;
  label?: string;
  execution_mode?: "parallel" | "sequential";
  prepare_arguments_supported?: boolean;
}

/** The one tool the model sees (§3.1): `{function, payload}` reaches any function by id. */
export const AGENT_TRIGGER = "agent_trigger";

// Lenient input schemas: a message from a client is checked for its discriminating fields; its
// content blocks are kept as given (providers convert them, unknown blocks are dropped there).
const contentBlock = z.looseObject({ type: z.string().min(1) });
export const agentMessageSchema = z.union([
  z.looseObject({ role: z.literal("user"), content: z.union([z.string(), z.array(contentBlock)]), timestamp: z.number().optional() }),
  z.looseObject({ role: z.literal("assistant"), content: z.array(contentBlock) }),
  z.looseObject({ role: z.literal("function_result"), function_call_id: z.string(), content: z.array(contentBlock) }),
  z.looseObject({ role: z.literal("custom"), custom_type: z.string() }),
]);

// ------------------------------------------------------------------ provider streaming (§4.2)

export type AssistantMessageEvent =
  | { type: "start"; partial: AssistantMessage }
  | { type: "text_start"; partial: AssistantMessage }
  | { type: "text_delta"; partial: AssistantMessage; delta: string }
  | { type: "text_end"; partial: AssistantMessage }
  | { type: "thinking_start"; partial: AssistantMessage }
  | { type: "thinking_delta"; partial: AssistantMessage; delta: string }
  | { type: "thinking_end"; partial: AssistantMessage }
  | { type: "functioncall_start"; partial: AssistantMessage }
  | { type: "functioncall_delta"; partial: AssistantMessage; delta: string }
  | { type: "functioncall_end"; partial: AssistantMessage }
  | { type: "usage"; usage: Usage }
  | { type: "stop"; stop_reason: StopReason; error_message?: string; error_kind?: ErrorKind }
  | { type: "ping" }
  | { type: "done"; message: AssistantMessage }
  | { type: "error"; error: AssistantMessage };

/** `provider::<name>::stream` request. `writer_ref` is the write end of an engine channel: the
 * provider writes one JSON text item per AssistantMessageEvent and closes it after the terminal one. */
export const providerStreamRequest = z.object({
  writer_ref: z.object({ channel_id: z.string(), access_key: z.string(), direction: z.literal("write") }),
  system_prompt: z.string().nullable().optional(),
  model: z.string().min(1),
  messages: z.array(z.unknown()),
  tools: z.array(z.unknown()).optional(),
  max_tokens: z.number().int().positive().optional(),
});
export type ProviderStreamRequest = z.infer<typeof providerStreamRequest>;

// ------------------------------------------------------------------ models catalog (§6.6)

export interface Model {
  id: string;
  provider: string;
  api?: string;
  display_name?: string;
  context_window: number;
  max_output_tokens?: number;
  input_limit?: number;
  supports_thinking?: boolean;
  supports_tools?: boolean;
  supports_vision?: boolean;
  supports_cache?: boolean;
  transports?: ("sse" | "websocket" | "auto")[];
  pricing?: { input_per_1m: number; output_per_1m: number; cache_read_per_1m?: number; cache_write_per_1m?: number };
}

// ------------------------------------------------------------------ runs and turns (§1.2, §2.2)

export const MODES = ["plan", "ask", "agent"] as const;
export type Mode = (typeof MODES)[number];

/** Default `max_turns` (spec §9 #17: GREEN's 16). */
export const DEFAULT_MAX_TURNS = 16;

export const runStartRequest = z.object({
  session_id: z.string().min(1).max(128).regex(/^[^/]+$/, "session_id must not contain '/'"),
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
  /** Part 2 (budget-tracker): the budget this run is charged to. */
  budget_id: z.string().min(1).max(200).optional(),
});
export type RunStartRequest = z.infer<typeof runStartRequest>;
export type RunStartResponse = { session_id: string; started: true } | { session_id: string; started: false; reason: "session_busy" };

export const harnessTriggerRequest = z.object({
  session_id: z.string().optional(),
  message_id: z.string().optional(),
  payload: z.unknown(),
});

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
}

export const TURN_STATES = ["provisioning", "assistant_streaming", "function_execute", "function_awaiting_approval", "steering_check", "stopped", "failed"] as const;
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
}
export interface AwaitingApproval {
  function_call_id: string;
  function_id: string;
  args: unknown;
  pending_at?: number;
  expires_at?: number;
}
/** GREEN per-call checkpoint: `triggered` is written before the target is invoked, so a step
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
  work?: { prepared: PreparedCall[]; executed: Record<string, ExecutedCall>; calls: Record<string, CallCheckpoint> };
  awaiting_approval?: AwaitingApproval[];
  /** Run key for deterministic entry ids (`e_<run>_<k>_assistant`, `e_<run>_<call id>`). */
  run_id: string;
}

/** What clients see of a record (`turn::get_state`): never `work` or `last_assistant`. */
export interface TurnStateView {
  session_id: string;
  state: TurnState;
  turn_count: number;
  max_turns?: number;
  awaiting_approval?: AwaitingApproval[];
  error?: { kind: string; message: string };
}

// ------------------------------------------------------------------ agent::events (§4.1)

export const AGENT_EVENTS_STREAM = "agent::events";
export const TURN_END_STREAM = "agent::turn_end";

export type AgentEvent =
  | { type: "agent_start" }
  | { type: "turn_start" }
  | { type: "message_start"; message: AgentMessage }
  | { type: "message_update"; message: AgentMessage; llm_event: AssistantMessageEvent }
  | { type: "message_end"; message: AgentMessage }
  | { type: "message_complete"; message: AssistantMessage; body_streamed?: boolean }
  | { type: "function_execution_start"; function_call_id: string; function_id: string; args: unknown }
  | { type: "function_execution_end"; function_call_id: string; function_id: string; result: FunctionResult; is_error: boolean; duration_ms: number }
  | { type: "turn_end"; message: AgentMessage; function_results: FunctionResultMessage[] }
  | { type: "agent_end"; messages: AgentMessage[] }
  | { type: "turn_state_changed"; event_type: "state:created" | "state:updated"; new_value: TurnStateView; old_value?: TurnStateView }
  | { type: "compaction_done"; mode: "async" | "sync"; summary_text: string; tokens_before: number; compaction_entry_id: string; tail_start_id: string | null };

// ------------------------------------------------------------------ policy and approvals (§3)

export const policyCheckRequest = z.object({ function_id: z.string().min(1), args: z.unknown().optional() });
export type PolicyDecision =
  | { decision: "allow"; rule_id: string }
  | { decision: "deny"; rule_id: string; rule_action: "deny"; matched_constraint?: { field: string; operator: string; value: unknown } }
  | { decision: "needs_approval" };

export const POLICY_TIMEOUT_MS = 5_000;

export interface DenialEnvelope {
  schema_version: 1;
  status: "denied";
  denied_by: "permissions" | "user" | "gate_unavailable";
  function_id: string;
  rule_id?: string;
  rule_action?: "deny";
  matched_constraint?: { field: string; operator: string; value: unknown };
  args_excerpt?: unknown;
  reason: string;
}

export const APPROVALS_SCOPE = "approvals";
export const approvalResolveRequest = z.object({
  session_id: z.string().min(1),
  function_call_id: z.string().min(1),
  decision: z.enum(["allow", "deny"]),
  reason: z.string().max(2000).nullable().optional(),
});
/** What `approvals/<sid>/<cid>` holds; `aborted` is written by the abort path only. */
export interface ApprovalDecision {
  decision: "allow" | "deny" | "aborted";
  reason: string | null;
}

// ------------------------------------------------------------------ session storage (§5)

export type SessionEntry =
  | { type: "message"; id: string; parent_id: string | null; message: AgentMessage; timestamp: number }
  | { type: "custom_message"; id: string; parent_id: string | null; custom_type: string; content: unknown; display?: string; details?: unknown; timestamp: number }
  | { type: "branch_summary"; id: string; parent_id: string | null; summary: string; from_id: string; timestamp: number }
  | { type: "compaction"; id: string; parent_id: string | null; summary: string; tokens_before: number; tail_start_id?: string | null; details: { read_files: string[]; modified_files: string[] }; timestamp: number };

export interface SessionMeta {
  session_id: string;
  display_name?: string;
  cwd?: string;
  created_at: number;
  updated_at: number;
  branch_count: number;
}

/** Per-session inboxes the orchestrator drains at `steering_check`. */
export const INBOX_STEERING = "steering";
export const INBOX_FOLLOWUP = "followup";

// ------------------------------------------------------------------ credentials (§1.5)

export type Credential =
  | { type: "api_key"; key: string; base_url?: string }
  | { type: "oauth"; access_token: string; refresh_token?: string; expires_at?: number; scopes?: string[]; provider_extra?: unknown };
