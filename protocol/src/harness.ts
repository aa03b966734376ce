// The agent harness's contracts (docs/harness-contracts.md; a bare §N below is a section there): the messages
// and events every harness worker and UI reads, and the payloads of the functions workers call on
// each other. Workers share these through `@iii-edge/protocol/harness`, never through each other's
// files. Field names are snake_case, the names iii's own harness uses, so its UIs and workers read
// ours.
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
}
export interface AwaitingApproval {
  function_call_id: string;
  function_id: string;
  args: unknown;
  pending_at?: number;
  expires_at?: number;
  /** What a person approves (§3.7): the hash of `args` after the before-call hooks, and the policy version. */
  args_hash?: string;
  policy_version?: string;
}
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
  | {
      type: "function_execution_end";
      function_call_id: string;
      function_id: string;
      result: FunctionResult;
      is_error: boolean;
      duration_ms: number;
    }
  | { type: "turn_end"; message: AgentMessage; function_results: FunctionResultMessage[] }
  | { type: "agent_end"; messages: AgentMessage[] }
  | { type: "turn_state_changed"; event_type: "state:created" | "state:updated"; new_value: TurnStateView; old_value?: TurnStateView }
  | {
      type: "compaction_done";
      mode: "async" | "sync";
      summary_text: string;
      tokens_before: number;
      compaction_entry_id: string;
      tail_start_id: string | null;
    };

// ------------------------------------------------------------------ policy and approvals (§3)

/** `session_id`: the session the model calls for; the state and stream reads it may make are those
 * of its own session (the orchestrator passes it; without it only the scopes the file names). */
export const policyCheckRequest = z.object({
  function_id: z.string().min(1),
  args: z.unknown().optional(),
  session_id: z.string().min(1).optional(),
  with_version: z.boolean().optional(),
});
export type PolicyDecision = (
  | { decision: "allow"; rule_id: string }
  | { decision: "deny"; rule_id: string; rule_action: "deny"; matched_constraint?: { field: string; operator: string; value: unknown } }
  | { decision: "needs_approval" }
) & {
  /** Names the rules that decided (it changes whenever the file's text does), so a person's decision
   * can be tied to the policy it was asked under. Answered when the request sets `with_version`. */
  policy_version?: string;
};
/** The rule ids of the policy's structural floor (the kernel; reads outside the session's own
 * scopes): denials no permission mode or list lifts. */
export const POLICY_FLOOR_RULE_IDS: readonly string[] = ["kernel", "session-scope"];

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
/** `args_hash` (optional): the hash of the arguments the person was shown (`PendingApprovalRecord.args_hash`);
 * an allow for other arguments than the call now has does not count, and the person is asked again. */
export const approvalResolveRequest = z.object({
  session_id: z.string().min(1),
  function_call_id: z.string().min(1),
  decision: z.enum(["allow", "deny"]),
  reason: z.string().max(2000).nullable().optional(),
  args_hash: z
    .string()
    .regex(/^[0-9a-f]{64}$/, "args_hash is the 64 hex digits of a pending call's args_hash")
    .optional(),
});
/** What a person approved: the function, the hash of its arguments after the before-call hooks, and
 * the policy version it was asked under. An allow carrying one counts only while all three still hold. */
export interface ApprovalBinding {
  function_id: string;
  args_hash: string;
  policy_version: string;
}
/** What `approvals/<sid>/<cid>` holds; `aborted` is written by the abort path only. `expired`: the
 * sweep denied a call nobody decided in time. `binding`: what the allow was for (absent on a decision
 * taken when nothing was pending yet, and on a sub-agent's join wake). */
export interface ApprovalDecision {
  decision: "allow" | "deny" | "aborted";
  reason: string | null;
  expired?: boolean;
  binding?: ApprovalBinding;
}

// ------------------------------------------------------------------ permission modes (§3.7)
// Per session a mode and two lists (iii's approval-gate permission model), kept by approval-gate in
// `approval_settings/<sid>` and read by the orchestrator for every call the policy does not settle
// with its floor.

export const PERMISSION_MODES = ["manual", "auto", "full"] as const;
export type PermissionMode = (typeof PERMISSION_MODES)[number];
export const APPROVAL_SETTINGS_SCOPE = "approval_settings";
/** `<sid>/<cid>` → PendingApprovalRecord: the inbox of calls waiting for a person, nothing else. */
export const APPROVAL_PENDING_SCOPE = "approval_pending";
/** Topics the inbox publishes on (engine pub/sub: bind `subscribe` or `durable:subscriber`). */
export const APPROVAL_PENDING_CREATED = "approval::pending-created";
export const APPROVAL_PENDING_RESOLVED = "approval::pending-resolved";
/** How long a call waits for a person before the sweep denies it (iii's default, 30 min). */
export const APPROVAL_PENDING_TIMEOUT_MS = 1_800_000;
/** Longest list a session keeps: a hand-curated trust profile is a few dozen ids. */
export const APPROVAL_LIST_MAX = 256;

export interface AlwaysAllowEntry {
  function_id: string;
  granted_at: number;
  granted_by: "user_click" | "seed";
}
export interface ApprovalSettings {
  mode: PermissionMode;
  /** Consulted in `auto` only. */
  always_allow: AlwaysAllowEntry[];
  /** Remembered "approve always" decisions: honoured in every mode. */
  approved_always: AlwaysAllowEntry[];
  mode_set_at: number;
}
const alwaysAllowEntry = z.object({
  function_id: z.string().min(1).max(300),
  granted_at: z.number(),
  granted_by: z.enum(["user_click", "seed"]),
});
export const approvalSettingsSchema = z.object({
  mode: z.enum(PERMISSION_MODES),
  always_allow: z.array(alwaysAllowEntry).max(APPROVAL_LIST_MAX),
  approved_always: z.array(alwaysAllowEntry).max(APPROVAL_LIST_MAX),
  mode_set_at: z.number(),
});
/** A stored settings record, or undefined when there is none or it cannot be read. */
export function parseApprovalSettings(v: unknown): ApprovalSettings | undefined {
  const r = approvalSettingsSchema.safeParse(v);
  return r.success ? r.data : undefined;
}
/** What a session without a stored record gets: `manual`, both lists empty. */
export const defaultApprovalSettings = (): ApprovalSettings => ({ mode: "manual", always_allow: [], approved_always: [], mode_set_at: 0 });

/** A list entry names a function id exactly, or a prefix with a final `*` (`weather::*`). */
export function listMatches(entries: readonly AlwaysAllowEntry[], functionId: string): boolean {
  return entries.some((e) =>
    e.function_id.endsWith("*") ? functionId.startsWith(e.function_id.slice(0, -1)) : e.function_id === functionId,
  );
}

const MODE_RANK: Record<PermissionMode, number> = { manual: 0, auto: 1, full: 2 };

/** A sub-agent's settings under its parent's: the stricter mode, and only the list entries both
 * hold (a child never gets what its parent lacks). A child with no record of its own has its
 * parent's. */
export function narrowSettings(own: ApprovalSettings | undefined, parent: ApprovalSettings): ApprovalSettings {
  if (!own) return parent;
  const both = (mine: AlwaysAllowEntry[], theirs: AlwaysAllowEntry[]) =>
    mine.filter((e) => theirs.some((p) => p.function_id === e.function_id) || listMatches(theirs, e.function_id));
  return {
    mode: MODE_RANK[own.mode] <= MODE_RANK[parent.mode] ? own.mode : parent.mode,
    always_allow: both(own.always_allow, parent.always_allow),
    approved_always: both(own.approved_always, parent.approved_always),
    mode_set_at: own.mode_set_at,
  };
}

/** Why a call was allowed without asking, or what is left to do. */
export type ModeOutcome =
  | { decision: "allow"; by: "policy" | "full" | "approved_always" | "always_allow" }
  | { decision: "deny" }
  | { decision: "needs_approval" };

/** The permission model over the policy's answer: the floor's denials first (never lifted), then `full`, the
 * remembered decisions (every mode), `always_allow` (auto only), and the file's rules. */
export function applyPermissionMode(settings: ApprovalSettings, functionId: string, policy: PolicyDecision): ModeOutcome {
  if (policy.decision === "deny" && POLICY_FLOOR_RULE_IDS.includes(policy.rule_id)) return { decision: "deny" };
  if (settings.mode === "full") return { decision: "allow", by: "full" };
  if (listMatches(settings.approved_always, functionId)) return { decision: "allow", by: "approved_always" };
  if (settings.mode === "auto" && listMatches(settings.always_allow, functionId)) return { decision: "allow", by: "always_allow" };
  if (policy.decision === "allow") return { decision: "allow", by: "policy" };
  return { decision: policy.decision };
}

