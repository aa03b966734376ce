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
export const SECRET_KEYS: readonly string[] = ["password", "token", "api_key", "apikey", "secret", "auth", "authorization", "access_key", "access_token", "refresh_token", "private_key"];

/** Whether a key names a secret: one of SECRET_KEYS or ending in `_<one of them>`, compared in lower
 * case, with `-` read as `_` and camelCase split (`apiKey`, `X-Api-Key`, `githubToken` count). */
export function isSecretKey(key: string): boolean {
  const forms = new Set([key.toLowerCase().replaceAll("-", "_"), key.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toLowerCase().replaceAll("-", "_")]);
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
  if (matchedConstraint) envelope.matched_constraint = { field: matchedConstraint.field, operator: matchedConstraint.operator, value: redactArgs(matchedConstraint.value) };
  return envelope;
}

/** The default reason of an operator's denial (§3.3). */
export const USER_DENIAL_DEFAULT_REASON = "Rejected by operator.";

/** A person denied the call (an `approval::resolve` decision `deny`); `reason` is their text. */
export function userDenyEnvelope(call: DeniedCall, reason?: string | null): DenialEnvelope {
  const text = typeof reason === "string" && reason.trim() !== "" ? reason.trim() : USER_DENIAL_DEFAULT_REASON;
  return { schema_version: 1, status: "denied", denied_by: "user", function_id: call.function_id, args_excerpt: redactArgs(call.arguments), reason: clipString(text, 2_000) };
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
    if (v.length < MIN_CREDENTIALS_KEY_LENGTH) return { ok: false, reason: `${source} is shorter than ${MIN_CREDENTIALS_KEY_LENGTH} characters; ${CREDENTIALS_KEY_HELP}` };
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
  const bin = atob(body.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(body.length / 4) * 4, "="));
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
export async function verifyAuthProof(key: CredentialsCryptoKey, provider: string, proof: AuthProof | undefined, now: number = Date.now()): Promise<AuthProofCheck> {
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
  transports: z.array(z.enum(["sse", "websocket", "auto"])).max(3).optional(),
  pricing: z
    .object({ input_per_1m: perMillion, output_per_1m: perMillion, cache_read_per_1m: perMillion.optional(), cache_write_per_1m: perMillion.optional() })
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

const orchestratorSessionId = z.string().min(1).max(128).regex(/^[^/]+$/, "session_id must not contain '/'");
/** `turn::get_state`, `turn::stop`. */
export const turnSessionRequest = z.object({ session_id: orchestratorSessionId });
export interface TurnStopResponse {
  session_id: string;
  /** false: nothing to stop (no record, or the run already ended). */
  stopping: boolean;
  state: TurnState | null;
}
/** `run::steer`: plain text becomes a user message. */
export const runSteerRequest = z.object({ session_id: orchestratorSessionId, message: z.union([z.string().min(1).max(200_000), agentMessageSchema]) });
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
