// The approval gate's contracts (docs/harness-contracts.md §1.7, §3.3, §3.7): decisions, permission
// modes, the inbox of pending calls, and the DenialEnvelope a model reads when a call is not run.
import { z } from "zod";
import { type PolicyDecision, POLICY_FLOOR_RULE_IDS } from "./policy.ts";
import type { StateKey } from "./state.ts";
import type { FunctionCall } from "./turn-orchestrator.ts";

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

/** The approval gate's state: a person's decision on a parked call (`approvals`, an
 * ApprovalDecision; the orchestrator reads it and wakes on its state trigger), a session's
 * permission settings (`approval_settings`), and the inbox of calls waiting for a person
 * (`approval_pending`, a PendingApprovalRecord). */
export const approvalState = {
  decision: (sessionId: string, functionCallId: string): StateKey => ({
    scope: APPROVALS_SCOPE,
    key: pendingKey(sessionId, functionCallId),
  }),
  settings: (sessionId: string): StateKey => ({ scope: APPROVAL_SETTINGS_SCOPE, key: sessionId }),
  pending: (sessionId: string, functionCallId: string): StateKey => ({
    scope: APPROVAL_PENDING_SCOPE,
    key: pendingKey(sessionId, functionCallId),
  }),
};

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

// The DenialEnvelope's format: what redaction of `args_excerpt` replaces and bounds (§3.3). The
// orchestrator builds the envelopes (workers/turn-orchestrator/src/denials.ts).

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

// ------------------------------------------------------------------ approval::* (§3.4, §3.7)

/** Longest session or call id accepted: ids are generated (UUIDs, provider call ids of ~40
 * characters); 256 each keeps the state key far below the engine's 1024-character key limit. */
export const APPROVAL_MAX_ID_LENGTH = 256;
/** Most records one `approval::list-pending` page holds. */
export const APPROVAL_LIST_PENDING_MAX = 200;

/** One segment of the `<sid>/<cid>` key: a `/` would make the key ambiguous (and the orchestrator's
 * trigger only accepts keys of exactly two segments). */
const keySegment = z
  .string()
  .min(1)
  .max(APPROVAL_MAX_ID_LENGTH)
  .refine((s) => !s.includes("/"), "must not contain '/'");
const sessionRequest = z.object({ session_id: keySegment });
/** A function id, or a prefix ending in `*` (`weather::*`). */
const listEntryRequest = z.object({
  session_id: keySegment,
  function_id: z
    .string()
    .trim()
    .min(1)
    .max(300)
    .refine((s) => !s.slice(0, -1).includes("*"), "only a final '*' is a wildcard"),
});
/** What a settings change answers: the session's settings as written. */
const settingsResponse = z.object({ settings: approvalSettingsSchema });

/** Request and response of each `approval::*` function a person's UI calls. */
export const approvalGateContracts = {
  /** `ok: false`: the payload was not a decision (`invalid_payload`), or it could not be written
   * (`resume_failed`); the call stays parked either way. */
  "approval::resolve": {
    request: approvalResolveRequest.extend({ session_id: keySegment, function_call_id: keySegment }),
    response: z.union([
      z.object({ ok: z.literal(true) }),
      z.object({ ok: z.literal(false), error: z.enum(["invalid_payload", "resume_failed"]) }),
    ]),
  },
  "approval::set-mode": {
    request: z.object({ session_id: keySegment, mode: z.enum(PERMISSION_MODES) }),
    response: settingsResponse,
  },
  "approval::get-settings": {
    request: sessionRequest,
    response: z.object({ settings: approvalSettingsSchema, source: z.enum(["stored", "defaults"]) }),
  },
  "approval::add-always-allow": { request: listEntryRequest, response: settingsResponse },
  "approval::remove-always-allow": { request: listEntryRequest, response: settingsResponse },
  "approval::approve-always": { request: listEntryRequest, response: settingsResponse },
  "approval::clear-settings": { request: sessionRequest, response: z.object({ cleared: z.boolean() }) },
  /** null: the call is decided, or was never parked. */
  "approval::get-pending": {
    request: z.object({ session_id: keySegment, function_call_id: keySegment }),
    response: z.object({ pending: pendingApprovalRecordSchema }).nullable(),
  },
  "approval::list-pending": {
    request: z.object({
      session_id: keySegment.optional(),
      limit: z.number().int().min(1).max(APPROVAL_LIST_PENDING_MAX).optional(),
      cursor: z
        .string()
        .regex(/^\d{1,9}$/, "cursor is the next_cursor of the page before")
        .optional(),
    }),
    response: z.object({ pending: z.array(pendingApprovalRecordSchema), next_cursor: z.string().optional() }),
  },
} as const;
export type ApprovalGateFunctionId = keyof typeof approvalGateContracts;

/** The call a denial is about: its function id and arguments (a `FunctionCall` fits). */
export type DeniedCall = Pick<FunctionCall, "function_id" | "arguments">;
export type MatchedConstraint = NonNullable<DenialEnvelope["matched_constraint"]>;

/** The default reason of an operator's denial (§3.3). */
export const USER_DENIAL_DEFAULT_REASON = "Rejected by operator.";
