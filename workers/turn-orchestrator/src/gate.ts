// The single chokepoint (docs/harness-contracts.md §3.1, §3.3): every call the model makes is planned from an
// `agent_trigger` block, checked by `policy::check_permissions` (fail closed), and dispatched with
// the model's arguments as its data and who is calling as its metadata; whatever comes back — a
// value, an error, nothing — becomes a FunctionResult.
import { z } from "zod";
import {
  AGENT_TRIGGER,
  type ApprovalDecision,
  type AssistantMessage,
  type ContentBlock,
  type DenialEnvelope,
  type FunctionCall,
  type FunctionResult,
  type HarnessCallMetadata,
  type PolicyDecision,
  type PreparedCall,
} from "@iii-edge/protocol/harness";
import { gateUnavailableEnvelope, permissionsDenyEnvelope, userDenyEnvelope } from "./denials.ts";
import { errorCode, errorText, type Trigger } from "./calls.ts";
import { FUNCTION_CALL_TIMEOUT_MS, POLICY_TIMEOUT_MS } from "./constants.ts";
import { textBlock } from "./messages.ts";
import { isRecord } from "@iii-edge/protocol";

function errorResult(text: string, details: Record<string, unknown>): FunctionResult {
  return { content: [textBlock(text)], details, terminate: false };
}

// ------------------------------------------------------------------ planning (§2.3)

/** The batch of `last`'s function calls: `agent_trigger {function, payload}` unwrapped to the target
 * call; anything else is settled here with an error the model can read. */
export function planBatch(last: AssistantMessage): PreparedCall[] {
  const out: PreparedCall[] = [];
  for (const block of last.content ?? []) {
    if (block?.type !== "function_call") continue;
    let args = block.arguments;
    if (typeof args === "string") {
      try {
        args = JSON.parse(args);
      } catch {
        // left as the string: reported below
      }
    }
    if (block.function_id !== AGENT_TRIGGER) {
      const call: FunctionCall = { id: block.id, function_id: block.function_id, arguments: args };
      out.push({
        route: "synthetic",
        call,
        is_error: true,
        result: errorResult(
          `There is no tool \`${block.function_id}\`. Call functions through \`${AGENT_TRIGGER}\` with {"function": "<function id>", "payload": {…}}.`,
          {
            error: "missing_function",
            function_id: block.function_id,
          },
        ),
      });
      continue;
    }
    const target = isRecord(args) && typeof args.function === "string" ? args.function.trim() : "";
    const payload = isRecord(args) ? (args.payload ?? {}) : {};
    const call: FunctionCall = { id: block.id, function_id: target || AGENT_TRIGGER, arguments: payload };
    if (!target) {
      out.push({
        route: "synthetic",
        call,
        is_error: true,
        result: errorResult(
          `\`${AGENT_TRIGGER}\` needs \`function\`: the id of the function to call (for example \`engine::functions::list\`).`,
          { error: "missing_function" },
        ),
      });
      continue;
    }
    if (!isRecord(payload)) {
      out.push({
        route: "synthetic",
        call,
        is_error: true,
        result: errorResult(`The \`payload\` of a call to \`${target}\` must be a JSON object (the function's request).`, {
          error: "invalid_payload",
          function_id: target,
        }),
      });
      continue;
    }
    out.push({ route: "dispatch", call });
  }
  return out;
}

// ------------------------------------------------------------------ consultBefore (§3.3)

export type GateDecision = { kind: "allow" } | { kind: "deny"; envelope: DenialEnvelope } | { kind: "pending" };

const policyReply = z.discriminatedUnion("decision", [
  z.looseObject({ decision: z.literal("allow") }),
  z.looseObject({
    decision: z.literal("deny"),
    rule_id: z.string().catch("unknown"),
    matched_constraint: z.object({ field: z.string(), operator: z.string(), value: z.unknown() }).optional().catch(undefined),
  }),
  z.looseObject({ decision: z.literal("needs_approval") }),
]);

/** What the policy answered: a decision, something unreadable, or nothing (unreachable, slow, failing). */
export type PolicyAnswer =
  | { kind: "answer"; decision: PolicyDecision }
  | { kind: "unreadable" }
  | { kind: "unreachable"; envelope: DenialEnvelope };

