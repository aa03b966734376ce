// The approval gate (docs/harness-contracts.md §1.7): `approval::resolve` records a person's decision on a
// parked function call as state `approvals/<session_id>/<function_call_id>` = `{decision, reason}`.
// It wakes nothing itself: the write fires the orchestrator's state trigger (`turn::on_approval`),
// which reads the decision fresh. Runs unchanged inside the Worker and in Node; it keeps no state
// of its own.
import { z } from "zod";
import { IIIError, assertSessionAccess } from "@iii-edge/protocol";
import { APPROVALS_SCOPE, approvalResolveRequest, type ApprovalDecision } from "@iii-edge/protocol/harness";
import { tracerOf, type WorkerModule, type WorkerSurface } from "@iii-edge/sdk-edge/worker";

export const RESOLVE = "approval::resolve";

/** Longest session or call id accepted: ids are generated (UUIDs, provider call ids of ~40
 * characters); 256 each keeps the state key far below the engine's 1024-character key limit. */
export const MAX_ID_LENGTH = 256;

/** One segment of the `<sid>/<cid>` key: a `/` would make the key ambiguous (and the orchestrator's
 * trigger only accepts keys of exactly two segments). */
const keySegment = z
  .string()
  .min(1)
  .max(MAX_ID_LENGTH)
  .refine((s) => !s.includes("/"), "must not contain '/'");

export const resolveRequest = approvalResolveRequest.extend({ session_id: keySegment, function_call_id: keySegment });

export type ResolveResult = { ok: true } | { ok: false; error: "invalid_payload" | "resume_failed" };

/** The state key a decision is stored under. */
export function approvalKey(sessionId: string, functionCallId: string): string {
  return `${sessionId}/${functionCallId}`;
}

export function registerApprovalGate(iii: WorkerSurface): void {
  const tracer = tracerOf(iii);
  iii.registerFunction(
    RESOLVE,
    async (data: unknown, ctx): Promise<ResolveResult> => {
      const req = resolveRequest.safeParse(data);
      if (!req.success) return { ok: false, error: "invalid_payload" };
      const { session_id, function_call_id, decision } = req.data;
      // Only the session's owner (or a `sessions` grant naming it, or trusted code) decides: a
      // stranger is refused exactly as for a session that does not exist.
      try {
        await assertSessionAccess((r) => ctx.trigger(r), ctx.caller, session_id);
      } catch (e) {
        if (e instanceof IIIError) throw e;
        console.warn(`${RESOLVE}: reading the owner of session ${session_id} failed: ${(e as Error).message}`);
        return { ok: false, error: "resume_failed" };
      }
      const value: ApprovalDecision = { decision, reason: req.data.reason ?? null };
      // The decision in the approver's own trace (the turn's trace shows the wait it ended).
      tracer
        .startSpan(`approval_decision ${decision}`, {
          attributes: {
            "iii.session.id": session_id,
            "gen_ai.conversation.id": session_id,
            "gen_ai.tool.call.id": function_call_id,
            "iii.approval.decision": decision,
          },
        })
        .end();
      try {
        await ctx.trigger({
          function_id: "state::set",
          payload: { scope: APPROVALS_SCOPE, key: approvalKey(session_id, function_call_id), value },
        });
      } catch (e) {
        console.warn(`${RESOLVE}: writing ${APPROVALS_SCOPE}/${approvalKey(session_id, function_call_id)} failed: ${(e as Error).message}`);
        return { ok: false, error: "resume_failed" };
      }
      return { ok: true };
    },
    {
      description:
        "Record a person's decision on a function call waiting for approval: allow runs it, deny answers the model with a denial. The parked turn resumes on its own.",
      request_format: z.toJSONSchema(resolveRequest, { io: "input", unrepresentable: "any" }),
      // The engine tells it who calls (the owner check above).
      metadata: { caller_principal: true },
    },
  );
}

export const worker: WorkerModule = {
  name: "approval-gate",
  kernel: true,
  register: (iii) => registerApprovalGate(iii),
};
export default worker;