/** JSON with object keys sorted at every level, so equal values hash equally whatever their key order. */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== "object") return JSON.stringify(v) ?? "null";
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(",")}}`;
}
/** SHA-256 of a call's arguments (canonical JSON), hex. */
export async function approvalArgsHash(args: unknown): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(canonicalJson(args ?? {})));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}
/** Whether an allow still counts for the call as it is now: which part changed, or undefined. */
export function bindingChange(approved: ApprovalBinding, now: ApprovalBinding): keyof ApprovalBinding | undefined {
  if (approved.function_id !== now.function_id) return "function_id";
  if (approved.args_hash !== now.args_hash) return "args_hash";
  if (approved.policy_version !== now.policy_version) return "policy_version";
  return undefined;
}

/** The inbox record of one parked call (iii's PendingApprovalRecord, plus what the person approves:
 * `args_hash` and `policy_version`). Arguments are redacted: safe to forward to a notification. */
export interface PendingApprovalRecord {
  session_id: string;
  turn_id: string;
  function_call_id: string;
  function_id: string;
  arguments_excerpt: unknown;
  pending_at: number;
  expires_at: number;
  depth: number;
  args_hash: string;
  policy_version: string;
}
export const pendingApprovalRecordSchema = z.looseObject({
  session_id: z.string(),
  turn_id: z.string(),
  function_call_id: z.string(),
  function_id: z.string(),
  arguments_excerpt: z.unknown(),
  pending_at: z.number(),
  expires_at: z.number(),
  depth: z.number(),
  args_hash: z.string(),
  policy_version: z.string(),
});
export type PendingOutcome = "allow" | "deny" | "timeout" | "aborted";
export interface PendingResolvedEvent {
  session_id: string;
  turn_id: string;
  function_call_id: string;
  function_id: string;
  outcome: PendingOutcome;
  reason?: string;
  resolved_at: number;
}
export const pendingKey = (sessionId: string, functionCallId: string): string => `${sessionId}/${functionCallId}`;

/** The `approval::pending-resolved` event for a pending record just deleted (`old`, as
 * `state::delete` answered it), or undefined when there was no readable record: whichever step
 * deletes the record announces it, so the event fires once. */
export function pendingResolved(
  old: unknown,
  outcome: PendingOutcome,
  resolvedAt: number,
  reason?: string | null,
): { record: PendingApprovalRecord; event: PendingResolvedEvent } | undefined {
  const rec = pendingApprovalRecordSchema.safeParse(old);
  if (!rec.success) return undefined;
  const event: PendingResolvedEvent = {
    session_id: rec.data.session_id,
    turn_id: rec.data.turn_id,
    function_call_id: rec.data.function_call_id,
    function_id: rec.data.function_id,
    outcome,
    resolved_at: resolvedAt,
  };
  if (reason) event.reason = reason;
  return { record: rec.data as PendingApprovalRecord, event };
}

/** What a person left a call waiting too long reads (the sweep's denial). */
export function expiredReason(timeoutMs: number): string {
  const minutes = Math.round(timeoutMs / 60_000);
  const span = minutes >= 1 ? `${minutes} min` : `${Math.round(timeoutMs / 1000)} s`;
  return `No one approved this call within ${span}, so it was not run. Ask the user before trying it again.`;
}

// ------------------------------------------------------------------ session storage (§5)

export type SessionEntry =
  | { type: "message"; id: string; parent_id: string | null; message: AgentMessage; timestamp: number }
  | {
      type: "custom_message";
      id: string;
      parent_id: string | null;
      custom_type: string;
      content: unknown;
      display?: string;
      details?: unknown;
      timestamp: number;
    }
  | { type: "branch_summary"; id: string; parent_id: string | null; summary: string; from_id: string; timestamp: number }
  | {
      type: "compaction";
      id: string;
      parent_id: string | null;
      summary: string;
      tokens_before: number;
      tail_start_id?: string | null;
      details: { read_files: string[]; modified_files: string[] };
      timestamp: number;
    };

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

// ------------------------------------------------------------------ provisioning (§1.3, §6.5)

/** The schema of the one provider tool (§3.1): every run request carries exactly this. */
export const AGENT_TRIGGER_FUNCTION: AgentFunction = {
  name: AGENT_TRIGGER,
  description:
    "Call any iii function by its id. `function` is the function id (for example `state::get`); `payload` is that function's request object. Returns the function's result.",
  parameters: {
    type: "object",
    properties: {
      function: { type: "string", description: "The id of the function to call, e.g. `engine::functions::list`." },
      payload: { type: "object", description: "The function's request, as its request schema describes." },
    },
    required: ["function"],
  },
  label: AGENT_TRIGGER,
  execution_mode: "parallel",
  prepare_arguments_supported: false,
};

/** `provisioning::prepare`: the stored run request is read leniently (fields it does not use pass). */
export const provisioningPrepareRequest = z.object({
  session_id: z.string().min(1).max(128),
  run_request: z.looseObject({
    provider: z.string().min(1).max(64).optional(),
    model: z.string().min(1).max(200),
    mode: z.enum(MODES).nullable().optional(),
    system_prompt: z.string().max(200_000).nullable().optional(),
    skills: z.array(z.string().min(1).max(500)).max(50).optional(),
    isolation: z.boolean().optional(),
    sandbox_id: z.string().min(1).max(200).nullable().optional(),
  }),
});
export type ProvisioningPrepareRequest = z.infer<typeof provisioningPrepareRequest>;
export interface ProvisioningPrepareResponse {
  system_prompt: string;
  function_schemas: AgentFunction[];
  model_meta: Model | null;
  /** Present when the run asked for isolation: the sandbox its calls use. */
  sandbox_id?: string;
}
export const provisioningReleaseRequest = z.object({
  session_id: z.string().min(1).max(128),
  sandbox_id: z.string().min(1).max(200).nullable().optional(),
});

// ------------------------------------------------------------------ harness (§1.1)

/** Stream a console joins (group `all`) to see new sessions: one item per session, id = session id. */
export const AGENT_SESSIONS_STREAM = "agent::sessions";
export const AGENT_SESSIONS_GROUP = "all";
/** An `agent::sessions` item. */
export interface SessionsChanged {
  added: string[];
}

// ------------------------------------------------------------------ approval-gate (§1.7, §3.3)
// The DenialEnvelope builders and the redaction of `args_excerpt`, shared by the orchestrator
// (which builds the envelopes) and the approval gate (which owns the format).

/** What a redacted value becomes. */
export const REDACTED = "<redacted>";
/** What a value nested deeper than REDACTION_MAX_DEPTH becomes. */
export const REDACTION_MAX_DEPTH_MARKER = "<max-depth>";
/** What a reference back to one of its own containers (a cycle) becomes. */
export const REDACTION_CYCLE_MARKER = "<cycle>";
/** What every value past the REDACTION_MAX_NODES budget becomes. */
export const REDACTION_TRUNCATED_MARKER = "<truncated>";
/** Longest string kept in an excerpt, in Unicode code points (§3.3); longer ones end in "…". */
export const REDACTION_MAX_STRING_CODE_POINTS = 256;
/** Deepest nesting copied (§3.3): deeper values become REDACTION_MAX_DEPTH_MARKER. */
export const REDACTION_MAX_DEPTH = 64;
/** Most values one excerpt copies: a graph that shares sub-objects (possible in-process, never from
 * JSON) could otherwise cost 2^depth visits; 10 000 is far more than a model's arguments hold. */
export const REDACTION_MAX_NODES = 10_000;
/** Keys whose values never reach an excerpt (§3.3), and any key ending in `_<one of them>`. */
export const SECRET_KEYS: readonly string[] = [
  "password",
  "token",
  "api_key",
  "apikey",
  "secret",
  "auth",
  "authorization",
  "access_key",
  "access_token",
  "refresh_token",
  "private_key",
];

/** Whether a key names a secret: one of SECRET_KEYS or ending in `_<one of them>`, compared in lower
 * case, with `-` read as `_` and camelCase split (`apiKey`, `X-Api-Key`, `githubToken` count). */
export function isSecretKey(key: string): boolean {
  const forms = new Set([
    key.toLowerCase().replaceAll("-", "_"),
    key
      .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
      .toLowerCase()
      .replaceAll("-", "_"),
  ]);
  for (const form of forms) for (const secret of SECRET_KEYS) if (form === secret || form.endsWith(`_${secret}`)) return true;
  return false;
}

/** `s` clipped to REDACTION_MAX_STRING_CODE_POINTS code points plus "…" (never splits a surrogate pair). */
export function clipString(s: string, max = REDACTION_MAX_STRING_CODE_POINTS): string {
  if (s.length <= max) return s; // fewer UTF-16 units than the limit: fewer code points too
  let n = 0;
  let end = 0;
  for (const ch of s) {
    if (n === max) return `${s.slice(0, end)}…`;
    n++;
    end += ch.length;
  }
  return s;
}

/** A redacted copy of `value` for an `args_excerpt` (§3.3): secret-looking keys → REDACTED, strings
 * clipped, nesting capped at REDACTION_MAX_DEPTH, cycles and oversized graphs cut. Never mutates or
 * throws on its input; the copy is plain JSON-shaped data. */
export function redactArgs(value: unknown): unknown {
  const ancestors = new Set<object>();
  let visited = 0;
  const copy = (v: unknown, depth: number): unknown => {
    if (typeof v === "string") return clipString(v);
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "function" || typeof v === "symbol") return undefined;
    if (v === null || typeof v !== "object") return v;
    if (depth >= REDACTION_MAX_DEPTH) return REDACTION_MAX_DEPTH_MARKER;
    if (ancestors.has(v)) return REDACTION_CYCLE_MARKER;
    if (++visited > REDACTION_MAX_NODES) return REDACTION_TRUNCATED_MARKER;
    ancestors.add(v);
    try {
      if (Array.isArray(v)) return v.map((item) => copy(item, depth + 1));
      // fromEntries defines own properties, so a `__proto__` key stays a key.
      return Object.fromEntries(Object.keys(v).map((k) => [k, isSecretKey(k) ? REDACTED : copy(readProperty(v, k), depth + 1)]));
    } finally {
      ancestors.delete(v);
    }
  };
  return copy(value, 0);
}

/** A property read that a throwing getter cannot break. */
function readProperty(o: object, k: string): unknown {
  try {
    return (o as Record<string, unknown>)[k];
  } catch {
    return REDACTED;
  }
}

/** A short JSON rendering of a constraint value for a reason text. */
function describeValue(v: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(redactArgs(v)) ?? String(v);
  } catch {
    text = String(v);
  }
  return clipString(text, 120);
}

/** The call a denial is about: its function id and arguments (a `FunctionCall` fits). */
export type DeniedCall = Pick<FunctionCall, "function_id" | "arguments">;
export type MatchedConstraint = NonNullable<DenialEnvelope["matched_constraint"]>;

/** The policy denied the call (`policy::check_permissions` answered `deny`). */
export function permissionsDenyEnvelope(call: DeniedCall, ruleId: string, matchedConstraint?: MatchedConstraint): DenialEnvelope {
  const constraint = matchedConstraint
    ? ` because argument \`${matchedConstraint.field}\` ${matchedConstraint.operator} ${describeValue(matchedConstraint.value)}`
    : "";
  const envelope: DenialEnvelope = {
    schema_version: 1,
    status: "denied",
    denied_by: "permissions",
    function_id: call.function_id,
    rule_id: ruleId,
    rule_action: "deny",
    args_excerpt: redactArgs(call.arguments),
    reason:
      `Permission denied: the call to \`${call.function_id}\` was blocked by policy rule \`${ruleId}\`${constraint}. ` +
      `It was not run. ${matchedConstraint ? "Try different arguments, or" : "Try"} another function that does what you need; do not retry the same call.`,
  };
  if (matchedConstraint)
    envelope.matched_constraint = {
      field: matchedConstraint.field,
      operator: matchedConstraint.operator,
      value: redactArgs(matchedConstraint.value),
    };
  return envelope;
}