/** One call to the policy, 5 s budget. `sessionId`: the session the model calls for, whose own
 * state and stream scopes are the only ones it may read. `withVersion`: ask for the policy version
 * too (what a person's decision is bound to). */
export async function askPolicy(
  trigger: Trigger,
  call: FunctionCall,
  sessionId?: string,
  withVersion = false,
  replayId?: string,
): Promise<PolicyAnswer> {
  let reply: unknown;
  const payload: Record<string, unknown> = { function_id: call.function_id, args: call.arguments };
  if (sessionId !== undefined) payload.session_id = sessionId;
  if (withVersion) payload.with_version = true;
  // A replay's calls are judged by the cassette worker, under the replay's policy override if any.
  if (replayId !== undefined) payload.replay_id = replayId;
  const functionId = replayId !== undefined ? "cassette::check_permissions" : "policy::check_permissions";
  try {
    reply = await trigger({ function_id: functionId, payload, timeoutMs: POLICY_TIMEOUT_MS });
  } catch (e) {
    return {
      kind: "unreachable",
      envelope: gateUnavailableEnvelope(
        call.function_id,
        `policy unreachable: ${errorCode(e) ?? "error"}: ${errorText(e)}`,
        call.arguments,
      ),
    };
  }
  const d = policyReply.safeParse(reply);
  if (!d.success) return { kind: "unreadable" };
  const version = isRecord(reply) && typeof reply.policy_version === "string" ? reply.policy_version : undefined;
  const decision = (
    d.data.decision === "deny"
      ? { decision: "deny", rule_id: d.data.rule_id, rule_action: "deny", matched_constraint: d.data.matched_constraint }
      : d.data.decision === "allow"
        ? { decision: "allow", rule_id: typeof d.data.rule_id === "string" ? d.data.rule_id : "" }
        : { decision: "needs_approval" }
  ) as PolicyDecision;
  if (version !== undefined) decision.policy_version = version;
  return { kind: "answer", decision };
}

/** The policy's answer alone as a gate decision: unreachable → deny `gate_unavailable` (fail
 * closed); unreadable → needs_approval (a person looks). */
export function gateOf(call: FunctionCall, a: PolicyAnswer): GateDecision {
  if (a.kind === "unreachable") return { kind: "deny", envelope: a.envelope };
  if (a.kind === "unreadable" || a.decision.decision === "needs_approval") return { kind: "pending" };
  if (a.decision.decision === "allow") return { kind: "allow" };
  return { kind: "deny", envelope: permissionsDenyEnvelope(call, a.decision.rule_id, a.decision.matched_constraint) };
}

/** One call to the policy as a gate decision (askPolicy, then gateOf). */
export async function consultBefore(trigger: Trigger, call: FunctionCall, sessionId?: string): Promise<GateDecision> {
  return gateOf(call, await askPolicy(trigger, call, sessionId));
}

export const denialResult = (envelope: DenialEnvelope, terminate = false): FunctionResult => ({
  content: [textBlock(envelope.reason)],
  details: envelope,
  terminate,
});

/** The result of a person's decision other than allow (§3.4): `deny` tells the model, `aborted`
 * (written by `turn::stop`) also ends the run after the batch. */
export function decisionResult(call: FunctionCall, d: ApprovalDecision): FunctionResult {
  const envelope = userDenyEnvelope(call, d.reason);
  if (d.decision === "aborted") {
    const reason = d.reason?.trim() ? d.reason.trim() : "session_aborted";
    return {
      content: [textBlock(`Function call aborted: ${reason}`)],
      details: { ...envelope, reason: `Function call aborted: ${reason}`, approval_denied: true, decision: "aborted" },
      terminate: true,
    };
  }
  if (d.expired)
    return {
      content: [textBlock(`Approval expired: ${envelope.reason}`)],
      details: { ...envelope, approval_denied: true, decision: "deny", expired: true },
      terminate: false,
    };
  return {
    content: [textBlock(`Permission denied by user: ${envelope.reason}`)],
    details: { ...envelope, approval_denied: true, decision: "deny" },
    terminate: false,
  };
}

// ------------------------------------------------------------------ dispatch (§3.1)

/** Who is calling, sent as the invocation's `metadata`: the target's `data` is the model's arguments
 * exactly (a function with a strict schema would refuse added keys), and provenance travels beside it. */
