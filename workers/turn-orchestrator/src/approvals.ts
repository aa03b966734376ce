// Permission modes and the approval inbox, the orchestrator's half (docs/harness-contracts.md §3.7):
// - each call's decision is the policy's answer under the session's permission settings (a
//   sub-agent's narrowed by every ancestor's: a child never gets what its parent lacks);
// - a call that waits for a person gets an inbox record `approval_pending/<sid>/<cid>` carrying what
//   the person approves: the function, the hash of its arguments after the before-call hooks, and
//   the policy version. An allow counts only while all three still hold.
import {
  APPROVAL_PENDING_RESOLVED,
  APPROVAL_PENDING_TIMEOUT_MS,
  APPROVAL_SETTINGS_SCOPE,
  SUB_AGENT_MAX_DEPTH,
  applyPermissionMode,
  approvalArgsHash,
  defaultApprovalSettings,
  narrowSettings,
  parseApprovalSettings,
  pendingResolved,
  subAgentParentLink,
  type ApprovalBinding,
  type ApprovalSettings,
  type FunctionCall,
  type PendingApprovalRecord,
  type PendingOutcome,
  approvalState,
} from "@iii-edge/protocol/harness";
import { redactArgs } from "./denials.ts";
import { isRecord } from "@iii-edge/protocol";
import { callBestEffort, callRequired, type Trigger } from "./calls.ts";
import { POLICY_TIMEOUT_MS, SCOPE_RUN_REQUEST } from "./constants.ts";
import { askPolicy, gateOf, type GateDecision } from "./gate.ts";

/** A call's decision, with the policy version it was taken under (what a person's allow binds to). */
export type CallDecision = GateDecision & { policy_version?: string };

/** The stored settings of one session: undefined when it has none, or when they cannot be read
 * (a session whose record cannot be read gets no more than the defaults: nothing is lifted). */
async function storedSettings(trigger: Trigger, sid: string): Promise<ApprovalSettings | undefined> {
  try {
    return parseApprovalSettings(await callRequired<unknown>(trigger, "state::get", approvalState.settings(sid)));
  } catch (e) {
    console.warn(`turn-orchestrator: reading ${APPROVAL_SETTINGS_SCOPE}/${sid} failed (the defaults apply): ${(e as Error).message}`);
    return undefined;
  }
}

/** The parent of a sub-agent's session (its run request's `parent` link), or undefined for a top-level one. */
async function parentOf(trigger: Trigger, sid: string): Promise<string | undefined> {
  const raw = await callRequired<unknown>(trigger, "state::get", { scope: SCOPE_RUN_REQUEST, key: sid });
  if (!isRecord(raw) || raw.parent === undefined) return undefined;
  const link = subAgentParentLink.safeParse(raw.parent);
  return link.success ? link.data.session_id : undefined;
}

/** The settings a call of `sid` is judged under: its own, narrowed by each ancestor's (root first). */
export async function effectiveSettings(trigger: Trigger, sid: string): Promise<ApprovalSettings> {
  const chain = [sid];
  for (let depth = 0; depth < SUB_AGENT_MAX_DEPTH; depth++) {
    let parent: string | undefined;
    try {
      parent = await parentOf(trigger, chain[chain.length - 1]);
    } catch (e) {
      // An ancestor we cannot read could be stricter than anyone here: take nothing from the lists.
      console.warn(`turn-orchestrator: reading the parent of ${chain[chain.length - 1]} failed: ${(e as Error).message}`);
      return defaultApprovalSettings();
    }
    if (parent === undefined || chain.includes(parent)) break;
    chain.push(parent);
  }
  const records = await Promise.all(chain.map((s) => storedSettings(trigger, s)));
  // Root first: the root's own settings (or the defaults), then each descendant narrows them.
  let settings = records[records.length - 1] ?? defaultApprovalSettings();
  for (let i = records.length - 2; i >= 0; i--) settings = narrowSettings(records[i], settings);
  return settings;
}

/** The decision on one call: the policy (its floor first) under the session's permission settings.
 * A policy that cannot be reached denies (fail closed); an answer that cannot be read asks a person. */