/** The default reason of an operator's denial (§3.3). */
export const USER_DENIAL_DEFAULT_REASON = "Rejected by operator.";

/** A person denied the call (an `approval::resolve` decision `deny`); `reason` is their text. */
export function userDenyEnvelope(call: DeniedCall, reason?: string | null): DenialEnvelope {
  const text = typeof reason === "string" && reason.trim() !== "" ? reason.trim() : USER_DENIAL_DEFAULT_REASON;
  return {
    schema_version: 1,
    status: "denied",
    denied_by: "user",
    function_id: call.function_id,
    args_excerpt: redactArgs(call.arguments),
    reason: clipString(text, 2_000),
  };
}

/** The gate could not decide (policy unreachable, timed out, a transport failure): fail closed.
 * `detail` says what failed, e.g. "policy unreachable: timeout" or "trigger_failed: …". */
export function gateUnavailableEnvelope(functionId: string, detail: string, args?: unknown): DenialEnvelope {
  const envelope: DenialEnvelope = {
    schema_version: 1,
    status: "denied",
    denied_by: "gate_unavailable",
    function_id: functionId,
    reason:
      `The call to \`${functionId}\` was not run: the permission gate could not be consulted (${clipString(detail, 500)}). ` +
      "Nothing was executed. Continue without it, or try again later.",
  };
  if (args !== undefined) envelope.args_excerpt = redactArgs(args);
  return envelope;
}

// ------------------------------------------------------------------ auth-credentials (§1.5, §6.4)
// `auth::get_token` hands out secrets, so only a provider may call it: the request carries a proof
// `{ts, sig}` — `sig` = base64url(HMAC-SHA256(proofKey, "auth::get_token\n<provider>\n<ts>")) — made
// with a key both workers derive from the same CREDENTIALS_KEY (or AUTH_SECRET when only that is
// set). A browser or an agent never holds that key, so it cannot ask for a token. Web Crypto only.

/** Engine state scope of the encrypted credentials (key = provider name). */
export const AUTH_CREDENTIALS_SCOPE = "auth_credentials";
/** How far a proof's `ts` may be from the verifier's clock: covers clock skew between a provider
 * process and the credentials worker plus a slow engine hop, and bounds how long a captured proof
 * can be replayed. */
export const AUTH_PROOF_MAX_SKEW_MS = 60_000;
/** Shorter keys could be guessed offline from a copied state row. */
export const MIN_CREDENTIALS_KEY_LENGTH = 16;
/** Provider names: what `auth::*` and `models::*` accept (lower case, like the env map's keys). */
export const PROVIDER_NAME_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;
export const providerName = z.string().regex(PROVIDER_NAME_PATTERN, "provider must be 1–64 of a-z 0-9 . _ - (lower case)");

/** What a caller sends to prove it is a provider. `ts` is Unix milliseconds. */
export const authProof = z.object({ ts: z.number().int(), sig: z.string().min(1).max(128) });
export type AuthProof = z.infer<typeof authProof>;

/** `auth::get_token`: `proof` is optional in the schema so that a missing one answers `forbidden`
 * (what it is) rather than `invalid_input`. */
export const authGetTokenRequest = z.object({ provider: providerName, proof: authProof.optional() });
/** Bound on a stored secret: real keys and OAuth tokens are well under 4 KiB. */
export const MAX_CREDENTIAL_SECRET_LENGTH = 8_192;
const secretText = z.string().min(1, "must not be empty").max(MAX_CREDENTIAL_SECRET_LENGTH);
export const credentialSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("api_key"), key: secretText, base_url: z.url().max(2_048).optional() }),
  z.object({
    type: z.literal("oauth"),
    access_token: secretText,
    refresh_token: secretText.optional(),
    expires_at: z.number().int().nonnegative().optional(),
    scopes: z.array(z.string().max(256)).max(64).optional(),
    provider_extra: z.unknown().optional(),
  }),
]);
/** `auth::set_token {provider, ...Credential}`. */
export const authSetTokenRequest = z.intersection(z.object({ provider: providerName }), credentialSchema);
export const authProviderRequest = z.object({ provider: providerName });
export type CredentialSource = "stored" | "environment";
export interface AuthStatus {
  configured: boolean;
  source?: CredentialSource;
  /** `api-key:<first 6>…` or `oauth` — never the secret. */
  label?: string;
  /** Why a stored credential is unusable (e.g. it was encrypted under another CREDENTIALS_KEY). */
  problem?: string;
}

/** The key material both workers derive their keys from. `source` is part of every derivation
 * label, so AUTH_SECRET never yields the keys a CREDENTIALS_KEY of the same text would. */
export interface CredentialsKeyMaterial {
  secret: string;
  source: "CREDENTIALS_KEY" | "AUTH_SECRET";
}
export type CredentialsKeyResult = { ok: true; material: CredentialsKeyMaterial } | { ok: false; reason: string };

export const CREDENTIALS_KEY_HELP =
  "set CREDENTIALS_KEY (a random string of at least 16 characters, e.g. `openssl rand -base64 32`) in the environment of `npm start`, " +
  "or as a Worker secret (`wrangler secret put CREDENTIALS_KEY`), for both the auth-credentials and the providers workers";

/** CREDENTIALS_KEY, else AUTH_SECRET, else a reason saying how to configure one. */
export function credentialsKeyMaterial(env: Readonly<Record<string, unknown>>): CredentialsKeyResult {
  for (const source of ["CREDENTIALS_KEY", "AUTH_SECRET"] as const) {
    const v = env[source];
    if (typeof v !== "string" || v.trim() === "") continue;
    if (v.length < MIN_CREDENTIALS_KEY_LENGTH)
      return { ok: false, reason: `${source} is shorter than ${MIN_CREDENTIALS_KEY_LENGTH} characters; ${CREDENTIALS_KEY_HELP}` };
    return { ok: true, material: { secret: v, source } };
  }
  return { ok: false, reason: `no CREDENTIALS_KEY is configured; ${CREDENTIALS_KEY_HELP}` };
}

/** A Web Crypto key, named through `crypto.subtle` so the type resolves under the DOM lib (workerd)
 * and under @types/node alike. */
export type CredentialsCryptoKey = Awaited<ReturnType<typeof crypto.subtle.deriveKey>>;

