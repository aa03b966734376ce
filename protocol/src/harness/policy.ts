// The policy worker's contract (docs/harness-contracts.md §3): `policy::check_permissions`.
import { z } from "zod";

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