export function callMetadata(call: FunctionCall, sessionId: string): HarnessCallMetadata {
  return { session_id: sessionId, function_call_id: call.id, function_id: call.function_id };
}

/** A value a function returned, as a FunctionResult: `{content: [...]}` is one already. */
export function normaliseResult(raw: unknown): FunctionResult {
  if (isRecord(raw) && Array.isArray(raw.content)) {
    const r: FunctionResult = { content: raw.content as ContentBlock[], details: raw.details ?? null };
    if (typeof raw.terminate === "boolean") r.terminate = raw.terminate;
    return r;
  }
  const text = typeof raw === "string" ? raw : raw === undefined ? "null" : (JSON.stringify(raw) ?? String(raw));
  return { content: [textBlock(text)], details: raw ?? null };
}

/** A call that was started and whose outcome is unknown (at most once: never re-invoked, docs/harness-contracts.md §2.6). */
export function interruptedResult(call: FunctionCall, cause: string): FunctionResult {
  return errorResult(
    `The call to \`${call.function_id}\` was interrupted (${cause}). It ran at most once and its outcome is unknown: check whether it took effect before calling it again.`,
    { error: "interrupted", function_id: call.function_id, at_most_once: true },
  );
}

/** A failed dispatch, as the model should read it. */
export function targetErrorResult(call: FunctionCall, e: unknown, timeoutMs: number): FunctionResult {
  const code = errorCode(e);
  const message = errorText(e);
  const id = call.function_id;
  if (code === "function_not_found") {
    const hint = id.includes("/")
      ? "It looks like a skill path; functions are called by their `worker::function` id."
      : "List the functions that exist with `engine::functions::list`.";
    return errorResult(`Function \`${id}\` is not registered. ${hint}`, { error: "function_not_found", function_id: id, message, hint });
  }
  if (code === "timeout")
    return errorResult(`The call to \`${id}\` did not answer within ${timeoutMs} ms; it may still be running.`, {
      error: "timeout",
      function_id: id,
      message,
    });
  if (code === "invocation_stopped" || code === "not_connected")
    return interruptedResult(call, "the connection to the engine dropped while it ran");
  if (code === "channel_send_failed" || code === "invocation_error" || code === "too_many_calls" || code === "rate_limited") {
    return denialResult(gateUnavailableEnvelope(id, `trigger_failed: ${code}: ${message}`, call.arguments));
  }
  return errorResult(`The call to \`${id}\` failed: ${code ?? "error"}: ${message}`, {
    error: "handler_error",
    function_id: id,
    code: code ?? "invocation_failed",
    message,
  });
}

/** Trigger the target (already allowed) and read whatever happens as a result. */
export async function invokeTarget(trigger: Trigger, call: FunctionCall, sessionId: string): Promise<FunctionResult> {
  try {
    const payload = isRecord(call.arguments) ? call.arguments : {};
    return normaliseResult(
      await trigger({
        function_id: call.function_id,
        payload,
        metadata: callMetadata(call, sessionId),
        timeoutMs: FUNCTION_CALL_TIMEOUT_MS,
      }),
    );
  } catch (e) {
    return targetErrorResult(call, e, FUNCTION_CALL_TIMEOUT_MS);
  }
}

/** §3.1: an error when `details.error` is a string or `details.status` is "denied". */
export function isErrorResult(r: FunctionResult): boolean {
  const d = r.details;
  if (!isRecord(d)) return false;
  return typeof d.error === "string" || d.status === "denied";
}

// ------------------------------------------------------------------ approval decisions (§3.4)

const decisionSchema = z.object({
  decision: z.enum(["allow", "deny", "aborted"]),
  reason: z.string().nullable().optional(),
  expired: z.boolean().optional().catch(undefined),
  binding: z.object({ function_id: z.string(), args_hash: z.string(), policy_version: z.string() }).optional().catch(undefined),
});

export function parseDecision(v: unknown): ApprovalDecision | undefined {
  const r = decisionSchema.safeParse(v);
  if (!r.success) return undefined;
  const d: ApprovalDecision = { decision: r.data.decision, reason: r.data.reason ?? null };
  if (r.data.expired) d.expired = true;
  if (r.data.binding) d.binding = r.data.binding;
  return d;
}