const utf8 = new TextEncoder();
/** Fixed HKDF salt: the key material is already secret; the salt only separates this use of it. */
const CREDENTIALS_HKDF_SALT = "iii-edge/auth-credentials/v1";

/** HKDF-SHA-256 from the material: `proof` → an HMAC-SHA-256 key, `encrypt` → an AES-256-GCM key. */
export async function deriveCredentialsKey(material: CredentialsKeyMaterial, purpose: "proof" | "encrypt"): Promise<CredentialsCryptoKey> {
  const base = await crypto.subtle.importKey("raw", utf8.encode(material.secret), "HKDF", false, ["deriveKey"]);
  const info = utf8.encode(`${purpose} (from ${material.source})`);
  const params = { name: "HKDF", hash: "SHA-256", salt: utf8.encode(CREDENTIALS_HKDF_SALT), info };
  return purpose === "proof"
    ? crypto.subtle.deriveKey(params, base, { name: "HMAC", hash: "SHA-256", length: 256 }, false, ["sign", "verify"])
    : crypto.subtle.deriveKey(params, base, { name: "AES-GCM", length: 256 }, false, ["encrypt", "decrypt"]);
}

/** The exact text a proof signs. */
export function authProofMessage(provider: string, ts: number): string {
  return `auth::get_token\n${provider}\n${ts}`;
}

