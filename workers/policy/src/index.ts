// The policy worker (docs/harness-contracts.md §1.6, §3.2): `policy::check_permissions {function_id, args}`
// answers allow / deny / needs_approval from the rules of an `iii-permissions.yaml`. This entry
// runs inside the Worker and in Node; its rules come from `III_PERMISSIONS` (the file's text, which
// `npm start` passes) or the built-in default. The Node entry (./node.ts) reads and hot-reloads a
// file instead.
import { z } from "zod";
import { IIIError, responseFormat } from "@iii-edge/protocol";
import { policyCheckRequest, type PolicyDecision, policyDecisionSchema, policyVersionResponse } from "@iii-edge/protocol/harness";
import type { InvocationContext } from "@iii-edge/sdk-edge/client";
import { tracerOf, type WorkerModule, type WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { decide, type CatalogFacts } from "./floor.ts";
import { defaultPolicy, parsePermissions, policyVersion, staticPolicy, type PolicySource, type PolicyState } from "./permissions-file.ts";
import type { CompiledPolicy } from "./rules.ts";

export { staticPolicy, type PolicySource } from "./permissions-file.ts";

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

/** The catalog lookup behind each check: a local engine call that answers in milliseconds. */
export const CATALOG_TIMEOUT_MS = 2_000;

const catalogEntry = z.looseObject({
  metadata: z.record(z.string(), z.unknown()).optional().catch(undefined),
  served_by: z.string().optional().catch(undefined),
});

/** What the engine's catalog says of `functionId` right now: its marks and who serves it. Read on
 * every check rather than cached, so a function re-registered by someone else a moment ago is judged
 * as it is now. Unreadable → policy_unavailable (the orchestrator denies: fail closed). */
async function catalogFacts(ctx: InvocationContext, functionId: string): Promise<CatalogFacts | undefined> {
  let reply: unknown;
  try {
    reply = await ctx.trigger({
      function_id: "engine::functions::info",
      payload: { function_id: functionId },
      timeoutMs: CATALOG_TIMEOUT_MS,
    });
  } catch (e) {
    if (e instanceof IIIError && e.code === "not_found") return undefined;
    if (typeof e === "object" && e !== null && (e as { code?: unknown }).code === "not_found") return undefined;
    throw new IIIError(
      "policy_unavailable",
      `${CHECK_PERMISSIONS}: the engine's catalog could not be read (${e instanceof Error ? e.message : String(e)})`,
    );
  }
  const entry = catalogEntry.safeParse(reply);
  if (!entry.success)
    throw new IIIError("policy_unavailable", `${CHECK_PERMISSIONS}: engine::functions::info answered something unreadable`);
  const facts: CatalogFacts = {};
  if (entry.data.metadata !== undefined) facts.metadata = entry.data.metadata;
  if (entry.data.served_by !== undefined) facts.served_by = entry.data.served_by;
  return facts;
}

/** Rules given with a check (`policy`), compiled once per text: a replay asks with the same text
 * for every call. A few texts at a time; the oldest is dropped first. */
export const GIVEN_POLICY_CACHE_SIZE = 8;
const givenPolicies = new Map<string, CompiledPolicy>();

function givenPolicy(text: string): PolicyState {
  let policy = givenPolicies.get(text);
  if (!policy) {
    try {
      policy = parsePermissions(text);
    } catch (e) {
      throw new IIIError("invalid_arguments", `${CHECK_PERMISSIONS}: the given policy does not parse: ${(e as Error).message}`);
    }
    if (givenPolicies.size >= GIVEN_POLICY_CACHE_SIZE) givenPolicies.delete(givenPolicies.keys().next().value!);
    givenPolicies.set(text, policy);
  }
  return { ok: true, policy, origin: "the policy given with the check" };
}

export function registerPolicy(iii: WorkerSurface, config: PolicyConfig): void {
  const tracer = tracerOf(iii);
  iii.registerFunction(
    CHECK_PERMISSIONS,
    (data: unknown, ctx: InvocationContext): Promise<PolicyDecision> => {
      const req = policyCheckRequest.safeParse(data);
      if (!req.success) throw new IIIError("invalid_arguments", `${CHECK_PERMISSIONS}: ${z.prettifyError(req.error)}`);
      const state = req.data.policy !== undefined ? givenPolicy(req.data.policy) : config.source.current();
      // Fail closed: no valid rules means no answer, and the orchestrator denies the call.
      if (!state.ok) throw new IIIError("policy_unavailable", `${CHECK_PERMISSIONS}: no valid permissions (${state.error})`);
      const { function_id, args, session_id, with_version } = req.data;
      return catalogFacts(ctx, function_id).then((facts) => {
        const decision: PolicyDecision = { ...decide(state.policy, function_id, args, session_id, facts) };
        if (with_version) decision.policy_version = policyVersion(state.policy);
        // Which rule decided, in the caller's trace (the orchestrator's policy_check span is above it).
        const span = tracer.startSpan(`evaluate_permissions ${function_id}`, {
          attributes: { "iii.function_id": function_id, "iii.policy.decision": decision.decision, "iii.policy.origin": state.origin },
        });
        if ("rule_id" in decision) span.setAttribute("iii.policy.rule_id", decision.rule_id);
        if (facts?.served_by !== undefined) span.setAttribute("iii.policy.served_by", facts.served_by);
        span.end();
        return decision;
      });
    },
    {
      description:
        "Decide whether the model may call a function: deny for the kernel (functions marked model: never) and for reads outside the session's own scopes, whatever the rules say; else allow, deny (with the rule), or needs_approval when no rule of iii-permissions.yaml matches or the allowed id is served by a principal the file does not trust for it. with_version: true adds policy_version, which changes whenever the rules do. policy: an iii-permissions.yaml text to judge under instead of the rules in force (a replay's what-if; the floor still applies).",
      request_format: z.toJSONSchema(policyCheckRequest, { io: "input", unrepresentable: "any" }),
      response_format: responseFormat(policyDecisionSchema),
    },
  );
}

/** `policy::version {}` → `{policy_version}`: the version of the rules in force, without judging a
 * call (what a person's allow is checked against before the call runs). */
export const POLICY_VERSION = "policy::version";

export function registerPolicyVersion(iii: WorkerSurface, config: PolicyConfig): void {
  iii.registerFunction(
    POLICY_VERSION,
    () => {
      const state = config.source.current();
      if (!state.ok) throw new IIIError("policy_unavailable", `${POLICY_VERSION}: no valid permissions (${state.error})`);
      return { policy_version: policyVersion(state.policy) };
    },
    {
      description: "The version of the permission rules in force ({policy_version}); it changes whenever the rules do.",
      response_format: responseFormat(policyVersionResponse),
    },
  );
}

export const worker: WorkerModule<PolicyConfig> = {
  name: "policy",
  kernel: true,
  configFrom,
  register: (iii, config) => {
    registerPolicy(iii, config);
    registerPolicyVersion(iii, config);
  },
};
export default worker;
