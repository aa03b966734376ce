// The approval gate (docs/harness-contracts.md §1.7, §3.7): a person's side of the calls the model makes.
// - `approval::resolve` records a decision on a parked call as state `approvals/<sid>/<cid>` =
//   `{decision, reason, binding?}`. It wakes nothing itself: the write fires the orchestrator's
//   state trigger (`turn::on_approval`), which reads the decision fresh. An allow carries what the
//   person was shown (function, argument hash, policy version); the orchestrator runs the call only
//   while all three still hold, and asks again otherwise.
// - The per-session permission settings (mode, `always_allow`, `approved_always`) in
//   `approval_settings/<sid>`, read by the orchestrator for every call.
// - The inbox: `approval_pending/<sid>/<cid>`, written by the orchestrator when it parks a call.
//   Its creation is announced on the `approval::pending-created` topic and its end on
//   `approval::pending-resolved`; `approval::sweep` denies what waited past `expires_at`.
// Every function here is kernel: a model never reaches one, in any mode (docs/security.md).
import { z } from "zod";
import { IIIError, assertSessionAccess, responseFormat, type CallerPrincipal } from "@iii-edge/protocol";
import {
  APPROVAL_PENDING_CREATED,
  APPROVAL_PENDING_RESOLVED,
  APPROVAL_PENDING_SCOPE,
  APPROVALS_SCOPE,
  defaultApprovalSettings,
  expiredReason,
  pendingApprovalRecordSchema,
  pendingResolved,
  type ApprovalDecision,
  type ApprovalSettings,
  type PendingApprovalRecord,
  type PendingOutcome,
  approvalState,
  approvalGateContracts,
  type ApprovalGateFunctionId,
} from "@iii-edge/protocol/harness";
import { tracerOf, type Trigger, type WorkerModule, type WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { changeSettings, readSettings, type SettingsChange } from "./settings.ts";

export const RESOLVE = "approval::resolve" as const;
export const SET_MODE = "approval::set-mode" as const;
export const GET_SETTINGS = "approval::get-settings" as const;
export const ADD_ALWAYS_ALLOW = "approval::add-always-allow" as const;
export const REMOVE_ALWAYS_ALLOW = "approval::remove-always-allow" as const;
export const APPROVE_ALWAYS = "approval::approve-always" as const;
export const CLEAR_SETTINGS = "approval::clear-settings" as const;
export const LIST_PENDING = "approval::list-pending" as const;
export const GET_PENDING = "approval::get-pending" as const;
export const SWEEP = "approval::sweep";
export const ON_PENDING = "approval::on-pending";

export { APPROVAL_MAX_ID_LENGTH as MAX_ID_LENGTH, APPROVAL_LIST_PENDING_MAX as LIST_PENDING_MAX } from "@iii-edge/protocol/harness";
/** The sweep's schedule: a call is denied at most a minute past its deadline. */
export const SWEEP_CRON = "0 * * * * *";
/** The sweep's cron binding, by id: bound while calls wait, unbound when none do (an idle engine is
 * never woken by it). */
export const SWEEP_TRIGGER_ID = "approval-gate:sweep";

// Requests and responses: protocol's approvalGateContracts (docs/harness-contracts.md §3.4, §3.7).
const C = approvalGateContracts;
export const resolveRequest = C[RESOLVE].request;
const sessionRequest = C[CLEAR_SETTINGS].request;
const setModeRequest = C[SET_MODE].request;
const listRequest = C[ADD_ALWAYS_ALLOW].request;
const getPendingRequest = C[GET_PENDING].request;
const listPendingRequest = C[LIST_PENDING].request;

export type ResolveResult = { ok: true } | { ok: false; error: "invalid_payload" | "resume_failed" };

export interface ApprovalGateConfig {
  /** The clock the sweep compares deadlines with (tests inject one). */
  now: () => number;
}

/** The state key a decision is stored under. */
export function approvalKey(sessionId: string, functionCallId: string): string {
  return approvalState.decision(sessionId, functionCallId).key;
}

const schemaOf = (s: z.ZodType) => z.toJSONSchema(s, { io: "input", unrepresentable: "any" });

function parse<T>(schema: z.ZodType<T>, data: unknown, fn: string): T {
  const r = schema.safeParse(data);
  if (!r.success) throw new IIIError("invalid_arguments", `${fn}: ${z.prettifyError(r.error)}`);
  return r.data;
}

/** Publish on an inbox topic: best effort (a notification lost is not a decision lost; the inbox
 * itself is the record, and `approval::list-pending` is the catch-up read). */
async function publish(trigger: Trigger, topic: string, data: unknown): Promise<void> {
  try {
    await trigger({ function_id: "publish", payload: { topic, data } });
  } catch (e) {
    console.warn(`approval-gate: publishing on ${topic} failed: ${(e as Error).message}`);
  }
}

/** Delete one inbox record; only the deleter that saw it there announces its end, so a resolve, the
 * sweep and a stop racing on one call produce one `pending-resolved`. */
export async function retirePending(
  trigger: Trigger,
  sid: string,
  cid: string,
  outcome: PendingOutcome,
  now: number,
  reason?: string | null,
): Promise<PendingApprovalRecord | undefined> {
  const old = await trigger<unknown, unknown>({
    function_id: "state::delete",
    payload: approvalState.pending(sid, cid),
  });
  const done = pendingResolved(old, outcome, now, reason);
  if (!done) return undefined;
  await publish(trigger, APPROVAL_PENDING_RESOLVED, done.event);
  return done.record;
}

async function readPending(trigger: Trigger, sid: string, cid: string): Promise<PendingApprovalRecord | undefined> {
  const raw = await trigger<unknown, unknown>({
    function_id: "state::get",
    payload: approvalState.pending(sid, cid),
  });
  const rec = pendingApprovalRecordSchema.safeParse(raw);
  return rec.success ? (rec.data as PendingApprovalRecord) : undefined;
}

async function allPending(trigger: Trigger): Promise<PendingApprovalRecord[]> {
  const rows = await trigger<unknown, unknown>({ function_id: "state::list", payload: { scope: APPROVAL_PENDING_SCOPE } });
  const out: PendingApprovalRecord[] = [];
  for (const row of Array.isArray(rows) ? rows : []) {
    const rec = pendingApprovalRecordSchema.safeParse(row);
    if (rec.success) out.push(rec.data as PendingApprovalRecord);
  }
  return out;
}

/** May `caller` see and decide for session `sid`? (The same rule as every per-session function:
 * its owner, a `sessions` grant naming it, or trusted code.) */
async function mayUse(trigger: Trigger, caller: CallerPrincipal | undefined, sid: string): Promise<boolean> {
  try {
    await assertSessionAccess((r) => trigger(r), caller, sid);
    return true;
  } catch (e) {
    if (e instanceof IIIError && e.code === "forbidden") return false;
    throw e;
  }
}

export function registerApprovalGate(iii: WorkerSurface, config: ApprovalGateConfig = { now: Date.now }): void {
  const tracer = tracerOf(iii);
  const now = config.now;
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
      let pending: PendingApprovalRecord | undefined;
      try {
        // The inbox record leaves before the decision lands: the orchestrator, woken by the
        // decision, may have to ask again, and its new record must not be the one deleted here.
        pending = await retirePending(ctx.trigger, session_id, function_call_id, decision, now(), req.data.reason);
        if (pending && decision === "allow")
          value.binding = {
            function_id: pending.function_id,
            args_hash: req.data.args_hash ?? pending.args_hash,
            policy_version: pending.policy_version,
          };
        await ctx.trigger({
          function_id: "state::set",
          payload: { ...approvalState.decision(session_id, function_call_id), value },
        });
      } catch (e) {
        console.warn(`${RESOLVE}: writing ${APPROVALS_SCOPE}/${approvalKey(session_id, function_call_id)} failed: ${(e as Error).message}`);
        // The call still waits: put its inbox record back so a person can still see and decide it.
        if (pending)
          await ctx
            .trigger({
              function_id: "state::set",
              payload: { ...approvalState.pending(session_id, function_call_id), value: pending },
            })
            .catch(() => undefined);
        return { ok: false, error: "resume_failed" };
      }
      return { ok: true };
    },
    {
      description:
        "Record a person's decision on a function call waiting for approval: allow runs it, deny answers the model with a denial. The parked turn resumes on its own. An allow holds for the call as shown (args_hash, the policy version); if either changed meanwhile, the person is asked again.",
      request_format: schemaOf(resolveRequest),
      response_format: responseFormat(C[RESOLVE].response),
      // The engine tells it who calls (the owner check above).
      metadata: { caller_principal: true },
    },
  );

  // ---------------------------------------------------------------- settings

  const settingsFunction = <T extends { session_id: string }>(
    id: ApprovalGateFunctionId,
    schema: z.ZodType<T>,
    description: string,
    run: (req: T, trigger: Trigger) => Promise<unknown>,
  ) =>
    iii.registerFunction(
      id,
      async (data: unknown, ctx) => {
        const req = parse(schema, data, id);
        await assertSessionAccess((r) => ctx.trigger(r), ctx.caller, req.session_id);
        return run(req, ctx.trigger);
      },
      {
        description,
        request_format: schemaOf(schema),
        response_format: responseFormat(C[id].response),
        metadata: { caller_principal: true },
      },
    );
  const change = (trigger: Trigger, sid: string, c: SettingsChange): Promise<{ settings: ApprovalSettings }> =>
    changeSettings(trigger, sid, c, now).then((settings) => ({ settings }));

  settingsFunction(
    SET_MODE,
    setModeRequest,
    "Set a session's permission mode: manual (the policy decides, anything it does not allow asks a person), auto (manual plus the session's always_allow list) or full (allow everything but the kernel). Answers {settings}.",
    (r, t) => change(t, r.session_id, { kind: "mode", mode: r.mode }),
  );
  settingsFunction(
    GET_SETTINGS,
    sessionRequest,
    "A session's effective permission settings: {settings, source: stored|defaults}. Never writes.",
    async (r, t) => {
      const { stored } = await readSettings(t, r.session_id);
      return stored ? { settings: stored, source: "stored" } : { settings: defaultApprovalSettings(), source: "defaults" };
    },
  );
  settingsFunction(
    ADD_ALWAYS_ALLOW,
    listRequest,
    "Add a function id (or a prefix ending in *) to a session's always_allow list, honoured in auto mode only. Idempotent. Answers {settings}.",
    (r, t) => change(t, r.session_id, { kind: "add", list: "always_allow", function_id: r.function_id }),
  );
  settingsFunction(
    REMOVE_ALWAYS_ALLOW,
    listRequest,
    "Remove a function id from a session's always_allow list (absent: nothing changes). Answers {settings}.",
    (r, t) => change(t, r.session_id, { kind: "remove", list: "always_allow", function_id: r.function_id }),
  );
  settingsFunction(
    APPROVE_ALWAYS,
    listRequest,
    "Remember a person's 'approve always' for a function in a session: honoured in every mode. Answers {settings}.",
    (r, t) => change(t, r.session_id, { kind: "add", list: "approved_always", function_id: r.function_id }),
  );
  settingsFunction(
    CLEAR_SETTINGS,
    sessionRequest,
    "Drop a session's stored permission settings (it returns to the defaults). Answers {cleared}.",
    async (r, t) => {
      const old = await t({ function_id: "state::delete", payload: approvalState.settings(r.session_id) });
      return { cleared: old !== undefined && old !== null };
    },
  );

  // ---------------------------------------------------------------- the inbox

  iii.registerFunction(
    GET_PENDING,
    async (data: unknown, ctx) => {
      const req = parse(getPendingRequest, data, GET_PENDING);
      await assertSessionAccess((r) => ctx.trigger(r), ctx.caller, req.session_id);
      const rec = await readPending(ctx.trigger, req.session_id, req.function_call_id);
      return rec ? { pending: rec } : null;
    },
    {
      description: "One call waiting for a person: {pending: PendingApprovalRecord}, or null when it is decided or unknown.",
      request_format: schemaOf(getPendingRequest),
      response_format: responseFormat(C[GET_PENDING].response),
      metadata: { caller_principal: true },
    },
  );
  iii.registerFunction(
    LIST_PENDING,
    async (data: unknown, ctx) => {
      const req = parse(listPendingRequest, data ?? {}, LIST_PENDING);
      if (req.session_id !== undefined) await assertSessionAccess((r) => ctx.trigger(r), ctx.caller, req.session_id);
      const records = (await allPending(ctx.trigger)).filter((r) => req.session_id === undefined || r.session_id === req.session_id);
      // Only the sessions the caller may use: one owner lookup per session, not per record.
      const allowed = new Map<string, boolean>();
      const visible: PendingApprovalRecord[] = [];
      for (const r of records) {
        if (!allowed.has(r.session_id)) allowed.set(r.session_id, await mayUse(ctx.trigger, ctx.caller, r.session_id));
        if (allowed.get(r.session_id)) visible.push(r);
      }
      visible.sort((a, b) => a.pending_at - b.pending_at || a.function_call_id.localeCompare(b.function_call_id));
      const from = req.cursor ? Number(req.cursor) : 0;
      const limit = req.limit ?? 50;
      const page = visible.slice(from, from + limit);
      return from + limit < visible.length ? { pending: page, next_cursor: String(from + limit) } : { pending: page };
    },
    {
      description:
        "The calls waiting for a person, oldest first, in the sessions the caller may use: {pending, next_cursor?}. session_id narrows to one session.",
      request_format: schemaOf(listPendingRequest),
      response_format: responseFormat(C[LIST_PENDING].response),
      metadata: { caller_principal: true },
    },
  );

  // A new inbox record (the orchestrator parked a call): announce it, and make sure the sweep runs.
  iii.registerFunction(
    ON_PENDING,
    async (event: unknown, ctx) => {
      const ev = z.looseObject({ event_type: z.string(), new_value: z.unknown().optional() }).safeParse(event);
      if (!ev.success || (ev.data.event_type !== "state:created" && ev.data.event_type !== "state:updated")) return null;
      const rec = pendingApprovalRecordSchema.safeParse(ev.data.new_value);
      if (!rec.success) return null;
      await ensureSweep(ctx.trigger);
      await publish(ctx.trigger, APPROVAL_PENDING_CREATED, { ...rec.data, status: "pending" });
      return null;
    },
    { description: "State trigger handler (scope approval_pending): announces a call that waits for a person" },
  );
  iii.registerTrigger({ type: "state", function_id: ON_PENDING, config: { scope: APPROVAL_PENDING_SCOPE } });

  iii.registerFunction(
    SWEEP,
    async (_data: unknown, ctx) => {
      const t = now();
      let expired = 0;
      const records = await allPending(ctx.trigger);
      for (const rec of records) {
        if (rec.expires_at > t) continue;
        const reason = expiredReason(rec.expires_at - rec.pending_at);
        const decision: ApprovalDecision = { decision: "deny", reason, expired: true };
        // The decision first: a sweep that stops between the two leaves the record for the next
        // one, never a call that nobody will ever answer.
        await ctx.trigger({
          function_id: "state::set",
          payload: { ...approvalState.decision(rec.session_id, rec.function_call_id), value: decision },
        });
        expired++;
        // The orchestrator, woken by the decision, may take the record away first: whichever
        // deletes it announces the end, once.
        await retirePending(ctx.trigger, rec.session_id, rec.function_call_id, "timeout", t, reason);
      }
      if (records.length === expired) await retireSweep(ctx.trigger);
      return { expired };
    },
    {
      description: "Deny the calls that waited for a person past their expires_at (cron, every minute while any wait). Answers {expired}.",
    },
  );
}