export function base64url(bytes: Uint8Array): string {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
/** Bytes of a base64url (or base64) text; undefined when it is not one. */
export function fromBase64url(text: string): Uint8Array<ArrayBuffer> | undefined {
  const body = text.replace(/=+$/, "");
  if (!/^[A-Za-z0-9_\-+/]*$/.test(body) || body.length % 4 === 1) return undefined;
  const bin = atob(
    body
      .replace(/-/g, "+")
      .replace(/_/g, "/")
      .padEnd(Math.ceil(body.length / 4) * 4, "="),
  );
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** A proof for `auth::get_token {provider}` made now (or at `now`). `key` from deriveCredentialsKey(…, "proof"). */
export async function signAuthProof(key: CredentialsCryptoKey, provider: string, now: number = Date.now()): Promise<AuthProof> {
  const ts = Math.trunc(now);
  const mac = await crypto.subtle.sign("HMAC", key, utf8.encode(authProofMessage(provider, ts)));
  return { ts, sig: base64url(new Uint8Array(mac)) };
}

export type AuthProofCheck = { ok: true } | { ok: false; reason: "missing" | "expired" | "bad_signature" };

/** Checks the signature (constant time, by crypto.subtle.verify) and the clock window. */
export async function verifyAuthProof(
  key: CredentialsCryptoKey,
  provider: string,
  proof: AuthProof | undefined,
  now: number = Date.now(),
): Promise<AuthProofCheck> {
  if (!proof) return { ok: false, reason: "missing" };
  const sig = fromBase64url(proof.sig);
  if (!sig) return { ok: false, reason: "bad_signature" };
  const valid = await crypto.subtle.verify("HMAC", key, sig, utf8.encode(authProofMessage(provider, proof.ts)));
  if (!valid) return { ok: false, reason: "bad_signature" };
  if (Math.abs(now - proof.ts) > AUTH_PROOF_MAX_SKEW_MS) return { ok: false, reason: "expired" };
  return { ok: true };
}

// ------------------------------------------------------------------ providers (§1.4, §6.6)

/** `provider::<name>::stream`'s answer. The outcome is in the channel; `status` repeats it. */
export interface ProviderStreamResponse {
  ok: true;
  status: "done" | "error" | "cancelled" | "channel_unavailable";
  error_kind?: ErrorKind;
}

/** Engine state scope of registered models (key `<provider>:<id>`, value a Model). */
export const MODELS_SCOPE = "models";
export const MODEL_CAPABILITIES = ["tools", "vision", "streaming", "thinking", "cache"] as const;
export type ModelCapability = (typeof MODEL_CAPABILITIES)[number];

const modelId = z.string().min(1).max(200);
const tokenCount = z.number().int().positive();
const perMillion = z.number().nonnegative();
export const modelSchema = z.object({
  id: modelId,
  provider: providerName,
  api: z.string().max(64).optional(),
  display_name: z.string().max(200).optional(),
  context_window: tokenCount,
  max_output_tokens: tokenCount.optional(),
  input_limit: tokenCount.optional(),
  supports_thinking: z.boolean().optional(),
  supports_tools: z.boolean().optional(),
  supports_vision: z.boolean().optional(),
  supports_cache: z.boolean().optional(),
  transports: z
    .array(z.enum(["sse", "websocket", "auto"]))
    .max(3)
    .optional(),
  pricing: z
    .object({
      input_per_1m: perMillion,
      output_per_1m: perMillion,
      cache_read_per_1m: perMillion.optional(),
      cache_write_per_1m: perMillion.optional(),
    })
    .optional(),
}) satisfies z.ZodType<Model>;
/** A MODELS_OVERRIDES entry: any fields of a model, laid over the built-in entry of the same
 * provider and id (a model the table lacks needs `context_window`). */
export const modelOverrideSchema = modelSchema.partial().required({ provider: true, id: true });
export const modelsListRequest = z.object({ provider: providerName.optional(), capability: z.string().max(64).optional() });
export const modelsGetRequest = z.object({ provider: providerName, id: modelId });
export const modelsSupportsRequest = z.object({ provider: providerName, id: modelId, capability: z.string().min(1).max(64) });
export const modelsRegisterRequest = z.object({ model: modelSchema });
/** `known: false` = the model is not in the catalog: its capabilities are unknown, not absent. */
export interface ModelsSupportsResponse {
  supported: boolean;
  known: boolean;
}

// ------------------------------------------------------------------ turn-orchestrator (§1.2, §2.4, §2.7, §4.1)

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
export interface TurnStopResponse {
  session_id: string;
  /** false: nothing to stop (no record, or the run already ended). */
  stopping: boolean;
  state: TurnState | null;
}
/** `run::steer`: plain text becomes a user message. */
export const runSteerRequest = z.object({
  session_id: orchestratorSessionId,
  message: z.union([z.string().min(1).max(200_000), agentMessageSchema]),
});
/** Most `agent::events` items one `run::events` page returns. */
export const RUN_EVENTS_MAX_LIMIT = 1_000;
/** `run::events`: `after` is an item id (`<sid>-<seq>`) from an earlier page or a stream push. */
export const runEventsRequest = z.object({
  session_id: orchestratorSessionId,
  after: z.string().min(1).max(300).nullable().optional(),
  limit: z.number().int().min(1).max(RUN_EVENTS_MAX_LIMIT).optional(),
});
export interface RunEventsResponse {
  events: { item_id: string; data: AgentEvent }[];
  /** Pass as `after` next time: the last item returned, or the `after` given when none was new. */
  next: string | null;
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
      z.object({
        function_call_id: z.string(),
        function_id: z.string(),
        args: z.unknown(),
        pending_at: z.number().optional(),
        expires_at: z.number().optional(),
        args_hash: z.string().optional(),
        policy_version: z.string().optional(),
        /** A parked `harness::join` (not a person's approval): the child it waits for. */
        held_by: z.string().optional(),
        child_session_id: z.string().optional(),
      }),
    )
    .optional(),
  error: z.object({ kind: z.string(), message: z.string() }).optional(),
  /** The text of the run's last assistant message; null when it has none. */
  final_text: z.string().nullable(),
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

// ------------------------------------------------------------------ hook-fanout (§1.10, §6.3, §7 item 1)
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
export type HookResolution = "expected" | "quiescence" | "deadline" | "no_subscribers" | "publish_failed";

export interface PublishCollectResponse {
  event_id: string;
  /** The replies (de-duplicated by item id), in arrival order. */
  replies: unknown[];
  merged: unknown;
  /** `subscribers`: how many subscribed functions the publish reached. */
  publish: { ok: true; subscribers: number } | { ok: false; error: string };
  /** Present (true) when the publish itself failed. */
  publish_failed?: true;
  resolved_by: HookResolution;
  /** How long the collection took, publish included. */
  elapsed_ms: number;
}

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

// ------------------------------------------------------------------ budget-tracker (§1.9, §6.2)
// LLM spend per budget (a budget is tagged with a `workspace_id` and/or an `agent_id`; a run names
// the one it is charged to with `budget_id`). Money is **integer micro-USD** (1 USD = 1 000 000 µUSD)
// in storage and in every sum; the `_usd` fields of answers are derived from them for display.
// Every mutation is a compare-and-set on the budget's state row (no in-process lock), so any
// number of copies of the worker may run. The orchestrator calls `budget::check` before each
// provider call (with a hold on the estimate) and `budget::record` after it (with the round's id).

export const BUDGETS_SCOPE = "budgets";
/** Archived windows (rollovers and resets) of one budget live in their own scope, so one budget's
 * log is listed without reading every other budget's. */
export const budgetSpendLogScope = (budgetId: string): string => `budget_spend_log:${budgetId}`;
/** User price overrides, key `<provider>:<model>` (they win over the models catalog's `pricing`). */
export const BUDGET_PRICES_SCOPE = "budget_prices";
export const MICROS_PER_USD = 1_000_000;
/** Prices are per this many tokens (the catalog's `*_per_1m`). */
export const TOKENS_PER_PRICE_UNIT = 1_000_000;
export const BUDGET_PERIODS = ["day", "week", "month"] as const;
export type BudgetPeriod = (typeof BUDGET_PERIODS)[number];
/** How long `budget::exempt` lets a principal through (§6.2: 24 h). */
export const BUDGET_EXEMPTION_MS = 24 * 60 * 60 * 1000;
/** Largest ceiling (1e9 USD): far past any LLM budget, and a sum of spends under it stays an exact
 * integer in a JSON number (2^53 ≈ 9e15 µUSD). */
export const MAX_BUDGET_MICROS = 1_000_000_000_000_000;
/** Largest cost one record may add (1e6 USD): a model call costs cents to dollars; more is a bug. */
export const MAX_RECORD_MICROS = 1_000_000_000_000;
/** Most tokens of one kind in one call's usage: context windows are ~1e6 tokens. */
export const MAX_USAGE_TOKENS = 1_000_000_000;
/** Highest price accepted (10 000 USD per 1M tokens): current models cost 0.05–100. */
export const MAX_PRICE_PER_1M_USD = 10_000;

/** Why `budget::check` answered as it did, in the order it decides (§6.2): the first three let the
 * call through; `unpriced_model` (an estimate in tokens for a model with no price) and
 * `ceiling_exceeded` refuse it. */
export const BUDGET_CHECK_REASONS = ["paused", "not_enforced", "exempt", "unpriced_model", "ceiling_exceeded"] as const;
export type BudgetCheckReason = (typeof BUDGET_CHECK_REASONS)[number];

export const BUDGET_ID_PATTERN = /^[A-Za-z0-9._:@-]{1,200}$/;
export const budgetIdSchema = z.string().regex(BUDGET_ID_PATTERN, "budget_id must be 1–200 of A-Z a-z 0-9 . _ : @ -");
const budgetTag = z.string().min(1).max(200);
const microsAmount = z.number().int().nonnegative().max(MAX_BUDGET_MICROS);
const usdAmount = z
  .number()
  .nonnegative()
  .max(MAX_BUDGET_MICROS / MICROS_PER_USD);
const tokens = z.number().int().nonnegative().max(MAX_USAGE_TOKENS);
const pricePer1m = z.number().nonnegative().max(MAX_PRICE_PER_1M_USD);
/** Round ids (`<run_id>:<turn_count>`) and other caller-chosen idempotency keys. */
const recordIdSchema = z.string().min(1).max(300);
const budgetModelId = z.string().min(1).max(200);

export const budgetCreateRequest = z
  .object({
    /** Chosen by the caller (idempotent creation by name) or generated (`b_<uuid>`). */
    budget_id: budgetIdSchema.optional(),
    ceiling_micros: microsAmount.positive().optional(),
    ceiling_usd: usdAmount.positive().optional(),
    period: z.enum(BUDGET_PERIODS),
    workspace_id: budgetTag.optional(),
    agent_id: budgetTag.optional(),
    name: z.string().min(1).max(200).optional(),
    enforced: z.boolean().optional(),
    paused: z.boolean().optional(),
  })
  .refine(
    (r) => (r.ceiling_micros === undefined) !== (r.ceiling_usd === undefined),
    "give exactly one of ceiling_micros, ceiling_usd (> 0)",
  );
export const budgetIdRequest = z.object({ budget_id: budgetIdSchema });
/** Most budgets one `budget::list` page returns. */
export const BUDGET_LIST_MAX_LIMIT = 500;
export const budgetListRequest = z.object({
  workspace_id: budgetTag.optional(),
  agent_id: budgetTag.optional(),
  limit: z.number().int().min(1).max(BUDGET_LIST_MAX_LIMIT).optional(),
  /** Offset into the scope's rows (what `next_offset` of the previous page said). */
  offset: z.number().int().min(0).optional(),
});
/** The whitelist `budget::update` takes (`period` is fixed at creation: changing it would split a
 * window in two; create another budget). Anything else is refused. */
export const budgetUpdateRequest = z
  .strictObject({
    budget_id: budgetIdSchema,
    ceiling_micros: microsAmount.positive().optional(),
    ceiling_usd: usdAmount.positive().optional(),
    name: z.string().min(1).max(200).nullable().optional(),
    workspace_id: budgetTag.nullable().optional(),
    agent_id: budgetTag.nullable().optional(),
  })
  .refine((r) => r.ceiling_micros === undefined || r.ceiling_usd === undefined, "give at most one of ceiling_micros, ceiling_usd");
/** A call's cost in tokens of a model, priced by the worker (override, else the catalog). */
export const budgetTokenEstimate = z.object({
  provider: providerName,
  model: budgetModelId,
  input_tokens: tokens,
  output_tokens: tokens.default(0),
  cache_read_tokens: tokens.default(0),
  cache_write_tokens: tokens.default(0),
});
export const budgetCheckRequest = z
  .object({
    budget_id: budgetIdSchema,
    estimated_cost_micros: microsAmount.optional(),
    estimated_cost_usd: usdAmount.optional(),
    estimate: budgetTokenEstimate.optional(),
    /** Who is asking (the orchestrator sends the session id): `budget::exempt` names principals. */
    principal_id: z.string().min(1).max(300).optional(),
    /** Reserve the estimate under this id until `budget::record {record_id: hold_id}` settles it (or
     * BUDGET_HOLD_TTL_MS passes), so concurrent calls cannot all pass on the same remaining money. */
    hold_id: recordIdSchema.optional(),
  })
  .refine(
    (r) => [r.estimated_cost_micros, r.estimated_cost_usd, r.estimate].filter((v) => v !== undefined).length <= 1,
    "give at most one of estimated_cost_micros, estimated_cost_usd, estimate",
  );
/** A hold older than this is dropped: a provider call ends within 300 s and its step's queue
 * deadline is 360 s, after which the step is redelivered and holds again under the same id. */
export const BUDGET_HOLD_TTL_MS = 360_000;
export interface BudgetCheckResponse {
  budget_id: string;
  allowed: boolean;
  reason?: BudgetCheckReason;
  estimated_cost_micros: number;
  /** ceiling − spent − held (holds of other calls), negative when overspent. */
  remaining_micros: number;
  spent_micros: number;
  held_micros: number;
  ceiling_micros: number;
  remaining_usd: number;
  estimated_cost_usd: number;
  /** Whether the estimate is now held under `hold_id`. */
  held: boolean;
  period_resets_at: number;
}
export const budgetUsageSchema = z.object({
  input: tokens.optional(),
  output: tokens.optional(),
  cache_read: tokens.optional(),
  cache_write: tokens.optional(),
  reasoning: tokens.optional(),
  cost_usd: z.number().nonnegative().optional(),
});
export const budgetRecordRequest = z
  .object({
    budget_id: budgetIdSchema,
    /** Idempotency key: a repeat of a recent id adds nothing (and settles its hold). */
    record_id: recordIdSchema.optional(),
    cost_micros: z.number().int().nonnegative().max(MAX_RECORD_MICROS).optional(),
    cost_usd: z
      .number()
      .nonnegative()
      .max(MAX_RECORD_MICROS / MICROS_PER_USD)
      .optional(),
    /** A provider's usage (`AssistantMessage.usage`): priced by `provider` + `model`. */
    usage: budgetUsageSchema.optional(),
    provider: providerName.optional(),
    model: budgetModelId.optional(),
    principal_id: z.string().min(1).max(300).optional(),
  })
  .refine(
    (r) => [r.cost_micros, r.cost_usd, r.usage].filter((v) => v !== undefined).length === 1,
    "give exactly one of cost_micros, cost_usd, usage",
  )
  .refine(
    (r) => r.usage === undefined || (r.provider !== undefined && r.model !== undefined),
    "usage needs provider and model (to price it)",
  );
export interface BudgetRecordResponse {
  budget_id: string;
  /** false: `record_id` was recorded before; nothing was added. */
  recorded: boolean;
  cost_micros: number;
  /** false: usage of a model with no price (and no `usage.cost_usd`): recorded as 0. */
  priced: boolean;
  spent_micros: number;
  remaining_micros: number;
  spent_usd: number;
  remaining_usd: number;
  cost_usd: number;
  /** Alerts this record crossed (each fires once per period). */
  alerts_fired: string[];
}
/** Most alerts and exemptions one budget keeps (each is checked on every record/check). */
export const BUDGET_MAX_ALERTS = 32;
export const BUDGET_MAX_EXEMPTIONS = 64;
export const budgetAlertSetRequest = z.object({
  budget_id: budgetIdSchema,
  /** Given: replaces that alert (or adds it under this id). */
  alert_id: z.string().min(1).max(200).optional(),
  /** A fraction of the ceiling in (0, 1]. */
  threshold_pct: z.number().gt(0).max(1),
  callback_function_id: z.string().min(1).max(300),
  /** Spread into the callback's payload (an object). */
  callback_payload: z.record(z.string(), z.unknown()).optional(),
});
/** What an alert's callback gets (triggered fire-and-forget once per period). */
export interface BudgetAlertPayload {
  alert_id: string;
  budget_id: string;
  threshold_pct: number;
  spent_micros: number;
  ceiling_micros: number;
  spent_usd: number;
  ceiling_usd: number;
  period_start_at: number;
  [key: string]: unknown;
}
export const budgetUsageRequest = z.object({
  budget_id: budgetIdSchema,
  /** `all`: every archived window and the current one; `current` or the budget's period: the current one. */
  window: z.union([z.literal("all"), z.literal("current"), z.enum(BUDGET_PERIODS)]).default("all"),
});
export const budgetEnforceRequest = z.object({ budget_id: budgetIdSchema, enforced: z.boolean() });
export const budgetExemptRequest = z.object({
  budget_id: budgetIdSchema,
  principal_id: z.string().min(1).max(300),
  reason: z.string().min(1).max(2_000),
});
export const budgetPauseRequest = z.object({ budget_id: budgetIdSchema, paused: z.boolean().default(true) });
/** Most spend-log entries one `budget::log` page returns. */
export const BUDGET_LOG_MAX_LIMIT = 1_000;
export const budgetLogRequest = z.object({
  budget_id: budgetIdSchema,
  limit: z.number().int().min(1).max(BUDGET_LOG_MAX_LIMIT).optional(),
  offset: z.number().int().min(0).optional(),
});
export const budgetSetPricesRequest = z
  .object({
    provider: providerName,
    model: budgetModelId,
    input_per_1m: pricePer1m.optional(),
    output_per_1m: pricePer1m.optional(),
    /** Default: the input price (as the providers price cache tokens without one). */
    cache_read_per_1m: pricePer1m.optional(),
    cache_write_per_1m: pricePer1m.optional(),
    /** Remove the override (the catalog's price applies again). */
    clear: z.boolean().optional(),
  })
  .refine(
    (r) => (r.clear === true) !== (r.input_per_1m !== undefined && r.output_per_1m !== undefined),
    "give input_per_1m and output_per_1m, or clear:true",
  );
export const budgetGetPricesRequest = z.object({ provider: providerName, model: budgetModelId });

/** Prices in integer micro-USD per 1M tokens. */
export interface BudgetPrices {
  input_micros_per_1m: number;
  output_micros_per_1m: number;
  cache_read_micros_per_1m: number;
  cache_write_micros_per_1m: number;
}
export interface BudgetPricesResponse {
  provider: string;
  model: string;
  /** `override` (budget::set_prices), `catalog` (models::get pricing) or `none` (unpriced). */
  source: "override" | "catalog" | "none";
  prices: BudgetPrices | null;
}
export interface BudgetAlert {
  alert_id: string;
  threshold_pct: number;
  callback_function_id: string;
  callback_payload?: Record<string, unknown>;
  /** The window (its `period_start_at`) the alert last fired in. */
  last_fired_period_start?: number;
}
export interface BudgetExemption {
  principal_id: string;
  reason: string;
  expires_at: number;
}
/** What callers see of a budget (`budget::get`, `list`, mutations), already rolled over to now. */
export interface BudgetView {
  budget_id: string;
  workspace_id?: string;
  agent_id?: string;
  name?: string;
  period: BudgetPeriod;
  ceiling_micros: number;
  spent_micros: number;
  held_micros: number;
  remaining_micros: number;
  records_count: number;
  ceiling_usd: number;
  spent_usd: number;
  remaining_usd: number;
  period_start_at: number;
  period_resets_at: number;
  enforced: boolean;
  paused: boolean;
  alerts: BudgetAlert[];
  exemptions: BudgetExemption[];
  created_at: number;
  updated_at: number;
}
/** One closed window (`budget::log`, `budget::usage`'s `by_period`). */
export interface BudgetSpendLogEntry {
  budget_id: string;
  /** Stable and sortable: `day:2026-11-30`, `week:2026-11-30` (its Monday), `month:2026-11`;
   * a manual reset adds `:reset-<ms>`. */
  log_key: string;
  kind: "rollover" | "reset";
  period: BudgetPeriod;
  period_start: number;
  period_end: number;
  spent_micros: number;
  spent_usd: number;
  records_count: number;
}

// ------------------------------------------------------------------ session tree (§5.2, §5.3)
// Branching a session (session-storage: `session-tree::fork|clone|tree|branches|set_active_leaf|
// get_entry|export`) and running on a branch (turn-orchestrator: `run::resume|rerun_from|fork`).

const treeSessionId = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[^/]+$/, "session_id must not contain '/'");
const treeEntryId = z.string().min(1).max(256);
/** Longest request key of a fork / clone (it names the copy, so a repeat finds it). */
export const MAX_TREE_REQUEST_KEY_LENGTH = 256;
const treeRequestKey = z.string().min(1).max(MAX_TREE_REQUEST_KEY_LENGTH);
const treeDisplayName = z.string().max(200);

/** `session-tree::fork`: a new session whose path is the source's path up to `from_entry_id`.
 * Without `new_session_id` the id is derived from (source, entry, request_key): a repeat of the
 * same request answers the same copy (`created: false`). */
export const sessionForkRequest = z.object({
  source_session_id: treeSessionId,
  from_entry_id: treeEntryId,
  new_session_id: treeSessionId.optional(),
  request_key: treeRequestKey.optional(),
  display_name: treeDisplayName.optional(),
});
/** `session-tree::clone`: every entry of every branch, same rules for the new id. */
export const sessionCloneRequest = z.object({
  source_session_id: treeSessionId,
  new_session_id: treeSessionId.optional(),
  request_key: treeRequestKey.optional(),
  display_name: treeDisplayName.optional(),
});
export type SessionCopyKind = "fork" | "clone";
/** Where a forked or cloned session came from (`session-tree::get` answers it as `origin`). */
export interface SessionOrigin {
  kind: SessionCopyKind;
  source_session_id: string;
  /** The entry a fork was taken at (its copy is the fork's first leaf); null for a clone. */
  from_entry_id: string | null;
}
export interface SessionCopyResponse extends SessionOrigin {
  session_id: string;
  /** The copy's active leaf (the copy of `from_entry_id`, or of the source's leaf). */
  leaf_id: string | null;
  entry_count: number;
  /** false: this request had made the copy already; nothing was written. */
  created: boolean;
}

/** `session-tree::tree`: the whole tree, or the subtree under `from_entry_id`. */
export const sessionTreeRequest = z.object({ session_id: treeSessionId, from_entry_id: treeEntryId.optional() });
/** One entry of a tree or branch listing: what a UI needs to draw it, never the whole message. */
export interface TreeEntry {
  entry_id: string;
  kind: string;
  depth: number;
  timestamp: number;
  /** The message's role (message and custom_message entries). */
  role?: string;
  /** The first text of the entry, flattened and cut to one line. */
  preview?: string;
  /** An assistant entry's first function call (the target of an `agent_trigger`). */
  call?: string;
  /** A function_result entry's function. */
  function_id?: string;
  child_count: number;
  /** On the path from a root to the active leaf. */
  active?: true;
}
/** A branch: a run of entries, each the only child of the one before; `children` are the branches
 * that start under its last entry. `truncated`: nested too deep for one answer — ask again with
 * `from_entry_id` = its last entry. */
export interface TreeBranch {
  entries: TreeEntry[];
  children: TreeBranch[];
  truncated?: true;
}
export interface SessionTree {
  session_id: string;
  leaf_id: string | null;
  entry_count: number;
  roots: TreeBranch[];
}

export const sessionBranchesRequest = z.object({ session_id: treeSessionId });
/** A tip of the tree (an entry nobody is the parent of). */
export interface SessionBranch extends Omit<TreeEntry, "child_count" | "active"> {
  leaf_id: string;
  /** The nearest ancestor with more than one child (where this branch left another), or null. */
  fork_point_id: string | null;
  /** The tip is the active leaf. */
  active: boolean;
}
export interface SessionBranches {
  session_id: string;
  leaf_id: string | null;
  /** Tips in all (the answer lists the newest MAX_BRANCHES). */
  total: number;
  branches: SessionBranch[];
}

/** `session-tree::set_active_leaf`: switch branch. `entry_id: null` = no leaf (the next append
 * starts a new root); `expected_leaf_id` makes it a compare-and-set (`leaf_conflict`). */
export const setActiveLeafRequest = z.object({
  session_id: treeSessionId,
  entry_id: treeEntryId.nullable(),
  expected_leaf_id: treeEntryId.nullable().optional(),
});
export interface SetActiveLeafResponse {
  session_id: string;
  leaf_id: string | null;
  previous_leaf_id: string | null;
  changed: boolean;
}

/** `session-tree::get_entry` → SessionEntryView, or null (no such entry or session). */
export const getEntryRequest = z.object({ session_id: treeSessionId, entry_id: treeEntryId });
export interface SessionEntryView {
  entry_id: string;
  parent_id: string | null;
  kind: string;
  depth: number;
  timestamp: number;
  revision: number;
  child_count: number;
  /** message and custom_message entries. */
  message?: AgentMessage;
  /** Other kinds (compaction, branch_summary, …): the stored body. */
  data?: unknown;
}

export const EXPORT_FORMATS = ["json", "markdown", "html"] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];
/** `session-tree::export`: the active path (or the path to `branch_leaf`), every entry on it. */
export const sessionExportRequest = z.object({
  session_id: treeSessionId,
  format: z.enum(EXPORT_FORMATS).default("markdown"),
  branch_leaf: treeEntryId.optional(),
});
export interface SessionExport {
  session_id: string;
  format: ExportFormat;
  content_type: string;
  leaf_id: string | null;
  entry_count: number;
  content: string;
}