export async function decideCall(trigger: Trigger, call: FunctionCall, sid: string, replayId?: string): Promise<CallDecision> {
  const [answer, settings] = await Promise.all([askPolicy(trigger, call, sid, true, replayId), effectiveSettings(trigger, sid)]);
  const gate = gateOf(call, answer);
  if (answer.kind !== "answer") return gate;
  const version = answer.decision.policy_version;
  const outcome = applyPermissionMode(settings, call.function_id, answer.decision);
  const decided: CallDecision =
    outcome.decision === "allow" ? { kind: "allow" } : outcome.decision === "needs_approval" ? { kind: "pending" } : gate;
  if (version !== undefined) decided.policy_version = version;
  return decided;
}

/** The policy version now, for a call about to run on a person's allow (`policy::version`: no second
 * judgement of the call, the person's allow is the decision); undefined when the policy cannot say,
 * which matches only a policy that never named a version. */
export async function currentPolicyVersion(trigger: Trigger): Promise<string | undefined> {
  try {
    const r = await trigger<unknown, unknown>({ function_id: "policy::version", payload: {}, timeoutMs: POLICY_TIMEOUT_MS });
    return isRecord(r) && typeof r.policy_version === "string" ? r.policy_version : undefined;
  } catch {
    return undefined;
  }
}

/** What a person is asked to approve: the call as it will run (after the before-call hooks). */
export async function bindingOf(target: FunctionCall, policyVersion: string | undefined): Promise<ApprovalBinding> {
  return {
    function_id: target.function_id,
    args_hash: await approvalArgsHash(target.arguments),
    policy_version: policyVersion ?? "unknown",
  };
}

/** How long a call waits for a person before the sweep denies it: `APPROVAL_PENDING_TIMEOUT_MS`
 * from the environment, else 30 min. */
export function pendingTimeoutFrom(env: Readonly<Record<string, string | undefined>> | undefined): number {
  const v = Number(env?.APPROVAL_PENDING_TIMEOUT_MS);
  return Number.isFinite(v) && v > 0 ? v : APPROVAL_PENDING_TIMEOUT_MS;
}
let pendingTimeout = APPROVAL_PENDING_TIMEOUT_MS;
/** Set once when the worker registers (the deployment's setting; one per isolate or process). */
export function configurePendingTimeout(ms: number): void {
  pendingTimeout = ms;
}
export const pendingTimeoutMs = (): number => pendingTimeout;

/** Write the inbox record of a parked call. It must land: a call nobody can see waits forever, so a
 * failure here is the caller's to turn into a denial. */
export async function writePending(trigger: Trigger, rec: PendingApprovalRecord): Promise<void> {
  await callRequired(trigger, "state::set", { ...approvalState.pending(rec.session_id, rec.function_call_id), value: rec });
}

export function pendingRecord(
  sid: string,
  runId: string,
  call: FunctionCall,
  binding: ApprovalBinding,
  now: number,
  timeoutMs: number,
): PendingApprovalRecord {
  return {
    session_id: sid,
    turn_id: runId,
    function_call_id: call.id,
    function_id: binding.function_id,
    arguments_excerpt: redactArgs(call.arguments),
    pending_at: now,
    expires_at: now + timeoutMs,
    depth: 0,
    args_hash: binding.args_hash,
    policy_version: binding.policy_version,
  };
}

/** Take a call's inbox record away (its decision was used, or the run stopped); the deleter that
 * found it announces the end on `approval::pending-resolved`. Best effort: the sweep collects a
 * record left behind. */
export async function retirePending(
  trigger: Trigger,
  sid: string,
  cid: string,
  outcome: PendingOutcome,
  reason?: string | null,
): Promise<void> {
  const old = await callBestEffort(trigger, "state::delete", approvalState.pending(sid, cid));
  const done = pendingResolved(old, outcome, Date.now(), reason);
  if (!done) return;
  await callBestEffort(trigger, "publish", { topic: APPROVAL_PENDING_RESOLVED, data: done.event });
}
