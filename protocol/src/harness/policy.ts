// The policy worker's contract (docs/harness-contracts.md §3): `policy::check_permissions`.
import { z } from "zod";

/** `session_id`: the session the model calls for; the state and stream reads it may make are those
 * of its own session (the orchestrator passes it; without it only the scopes the file names). */
export const policyCheckRequest = z.object({
  function_id: z.string().min(1),
  args: z.unknown().optional(),
  session_id: z.string().min(1).optional(),
  with_version: z.boolean().optional(),
  /** Judge under this `iii-permissions.yaml` text instead of the rules in force (a replay's policy
   * override, docs/cassettes.md): only the answer changes, the floor still applies. */
  policy: z.string().min(1).max(64_000).optional(),
});
/** Names the rules that decided (it changes whenever the file's text does), so a person's decision
 * can be tied to the policy it was asked under. Answered when the request sets `with_version`. */
const policyVersion = { policy_version: z.string().optional() };
export const matchedConstraintSchema = z.object({ field: z.string(), operator: z.string(), value: z.unknown() });
/** `policy::check_permissions`'s answer. */
export const policyDecisionSchema = z.discriminatedUnion("decision", [
  z.object({ decision: z.literal("allow"), rule_id: z.string(), ...policyVersion }),
  z.object({
    decision: z.literal("deny"),
    rule_id: z.string(),
    rule_action: z.literal("deny"),
    matched_constraint: matchedConstraintSchema.optional(),
    ...policyVersion,
  }),
  z.object({ decision: z.literal("needs_approval"), ...policyVersion }),
]);
export type PolicyDecision = z.infer<typeof policyDecisionSchema>;
/** `policy::version`: the version of the rules in force. */
export const policyVersionResponse = z.object({ policy_version: z.string() });
/** The rule ids of the policy's structural floor (the kernel; reads outside the session's own
 * scopes): denials no permission mode or list lifts. */
export const POLICY_FLOOR_RULE_IDS: readonly string[] = ["kernel", "session-scope"];

export const POLICY_TIMEOUT_MS = 5_000;
