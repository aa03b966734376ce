// The structural floor under the rules of an `iii-permissions.yaml`: what no file can open to a
// model. Checked before any rule is read, in every mode:
//   1. the kernel: a function marked `model: "never"` where it is registered (the harness's own
//      workers and the engine's writing built-ins), and every built-in a model may not call;
//   2. state and stream reads reach only the calling session's own scopes, or ones the file names;
// and after the rules, for a call they allow without asking:
//   3. trust: the id must be served by the engine, the deployed Worker, or a principal the file's
//      `trusted:` names for it; from anyone else it waits for a person (a squatter's copy of an
//      auto-allowed id is never run on the model's word alone).
// Pure: the catalog entry comes from the caller (index.ts reads it from the engine).
import { BUILTINS, MODEL_CALLABLE_BUILTINS, SERVED_BY_DEPLOYMENT, SERVED_BY_ENGINE, isModelNever } from "@iii-edge/protocol";
import type { PolicyDecision } from "@iii-edge/protocol/harness";
import { evaluate, type CompiledPolicy } from "./rules.ts";

/** The rule id a refusal of a kernel function reports: no rule of the file decided it. */
export const KERNEL_RULE_ID = "kernel";
/** The rule id a refusal of a read outside the session's own scopes reports. */
export const SCOPE_RULE_ID = "session-scope";

/** A session's own state scopes: `session:<session_id>` and anything under `session:<session_id>:`.
 * A worker that keeps data a model may read back for one session writes it there. */
export const SESSION_SCOPE_PREFIX = "session:";
export const sessionScope = (sessionId: string): string => `${SESSION_SCOPE_PREFIX}${sessionId}`;

/** What the policy knows of the function from the engine's catalog (engine::functions::info);
 * undefined when no such function is registered. */
export interface CatalogFacts {
  metadata?: Record<string, unknown>;
  served_by?: string;
}

/** The state reads a model may make (each names one `scope`). */
const STATE_READS: ReadonlySet<string> = new Set(["state::get", "state::list", "state::list_keys"]);
/** The stream reads a model may make (each names a `stream_name` and a `group_id`). */
const STREAM_READS: ReadonlySet<string> = new Set(["stream::get", "stream::list", "stream::list_items"]);

const isBuiltin = (id: string): boolean => Object.hasOwn(BUILTINS, id);
const field = (args: unknown, name: string): string | undefined => {
  if (args === null || typeof args !== "object" || Array.isArray(args)) return undefined;
  const v = (args as Record<string, unknown>)[name];
  return typeof v === "string" ? v : undefined;
};

function kernelDeny(functionId: string): PolicyDecision {
  return {
    decision: "deny",
    rule_id: KERNEL_RULE_ID,
    rule_action: "deny",
    matched_constraint: { field: "function_id", operator: "kernel", value: functionId },
  };
}

/** 1: a kernel function, whatever the rules say. A built-in is judged by the engine's own list even
 * when the catalog could not say (the engine marks the same ones). */
export function isKernel(functionId: string, facts: CatalogFacts | undefined): boolean {
  if (isBuiltin(functionId) && !MODEL_CALLABLE_BUILTINS.has(functionId)) return true;
  return facts !== undefined && isModelNever(facts.metadata);
}

/** 2: a state or stream read outside the session's own scopes and the file's lists; undefined when
 * the call is no such read or stays inside them. */
export function scopeRefusal(
  policy: CompiledPolicy,
  functionId: string,
  args: unknown,
  sessionId: string | undefined,
): PolicyDecision | undefined {
  if (STATE_READS.has(functionId)) {
    const scope = field(args, "scope");
    if (scope === undefined) return undefined; // the built-in refuses it: invalid_arguments
    const own = sessionId !== undefined && (scope === sessionScope(sessionId) || scope.startsWith(`${sessionScope(sessionId)}:`));
    if (own || policy.stateScopes.some((m) => m(scope))) return undefined;
    return {
      decision: "deny",
      rule_id: SCOPE_RULE_ID,
      rule_action: "deny",
      matched_constraint: { field: "scope", operator: "not_owned_by_session", value: scope },
    };
  }
  if (STREAM_READS.has(functionId)) {
    const stream = field(args, "stream_name");
    const group = field(args, "group_id");
    if (stream === undefined || group === undefined) return undefined;
    // A session's groups (its agent::events, for one) are named by its id.
    if ((sessionId !== undefined && group === sessionId) || policy.streamNames.some((m) => m(stream))) return undefined;
    return {
      decision: "deny",
      rule_id: SCOPE_RULE_ID,
      rule_action: "deny",
      matched_constraint: { field: "group_id", operator: "not_owned_by_session", value: `${stream}/${group}` },
    };
  }
  return undefined;
}

/** 3: is `servedBy` trusted to serve `functionId` under this policy? */
export function isTrustedServer(policy: CompiledPolicy, functionId: string, servedBy: string | undefined): boolean {
  if (servedBy === SERVED_BY_ENGINE || servedBy === SERVED_BY_DEPLOYMENT) return true;
  if (servedBy === undefined) return false;
  return policy.trusted.some((t) => t.matches(functionId) && (t.principals.includes(servedBy) || t.principals.includes("*")));
}

/** The whole decision for one call of the model. `facts` undefined: nothing by that id is registered
 * (the rules decide; a call that goes ahead then answers function_not_found). */
export function decide(
  policy: CompiledPolicy,
  functionId: string,
  args: unknown,
  sessionId: string | undefined,
  facts: CatalogFacts | undefined,
): PolicyDecision {
  if (isKernel(functionId, facts)) return kernelDeny(functionId);
  const scoped = scopeRefusal(policy, functionId, args, sessionId);
  if (scoped) return scoped;
  const decision = evaluate(policy, functionId, args);
  if (decision.decision === "allow" && facts !== undefined && !isTrustedServer(policy, functionId, facts.served_by))
    return { decision: "needs_approval" };
  return decision;
}
