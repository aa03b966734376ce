// The policy worker (spec §1.6, §3.2): `policy::check_permissions {function_id, args}` answers
// allow / deny / needs_approval from the rules of an `iii-permissions.yaml`. This entry runs inside
// the Worker and in Node; its rules come from `III_PERMISSIONS` (the file's text, which `npm start`
// passes) or the built-in default. The Node entry (./node.ts) reads and hot-reloads a file instead.
import { z } from "zod";
import { IIIError } from "@iii-edge/protocol";
import { policyCheckRequest, type PolicyDecision } from "@iii-edge/protocol/harness";
import { tracerOf, type WorkerModule, type WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { defaultPolicy, staticPolicy, type PolicySource, type PolicyState } from "./permissions-file.ts";
import { evaluate } from "./rules.ts";

export const CHECK_PERMISSIONS = "policy::check_permissions";

export interface PolicyConfig {
  source: PolicySource;
}

/** The built-in rules as a source. */
export function defaultSource(): PolicySource {
  let state: PolicyState;
  try {
    state = { ok: true, policy: defaultPolicy(), origin: "built-in default rules" };
  } catch (e) {
    // Only a broken build gets here (a test keeps the built-in text valid); fail closed all the same.
    state = { ok: false, error: `built-in default rules: ${(e as Error).message}`, origin: "built-in default rules" };
  }
  return { current: () => state };
}

/** `III_PERMISSIONS` (YAML text) when set, else the built-in rules. */
export function configFrom(env: Readonly<Record<string, unknown>>): PolicyConfig {
  const text = env.III_PERMISSIONS;
  if (typeof text === "string" && text.trim() !== "") return { source: staticPolicy(text, "III_PERMISSIONS") };
  return { source: defaultSource() };
}

export function registerPolicy(iii: WorkerSurface, config: PolicyConfig): void {
  const tracer = tracerOf(iii);
  iii.registerFunction(
    CHECK_PERMISSIONS,
    (data: unknown): PolicyDecision => {
      const req = policyCheckRequest.safeParse(data);
      if (!req.success) throw new IIIError("invalid_arguments", `${CHECK_PERMISSIONS}: ${z.prettifyError(req.error)}`);
      const state = config.source.current();
      // Fail closed: no valid rules means no answer, and the orchestrator denies the call.
      if (!state.ok) throw new IIIError("policy_unavailable", `${CHECK_PERMISSIONS}: no valid permissions (${state.error})`);
      const decision = evaluate(state.policy, req.data.function_id, req.data.args);
      // Which rule decided, in the caller's trace (the orchestrator's policy_check span is above it).
      const span = tracer.startSpan(`evaluate_permissions ${req.data.function_id}`, {
        attributes: { "iii.function_id": req.data.function_id, "iii.policy.decision": decision.decision, "iii.policy.origin": state.origin },
      });
      if ("rule_id" in decision) span.setAttribute("iii.policy.rule_id", decision.rule_id);
      span.end();
      return decision;
    },
    {
      description: "Decide whether the model may call a function: allow, deny (with the rule), or needs_approval when no rule of iii-permissions.yaml matches.",
      request_format: z.toJSONSchema(policyCheckRequest, { io: "input", unrepresentable: "any" }),
    },
  );
}

export const worker: WorkerModule<PolicyConfig> = {
  name: "policy",
  configFrom,
  register: registerPolicy,
};
export default worker;