// The orchestrator's side. Settings a resumed run does not name come from the session's last run
// request, else from the run request of the session it was forked / cloned from.
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

export type RunResumeResponse =
  | { session_id: string; run_id: string; started: true }
  | { session_id: string; run_id?: string; started: false; reason: "session_busy" | "already_started" };
export type RunRerunResponse = RunResumeResponse & {
  /** The entry the run answers (the edited message's copy) and where it hangs. */
  entry_id?: string;
  parent_id?: string | null;
  previous_leaf_id?: string | null;
};
export type RunForkResponse = SessionCopyResponse & { run?: RunResumeResponse };

// ------------------------------------------------------------------ context-compaction (§1.8, §5.2, §6.1)
// A session's transcript is never rewritten by summarisation: a `compaction` entry on the active
// path records the summary of everything before `tail_start_id`, and what the model is sent is
// `[summary, ...path from tail_start_id]` (compactionView). session-tree::messages keeps serving the
// raw path (storage semantics); the view is assembled by whoever sends the model a request (the
// orchestrator each round, the compaction worker for its own counting). Pruning is the one in-place
// edit: a large function output's content becomes PRUNED_OUTPUT_TEXT (session-tree::update_parts).

/** The custom type of a compaction entry's body (a CustomMessage, so `include_custom` readers get
 * a well-formed message; session storage keeps it as entry kind `compaction`). */