/** Bind the sweep's cron (idempotent by id). Best effort: a record written while it is unbound is
 * swept once the next one binds it. */
async function ensureSweep(trigger: Trigger): Promise<void> {
  try {
    await trigger({
      function_id: "engine::register_trigger",
      payload: { id: SWEEP_TRIGGER_ID, trigger_type: "cron", function_id: SWEEP, config: { expression: SWEEP_CRON } },
    });
  } catch (e) {
    console.warn(`approval-gate: the expiry sweep could not be scheduled: ${(e as Error).message}`);
  }
}

/** Nothing waits: unbind the cron, then look once more — a record written meanwhile binds it again
 * (its state trigger binds after the write, so one of the two always sees the other). */
async function retireSweep(trigger: Trigger): Promise<void> {
  try {
    await trigger({ function_id: "engine::unregister_trigger", payload: { id: SWEEP_TRIGGER_ID } });
    if ((await allPending(trigger)).length > 0) await ensureSweep(trigger);
  } catch (e) {
    console.warn(`approval-gate: unbinding the idle expiry sweep failed: ${(e as Error).message}`);
  }
}

export const worker: WorkerModule<ApprovalGateConfig> = {
  name: "approval-gate",
  kernel: true,
  configFrom: () => ({ now: Date.now }),
  register: (iii, config) => registerApprovalGate(iii, config),
};
export default worker;