export const COMPACTION_CUSTOM_TYPE = "compaction";
/** What a pruned function output reads. */
export const PRUNED_OUTPUT_TEXT = "[output pruned]";
/** The tag the summary is wrapped in when the model reads it. */
export const COMPACTION_SUMMARY_TAG = "conversation-summary";
/** Longest summary stored (characters): a summary is a page of bullets; a run-away summariser is cut. */
export const MAX_COMPACTION_SUMMARY_CHARS = 64_000;
/** Most paths one compaction's `details` lists per kind (read / modified files). */
export const MAX_COMPACTION_DETAIL_FILES = 500;
/** Most outputs one session-tree::update_parts call prunes: one statement each in one batch. */
export const MAX_UPDATE_PARTS = 64;
/** Longest replacement text of a pruned output. */
export const MAX_PRUNED_TEXT_CHARS = 4_096;

const compactionSessionId = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[^/]+$/, "session_id must not contain '/'");
const compactionEntryId = z.string().min(1).max(256);
const compactionFileList = z.array(z.string().min(1).max(4_096)).max(MAX_COMPACTION_DETAIL_FILES);
export const compactionDetailsSchema = z.looseObject({
  read_files: compactionFileList.default([]),
  modified_files: compactionFileList.default([]),
});
export type CompactionDetails = z.infer<typeof compactionDetailsSchema>;

/** `session-tree::compact` (served by session-storage): append a compaction entry under `parent_id`
 * (default: the active leaf; it becomes the leaf, like an append). `tail_start_id` must be a message
 * on the path to it. A repeated `entry_id` appends nothing. → `{entry_id, appended}`. */
export const sessionCompactRequest = z.object({
  session_id: compactionSessionId,
  summary: z.string().min(1).max(MAX_COMPACTION_SUMMARY_CHARS),
  tokens_before: z.number().int().nonnegative().max(1_000_000_000),
  details: compactionDetailsSchema.default({ read_files: [], modified_files: [] }),
  parent_id: compactionEntryId.optional(),
  tail_start_id: compactionEntryId.nullable().optional(),
  entry_id: compactionEntryId.optional(),
});
export type SessionCompactRequest = z.input<typeof sessionCompactRequest>;
/** Most compaction records `session-tree::compactions` returns (the newest ones). */
export const MAX_COMPACTIONS_LISTED = 50;
/** `session-tree::compactions` → `{compactions: CompactionRecord[]}`: the compaction entries on the
 * active path (or the path to `branch_leaf`), oldest first. */
export const sessionCompactionsRequest = z.object({
  session_id: compactionSessionId,
  branch_leaf: compactionEntryId.optional(),
  limit: z.number().int().min(1).max(MAX_COMPACTIONS_LISTED).optional(),
});
/** `session-tree::update_parts`: replace each function_result entry's content with one text block
 * (`text`, default PRUNED_OUTPUT_TEXT) and merge `{compacted_at}` into its details. Every entry must
 * exist and be a function result, else nothing changes. → `{updated, unchanged, skipped}` (skipped:
 * changed by someone else between the read and the write; try again). */
export const sessionUpdatePartsRequest = z.object({
  session_id: compactionSessionId,
  parts: z
    .array(z.object({ entry_id: compactionEntryId, text: z.string().min(1).max(MAX_PRUNED_TEXT_CHARS).optional() }))
    .min(1)
    .max(MAX_UPDATE_PARTS),
});
export interface SessionUpdatePartsResponse {
  updated: { entry_id: string; revision: number }[];
  unchanged: string[];
  skipped: string[];
}

/** A compaction entry as `session-tree::compactions` returns it. `after_message_id`: the nearest
 * message entry before it on the path (null: none) — where its "tail right after the compaction"
 * starts when `tail_start_id` is null. */
export interface CompactionRecord {
  entry_id: string;
  parent_id: string | null;
  after_message_id: string | null;
  summary: string;
  tokens_before: number;
  tail_start_id: string | null;
  details: CompactionDetails;
  timestamp: number;
}

/** The synthetic message the model reads the summary as (§6.1 read side): an assistant
 * message with no model/provider, so no provider mistakes it for one of its own turns. */
export function compactionSummaryMessage(summary: string, timestamp = 0): AssistantMessage {
  return {
    role: "assistant",
    content: [{ type: "text", text: `<${COMPACTION_SUMMARY_TAG}>\n${summary}\n</${COMPACTION_SUMMARY_TAG}>` }],
    stop_reason: "end",
    model: "",
    provider: "",
    timestamp,
  };
}

export interface CompactionView<E> {
  /** The summary as a message (its entry id is the compaction entry's), or null without a compaction. */
  summary: { entry_id: string; message: AgentMessage } | null;
  /** The path's messages the model still reads verbatim, oldest first. */
  messages: E[];
}

/**
 * What the model reads of a path (`entries`: its messages, oldest first, as session-tree::messages
 * returns them) given the latest compaction on it: the summary, then the messages from
 * `tail_start_id` on. A null or missing `tail_start_id` starts right after the compaction entry
 * (not at the path's first message, which would send the whole summarised history again).
 */
export function compactionView<E extends { entry_id: string }>(
  entries: readonly E[],
  latest: CompactionRecord | null | undefined,
): CompactionView<E> {
  if (!latest) return { summary: null, messages: [...entries] };
  let start = latest.tail_start_id ? entries.findIndex((e) => e.entry_id === latest.tail_start_id) : -1;
  if (start < 0) start = latest.after_message_id === null ? 0 : entries.findIndex((e) => e.entry_id === latest.after_message_id) + 1;
  return {
    summary: { entry_id: latest.entry_id, message: compactionSummaryMessage(latest.summary, latest.timestamp) },
    messages: entries.slice(Math.max(0, start)),
  };
}

/** The item id of a `compaction_done` the compaction worker writes to `agent::events` itself (async
 * and manual compactions; a sync one is emitted by the orchestrator with its own ids): the id of the
 * `turn_end` item that woke it with one more digit. The orchestrator's ids are fixed-width digits,
 * so this sorts right after that turn_end and before every later event, never collides with one,
 * and is still an event id `run::events` accepts as `after`. */
export const COMPACTION_EVENT_SUFFIX = { async: "1", manual: "2" } as const;
export const compactionEventItemId = (turnEndItemId: string, mode: keyof typeof COMPACTION_EVENT_SUFFIX): string =>
  `${turnEndItemId}${COMPACTION_EVENT_SUFFIX[mode]}`;

const compactionLimit = z.object({
  context: z.number().int().nonnegative(),
  input: z.number().int().nonnegative().optional(),
  output: z.number().int().nonnegative().optional(),
  /** Tokens a requested thinking level may use (the model's `thinking_budgets[level]`), reserved
   * too. */
  thinking: z.number().int().nonnegative().optional(),
});
export const compactionModelSchema = z.object({ id: z.string().min(1).max(200), providerID: providerName, limit: compactionLimit });
export type CompactionModel = z.infer<typeof compactionModelSchema>;
/** The reserve is min(COMPACT_RESERVED_TOKENS, 10 % of the window): a fixed 20k would leave a small
 * model almost nothing, a fraction alone too much headroom on a big one. */
export const COMPACTION_RESERVED_TOKENS = 20_000;
export const COMPACTION_RESERVE_WINDOW_FRACTION = 0.1;
/** A model whose output limit is unknown: the output part of the fallback limits a model without a
 * catalog entry gets (32k context, 32k input, 4k output). */
export const COMPACTION_UNKNOWN_OUTPUT_TOKENS = 4_096;
/** The most a request may be: the input limit, else the window less the output limit (0 = unknown). */
export function compactionHardLimit(limit: CompactionModel["limit"]): number {
  if (!(limit.context > 0)) return 0;
  if (limit.input !== undefined && limit.input > 0) return Math.min(limit.input, limit.context);
  return Math.max(0, limit.context - (limit.output !== undefined && limit.output > 0 ? limit.output : COMPACTION_UNKNOWN_OUTPUT_TOKENS));
}
/** usable = (input_limit ?? context − max_output) − min(reserved, 10 % of context) − thinking
 * budget; 0 when the window is unknown (never compact). A request at or past it is compacted. */
export function compactionUsableTokens(limit: CompactionModel["limit"], reservedTokens: number = COMPACTION_RESERVED_TOKENS): number {
  const hard = compactionHardLimit(limit);
  if (hard === 0) return 0;
  return Math.max(
    0,
    hard - Math.min(reservedTokens, Math.floor(COMPACTION_RESERVE_WINDOW_FRACTION * limit.context)) - (limit.thinking ?? 0),
  );
}
/** A catalog entry as a compaction model. */
export function compactionModelOf(
  model: Pick<Model, "id" | "provider" | "context_window" | "max_output_tokens" | "input_limit">,
): CompactionModel {
  const limit: CompactionModel["limit"] = { context: model.context_window };
  if (model.input_limit !== undefined) limit.input = model.input_limit;
  if (model.max_output_tokens !== undefined) limit.output = model.max_output_tokens;
  return { id: model.id, providerID: model.provider, limit };
}
/** Largest system prompt / tool list compact_now takes to count a request exactly. */
export const MAX_COMPACTION_SYSTEM_PROMPT_CHARS = 400_000;
export const MAX_COMPACTION_TOOLS = 256;

/** `context-compaction::compact_now` (the orchestrator's pre-flight, before a provider call): count
 * the request exactly; when it does not fit the model's usable window, prune, then summarise,
 * waiting for the session's compaction lease. `system_prompt` and `tools` make the count exact (the
 * worker cannot know them). */
export const compactNowRequest = z.object({
  session_id: compactionSessionId,
  projected_tokens: z.number().int().nonnegative().optional(),
  last_user_message_id: compactionEntryId.nullable().optional(),
  model: compactionModelSchema,
  system_prompt: z.string().max(MAX_COMPACTION_SYSTEM_PROMPT_CHARS).nullable().optional(),
  tools: z.array(z.unknown()).max(MAX_COMPACTION_TOOLS).optional(),
  /** Compact even when the request fits. */
  force: z.boolean().optional(),
});
export type CompactNowRequest = z.input<typeof compactNowRequest>;
/** `context-compaction::compact_session` (a UI's `/compact`): always summarise; no continue prompt. */
export const compactSessionRequest = z.object({
  session_id: compactionSessionId,
  model: compactionModelSchema.partial({ limit: true }).optional(),
});
/** `context-compaction::prune_tool_outputs`. */
export const pruneToolOutputsRequest = z.object({
  session_id: compactionSessionId,
  model: compactionModelSchema.partial({ limit: true }).optional(),
});

/** `ok`: a summary was appended (`compaction_entry_id`), the window is summary + tail; `pruned`:
 * pruning alone brought it under the target; `fits`: nothing to do; `busy`: another compaction of
 * the session held the lease too long; `overflow`: even compacted it cannot fit; `empty`: nothing to
 * summarise (or the summariser said nothing). */
export type CompactNowResult =
  | {
      status: "ok";
      tail_start_id: string | null;
      tokens_before: number;
      tokens_after: number;
      auto_continued: boolean;
      compaction_entry_id: string;
      summary_text: string;
      pruned_parts: number;
      pruned_tokens: number;
    }
  | { status: "pruned"; tokens_before: number; tokens_after: number; pruned_parts: number; pruned_tokens: number }
  | { status: "fits"; tokens: number; usable: number }
  | { status: "busy" }
  | { status: "overflow"; tokens: number; limit: number }
  | { status: "empty" };
export interface PruneToolOutputsResult {
  pruned_tokens: number;
  pruned_parts: number;
  scanned_parts: number;
  busy?: true;
}

// ------------------------------------------------------------------ sub-agents (§2.2 depth/parent/child_session_id, §2.7 cascade)
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

/** The calling session and call of a model's `harness::*` call, as the sub-agents worker keys them
 * (ids go into state keys: no '/'). */
export const subAgentModelCall = z.object({ session_id: subAgentSessionIdSchema, function_call_id: functionCallIdSchema });
export type SubAgentModelCall = z.infer<typeof subAgentModelCall>;

/** `harness::spawn`. Called by a model, the parent is the calling session (`parent_session_id`, if
 * given, must be it); a worker names the parent. `function_call_id` makes the child id
 * deterministic, so a repeated spawn finds the same child. */
export const harnessSpawnRequest = z.object({
  parent_session_id: subAgentSessionIdSchema.optional(),
  task: z.string().trim().min(1, "task must say what the sub-agent should do").max(SUB_AGENT_TASK_MAX_CHARS),
  model: z.string().min(1).max(200).optional(),
  provider: z.string().min(1).max(64).optional(),
  mode: z.enum(MODES).optional(),
  max_turns: z.number().int().min(1).max(1000).optional(),
  /** A fraction of the parent budget's unallotted remaining money the child may spend. */
  budget_share: z.number().gt(0).max(1).optional(),
});
export type HarnessSpawnRequest = z.infer<typeof harnessSpawnRequest>;
export interface HarnessSpawnResponse {
  child_session_id: string;
  /** true: the child's run is started (by this call or an earlier delivery of the same spawn). */
  started: boolean;
  depth: number;
  /** true: this spawn had happened before; nothing new was started. */
  existing?: true;
  budget_id?: string;
  /** What the model should do next. */
  message: string;
}

export const harnessJoinRequest = z.object({
  child_session_id: subAgentSessionIdSchema,
  timeout_ms: z.number().int().min(0).max(JOIN_MAX_TIMEOUT_MS).optional(),
});
export type HarnessJoinRequest = z.infer<typeof harnessJoinRequest>;
/** A child that ended: its final assistant text, rounds, and why it failed if it did. */
export interface HarnessJoinResult {
  child_session_id: string;
  state: "stopped" | "failed";
  final_message: string | null;
  turn_count: number;
  error?: { kind: string; message: string };
}
/** The child is still running. Returned to the orchestrator's dispatch it parks the call (see
 * `isJoinPending`); a resumed call that still finds the child running gets it as its result. */
export interface HarnessJoinPending {
  pending: true;
  held_by: typeof HARNESS_JOIN;
  child_session_id: string;
  state: TurnState | null;
  expires_at?: number;
  message: string;
}
export type HarnessJoinResponse = HarnessJoinResult | HarnessJoinPending;

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
export interface SubAgentChildView {
  child_session_id: string;
  depth: number;
  task: string;
  created_at_ms: number;
  /** null: the child's run has not written its record yet. */
  state: TurnState | null;
  turn_count: number;
  awaiting_approval?: AwaitingApproval[];
  error?: { kind: string; message: string };
}
export interface HarnessChildrenResponse {
  parent_session_id: string;
  children: SubAgentChildView[];
}
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

/** Characters of the digest in a child id (80 bits: no collision among any realistic number). */
const CHILD_ID_DIGEST_CHARS = 20;

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The child session id of the spawn `function_call_id` made in the parent's run `parent_run_id`:
 * `<parent, cut to fit>~<digest>`, at most 128 characters. The same spawn always names the same
 * child; the same call id in another run names another. */
export async function subAgentSessionId(parentSessionId: string, parentRunId: string, functionCallId: string): Promise<string> {
  const digest = (await sha256Hex(`${parentSessionId}\n${parentRunId}\n${functionCallId}`)).slice(0, CHILD_ID_DIGEST_CHARS);
  return `${parentSessionId.slice(0, 128 - CHILD_ID_DIGEST_CHARS - 1)}~${digest}`;
}
/** The child run's `message_id` (its run id): derived from the child id, so a repeated start of the
 * same spawn is the same run. */
export async function subAgentMessageId(childSessionId: string): Promise<string> {
  return `sa_${(await sha256Hex(childSessionId)).slice(0, CHILD_ID_DIGEST_CHARS)}`;
}
