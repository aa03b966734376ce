// function_execute and function_awaiting_approval (docs/harness-contracts.md §2.3, §3.1, §3.4) with per-call
// checkpoints: `triggered` is written before a target is invoked and `done` with its result, so a
// step delivered again after a crash never invokes a call twice — a call found `triggered` but
// not `done` gets an "interrupted, ran at most once" result instead.
import { bindingChange, approvalState, HOOK_TRIGGER_TYPES, type HookDenialEnvelope } from "@iii-edge/protocol/harness";
import type {
  ApprovalDecision,
  AwaitingApproval,
  CallGate,
  FunctionCall,
  FunctionResult,
  FunctionResultMessage,
  PreparedCall,
  TurnStateRecord,
} from "@iii-edge/protocol/harness";
import { bindingOf, currentPolicyVersion, decideCall, pendingRecord, pendingTimeoutMs, retirePending, writePending } from "./approvals.ts";
import { callBestEffort, callRequired, type Trigger } from "./calls.ts";
import { childWaitOf } from "./children.ts";
import { redactArgs } from "./denials.ts";
import { decisionResult, denialResult, interruptedResult, invokeTarget, isErrorResult, parseDecision, planBatch } from "./gate.ts";
import { keepChanges, postTrigger, preTrigger, type PreTriggerOutcome, type WorkWithHooks } from "./hook-points.ts";
import { finishSession, turnEndOnce } from "./lifecycle.ts";
import { boundedKey, requireBatch, resultEntryId, InvariantError } from "./record.ts";
import type { BeforeCallOutcome } from "./hooks.ts";
import { runAfterFunctionCallHooks, runBeforeFunctionCallHooks } from "./seams.ts";
import { enqueue, stepMessage, type Tx } from "./store.ts";
import { appendMany } from "./transcript.ts";
import { ToolSpan } from "./trace.ts";
import { consumeSubmitResult } from "./turn-end.ts";
import { answerFromCassette, NO_RECORDED_DECISION, recordedDecision } from "./replay.ts";

type Work = NonNullable<TurnStateRecord["work"]> & WorkWithHooks;
/** A parked call's entry, with the hook that held it when a `pre_trigger` hook did. */
type Parked = AwaitingApproval & { held_by?: string };

async function readDecision(trigger: Trigger, sid: string, cid: string): Promise<ApprovalDecision | undefined> {
  return parseDecision(await callRequired<unknown>(trigger, "state::get", approvalState.decision(sid, cid)));
}

/** A consumed decision is deleted: otherwise every decision ever taken stays a row forever. */
async function deleteDecision(trigger: Trigger, sid: string, cid: string): Promise<void> {
  await callBestEffort(trigger, "state::delete", approvalState.decision(sid, cid));
}

/** Record a call's result, checkpoint it `done`, then tell the UI. */
async function recordResult(
  tx: Tx,
  work: Work,
  call: FunctionCall,
  result: FunctionResult,
  durationMs: number,
  isError?: boolean,
): Promise<void> {
  const is_error = isError ?? isErrorResult(result);
  const gate = work.gates?.[call.id] ?? { policy: "none" };
  work.executed[call.id] = { call, result, is_error, duration_ms: durationMs, gate };
  work.calls[call.id] = "done";
  await tx.checkpoint();
  tx.events.emit({
    type: "function_execution_end",
    function_call_id: call.id,
    function_id: call.function_id,
    result,
    is_error,
    duration_ms: durationMs,
  });
}

/** What the model reads when a `pre_trigger` hook denied the call. */
function preTriggerDenial(call: FunctionCall, by: string, reason: string): FunctionResult {
  const envelope: HookDenialEnvelope = {
    schema_version: 1,
    status: "denied",
    denied_by: "hook",
    hook_topic: HOOK_TRIGGER_TYPES.pre_trigger,
    function_id: call.function_id,
    args_excerpt: redactArgs(call.arguments),
    reason: `The call to \`${call.function_id}\` was denied by the pre_trigger hook ${by}: ${reason}. It was not run.`,
  };
  return { content: [{ type: "text", text: envelope.reason }], details: envelope, terminate: false };
}

/** Park a call a `pre_trigger` hook held, as a person's approval parks one: its inbox record is
 * written now (the hook's pending_timeout_ms, else the approval timeout), and the call as the hooks
 * before the holder left it is what the batch keeps and what a person approves. */
async function holdCall(tx: Tx, work: Work, call: FunctionCall, held: Extract<PreTriggerOutcome, { kind: "hold" }>): Promise<Parked> {
  const index = work.prepared.findIndex((p) => p.call.id === call.id);
  if (index >= 0) work.prepared[index] = { ...work.prepared[index], call: held.call };
  keepChanges(work, call.id, "pre_trigger", held.changes);
  work.hooks ??= {};
  (work.hooks[call.id] ??= {}).held_by = held.by;
  const binding = await bindingOf(held.call, await currentPolicyVersion(tx.trigger));
  const pending = pendingRecord(tx.sid, tx.rec.run_id, held.call, binding, Date.now(), held.pending_timeout_ms ?? pendingTimeoutMs());
  await writePending(tx.trigger, { ...pending, held_by: held.by } as typeof pending);
  return {
    function_call_id: call.id,
    function_id: call.function_id,
    args: held.call.arguments,
    pending_at: pending.pending_at,
    expires_at: pending.expires_at,
    args_hash: binding.args_hash,
    policy_version: binding.policy_version,
    held_by: held.by,
  };
}

/** Keep how a call was decided (the policy's answer, then a person's), for its transcript entry. */
function noteGate(work: Work, cid: string, gate: Partial<CallGate>): void {
  work.gates ??= {};
  work.gates[cid] = { ...(work.gates[cid] ?? { policy: "none" }), ...gate };
}

const approvalOf = (d: ApprovalDecision): NonNullable<CallGate["approval"]> => (d.expired ? "expired" : d.decision);

/** Dispatch an allowed call exactly once: `triggered` is durable before the target is invoked. The
 * before-call hooks run first — `agent::before_function_call`, then the `pre_trigger` chain — and
 * may deny it, hold it (`park`) or rewrite its arguments: the rewritten call and what each hook
 * changed are kept in the batch by the same write that marks it triggered. `resumeAfter`: a held
 * call a person released; its chain goes on after the hook that held it. After the call, the
 * `agent::after_function_call` hooks and the `post_trigger` chain may rewrite the result, which is
 * checkpointed with the `done` mark. */
async function runCall(
  tx: Tx,
  work: Work,
  call: FunctionCall,
  afterTriggered?: () => Promise<void>,
  parkOnChild?: (entry: AwaitingApproval) => void,
  hooked?: BeforeCallOutcome,
  resumeAfter?: string,
  parkHeld?: (entry: Parked) => void | Promise<void>,
): Promise<void> {
  const started = Date.now();
  const before =
    hooked ?? (resumeAfter !== undefined ? { kind: "run" as const, call } : await runBeforeFunctionCallHooks(tx.trigger, tx.sid, call));
  if (before.kind === "deny") {
    await recordResult(tx, work, call, before.result, Date.now() - started, true);
    await afterTriggered?.();
    return;
  }
  const pre = await preTrigger(tx, before.call, resumeAfter);
  if (pre.kind === "deny") {
    await recordResult(tx, work, call, preTriggerDenial(before.call, pre.by, pre.reason), Date.now() - started, true);
    await afterTriggered?.();
    return;
  }
  if (pre.kind === "hold") {
    if (!parkHeld) throw new InvariantError(`call ${call.id} was held where it cannot park`);
    const entry = await holdCall(tx, work, call, pre);
    work.calls[call.id] = "pending";
    await parkHeld(entry);
    return;
  }
  const target = pre.call;
  keepChanges(work, call.id, "pre_trigger", pre.changes);
  const index = work.prepared.findIndex((p) => p.call.id === call.id);
  if (target !== call && index >= 0) work.prepared[index] = { ...work.prepared[index], call: target };
  work.calls[call.id] = "triggered";
  await tx.checkpoint();
  await afterTriggered?.();
  const replayId = tx.rec.replay_id;
  let result = replayId ? await answerFromCassette(tx.trigger, target, tx.sid, replayId) : await invokeTarget(tx.trigger, target, tx.sid);
  // A first `harness::join` on a running child parks (children.ts); its after-hooks run on the resumed call's result.
  const wait = parkOnChild ? childWaitOf(target, result) : undefined;
  if (parkOnChild && wait) {
    work.calls[call.id] = "pending";
    parkOnChild(wait);
    return;
  }
  result = await runAfterFunctionCallHooks(tx.trigger, tx.sid, target, result);
  const post = await postTrigger(tx, target, result, isErrorResult(result));
  keepChanges(work, call.id, "post_trigger", post.changes);
  await recordResult(tx, work, call, post.result, Date.now() - started, post.is_error);
}

const interrupted = (call: FunctionCall): FunctionResult => interruptedResult(call, "the harness stopped while it ran");

/** A result's text, as a span's error description. */
const resultText = (r: FunctionResult): string =>
  (r.content ?? [])
    .map((b) =>
      b && typeof b === "object" && (b as { type?: unknown }).type === "text" ? String((b as { text?: unknown }).text ?? "") : "",
    )
    .join("") || "error";

/** What kind of failure a result is (`details.error`, a denial, …), for `error.type`. */
function failureKind(r: FunctionResult): string {
  const d = r.details && typeof r.details === "object" ? (r.details as Record<string, unknown>) : {};
  if (d.approval_denied === true) return d.decision === "aborted" ? "aborted" : "denied_by_user";
  if (typeof d.error === "string") return d.error;
  if (d.status === "denied") return "denied";
  return "error";
}

/** End the call's execute_tool span with its result — or keep it open while the call waits (a
 * person's decision, a child run). */
function settleToolSpan(tool: ToolSpan, work: Work, cid: string): void {
  const done = work.executed[cid];
  if (!done) return tool.keepOpen();
  if (done.is_error) tool.end({ outcome: failureKind(done.result), error: resultText(done.result) });
  else tool.end({ outcome: "ok" });
}

function replayEnd(tx: Tx, work: Work, cid: string): void {
  const done = work.executed[cid];
  tx.events.emit({
    type: "function_execution_end",
    function_call_id: cid,
    function_id: done.call.function_id,
    result: done.result,
    is_error: done.is_error,
    duration_ms: done.duration_ms,
  });
}

/** `turn::function_execute`. */
export async function functionExecute(tx: Tx): Promise<void> {
  const rec = tx.rec;
  if (!rec.last_assistant) throw new InvariantError("function_execute without last_assistant");
  if (!rec.work) rec.work = { prepared: consumeSubmitResult(rec, planBatch(rec.last_assistant)), executed: {}, calls: {} };
  const work = rec.work;
  work.calls ??= {};
  const parked = new Set((rec.awaiting_approval ?? []).map((a) => a.function_call_id));
  const newPending: AwaitingApproval[] = [];
  for (const p of work.prepared) {
    const call = p.call;
    if (work.executed[call.id]) {
      replayEnd(tx, work, call.id);
      continue;
    }
    if (parked.has(call.id)) continue;
    const tool = new ToolSpan(tx.tracer, rec, call);
    if (work.calls[call.id] === "triggered") {
      await recordResult(tx, work, call, interrupted(call), 0, true);
      settleToolSpan(tool, work, call.id);
      continue;
    }
    tx.events.emit({ type: "function_execution_start", function_call_id: call.id, function_id: call.function_id, args: call.arguments });
    if (p.route === "synthetic") {
      await recordResult(tx, work, call, p.result, 0, p.is_error);
      settleToolSpan(tool, work, call.id);
      continue;
    }
    if (p.route === "pre_approved") {
      // A person's allow whose step was cut before the call ran: a held call goes on after its holder.
      const heldBy = (work as Work).hooks?.[call.id]?.held_by;
      await tool.within(() => runCall(tx, work, call, undefined, undefined, undefined, heldBy, (held) => void newPending.push(held)));
      settleToolSpan(tool, work, call.id);
      continue;
    }
    const gate = await tool.child(
      `policy_check ${call.function_id}`,
      { "iii.function_id": "policy::check_permissions", "gen_ai.tool.name": call.function_id, "gen_ai.tool.call.id": call.id },
      async (span) => {
        const g = await decideCall(tx.trigger, call, tx.sid, rec.replay_id);
        span?.setAttribute("iii.policy.decision", g.kind === "pending" ? "needs_approval" : g.kind);
        if (g.kind === "deny") span?.setAttribute("iii.policy.reason", g.envelope.reason);
        return g;
      },
    );
    noteGate(work, call.id, {
      policy: gate.kind === "pending" ? "needs_approval" : gate.kind,
      ...(gate.policy_version !== undefined ? { policy_version: gate.policy_version } : {}),
    });
    const parkHere = (entry: AwaitingApproval) => void newPending.push(entry);
    if (gate.kind === "allow") await tool.within(() => runCall(tx, work, call, undefined, parkHere, undefined, undefined, parkHere));
    else if (gate.kind === "deny") await recordResult(tx, work, call, denialResult(gate.envelope), 0, true);
    else if (rec.replay_id) {
      // A replay never waits for a person: the recorded decision answers (none recorded: denied, and
      // the diff says the call now needs a person).
      const decision = await recordedDecision(tx.trigger, call, tx.sid, rec.replay_id);
      if (decision) noteGate(work, call.id, { approval: approvalOf(decision) });
      if (decision?.decision === "allow")
        await tool.within(() => runCall(tx, work, call, undefined, parkHere, undefined, undefined, parkHere));
      else await recordResult(tx, work, call, decisionResult(call, decision ?? NO_RECORDED_DECISION), 0, true);
    } else {
      const asked = await ask(tx, work, call, gate.policy_version);
      if (asked) newPending.push(asked);
    }
    settleToolSpan(tool, work, call.id);
  }
  if (newPending.length > 0) return park(tx, work, newPending);
  return finalizeBatch(tx);
}

/** Put a call in front of a person: what they approve is the call as it would run (after the
 * before-call hooks, which may also deny it here: then nobody is asked) under this policy version.
 * Its inbox record is written before the park is saved (a redelivered step writes the same key). */
async function ask(tx: Tx, work: Work, call: FunctionCall, policyVersion: string | undefined): Promise<AwaitingApproval | undefined> {
  const before = await runBeforeFunctionCallHooks(tx.trigger, tx.sid, call);
  if (before.kind === "deny") {
    await recordResult(tx, work, call, before.result, 0, true);
    return undefined;
  }
  const binding = await bindingOf(before.call, policyVersion);
  const rec = pendingRecord(tx.sid, tx.rec.run_id, call, binding, Date.now(), pendingTimeoutMs());
  await writePending(tx.trigger, rec);
  return {
    function_call_id: call.id,
    function_id: call.function_id,
    args: call.arguments,
    pending_at: rec.pending_at,
    expires_at: rec.expires_at,
    args_hash: binding.args_hash,
    policy_version: binding.policy_version,
  };
}

/** Park the batch on its pending calls: no queue message is held while a person decides. */
async function park(tx: Tx, work: Work, newPending: AwaitingApproval[]): Promise<void> {
  const rec = tx.rec;
  const merged = new Map((rec.awaiting_approval ?? []).map((a) => [a.function_call_id, a]));
  for (const p of newPending) {
    if (!merged.has(p.function_call_id)) merged.set(p.function_call_id, p);
    work.calls[p.function_call_id] = "pending";
  }
  rec.awaiting_approval = [...merged.values()];
  rec.state = "function_awaiting_approval";
  await tx.save();
  // A decision written before this park landed found nothing parked to wake (turn::on_approval
  // ignores a record that is not parked), so look for one now.
  for (const a of rec.awaiting_approval) {
    if (await readDecision(tx.trigger, tx.sid, a.function_call_id)) {
      await enqueue(tx.trigger, stepMessage(tx.sid, rec.state, rec.step, boundedKey(`${tx.sid}:${rec.step}:recheck`)));
      return;
    }
  }
}

/** `turn::function_awaiting_approval` (woken per decision; re-scans until a pass resolves nothing). */
export async function functionAwaitingApproval(tx: Tx): Promise<void> {
  const rec = tx.rec;
  const { work } = requireBatch(rec);
  if (!rec.awaiting_approval) throw new InvariantError("function_awaiting_approval without awaiting_approval");
  work.calls ??= {};
  let changed = false;
  for (let progress = true; progress; ) {
    progress = false;
    const waiting: AwaitingApproval[] = [...(rec.awaiting_approval ?? [])];
    for (const entry of waiting) {
      const cid: string = entry.function_call_id;
      const index = work.prepared.findIndex((p) => p.call.id === cid);
      const drop = () => {
        rec.awaiting_approval = (rec.awaiting_approval ?? []).filter((a) => a.function_call_id !== cid);
        progress = changed = true;
      };
      if (index < 0 || work.executed[cid]) {
        drop();
        continue;
      }
      const decision = await readDecision(tx.trigger, tx.sid, cid);
      if (!decision) continue;
      const call = work.prepared[index].call;
      drop();
      noteGate(work, cid, { approval: approvalOf(decision) });
      // The wait for a person, from the park to this decision, as a span of the call's own.
      const tool = new ToolSpan(tx.tracer, rec, call);
      tool.recordChild(
        `approval_wait ${call.function_id}`,
        {
          "iii.function_id": "approval::resolve",
          "gen_ai.tool.name": call.function_id,
          "gen_ai.tool.call.id": call.id,
          "iii.approval.decision": decision.decision,
        },
        entry.pending_at ?? Date.now(),
      );
      if (decision.decision === "allow") {
        // An allow counts for what the person was shown: the same function, the same arguments
        // after the hooks, the same policy. If any changed, they are asked again.
        const heldBy = (entry as Parked).held_by;
        let hooked: BeforeCallOutcome | undefined;
        if (decision.binding) {
          // A held call was approved as the hooks before its holder left it: that call is kept.
          hooked = heldBy !== undefined ? { kind: "run", call } : await runBeforeFunctionCallHooks(tx.trigger, tx.sid, call);
          if (hooked.kind === "run") {
            const now = await bindingOf(hooked.call, await currentPolicyVersion(tx.trigger));
            if (bindingChange(decision.binding, now) !== undefined) {
              const asked = pendingRecord(tx.sid, rec.run_id, call, now, Date.now(), pendingTimeoutMs());
              await writePending(tx.trigger, asked);
              await deleteDecision(tx.trigger, tx.sid, cid);
              // A new question: its decision wakes the turn under a new step (a wake is keyed by
              // step, call and decision, and this call's first allow has used that key).
              rec.step += 1;
              rec.awaiting_approval = [
                ...(rec.awaiting_approval ?? []),
                {
                  ...entry,
                  pending_at: asked.pending_at,
                  expires_at: asked.expires_at,
                  args_hash: now.args_hash,
                  policy_version: now.policy_version,
                },
              ];
              tool.keepOpen();
              continue;
            }
          }
        }
        // No second policy decision: the person's allow is the decision. The checkpoint drops the
        // entry and marks the call triggered in one write, before the decision row goes.
        work.prepared[index] = { route: "pre_approved", call };
        await tool.within(() =>
          runCall(
            tx,
            work,
            call,
            async () => {
              await deleteDecision(tx.trigger, tx.sid, cid);
              await retirePending(tx.trigger, tx.sid, cid, "allow");
            },
            undefined,
            hooked,
            heldBy,
            // Held (again) by a pre_trigger hook: parked anew, woken by a decision under a new step.
            async (again) => {
              await deleteDecision(tx.trigger, tx.sid, cid);
              rec.step += 1;
              rec.awaiting_approval = [...(rec.awaiting_approval ?? []), again];
              changed = true;
            },
          ),
        );
      } else {
        await recordResult(tx, work, call, decisionResult(call, decision), 0, true);
        await deleteDecision(tx.trigger, tx.sid, cid);
        await retirePending(
          tx.trigger,
          tx.sid,
          cid,
          decision.expired ? "timeout" : decision.decision === "aborted" ? "aborted" : "deny",
          decision.reason,
        );
      }
      settleToolSpan(tool, work, call.id);
    }
  }
  if ((rec.awaiting_approval ?? []).length > 0) {
    if (changed) await tx.checkpoint();
    return;
  }
  delete rec.awaiting_approval;
  if (work.prepared.every((p) => work.executed[p.call.id])) return finalizeBatch(tx);
  rec.state = "function_execute";
  await tx.save();
}

function resultMessage(prepared: PreparedCall, work: Work, now: number): FunctionResultMessage {
  const done = work.executed[prepared.call.id];
  return {
    role: "function_result",
    function_call_id: prepared.call.id,
    function_id: prepared.call.function_id,
    content: done.result.content,
    details: done.result.details,
    is_error: done.is_error,
    timestamp: now,
    ...(done.gate ? { gate: done.gate } : {}),
  };
}

/** Results onto the transcript in the assistant's call order (one idempotent batch), one
 * turn_end, then finish if every result asked to terminate, else straight to the next round
 * (assistant_streaming takes any steering first; docs/harness-contracts.md §2.8). */
export async function finalizeBatch(tx: Tx): Promise<void> {
  const rec = tx.rec;
  const { last, work } = requireBatch(rec);
  const now = Date.now();
  const missing = work.prepared.find((p) => !work.executed[p.call.id]);
  if (missing) throw new InvariantError(`finalizing a batch with call ${missing.call.id} not executed`);
  const results = work.prepared.map((p) => resultMessage(p, work, now));
  await appendMany(
    tx.trigger,
    tx.sid,
    results.map((m) => ({ entry_id: resultEntryId(rec.run_id, m.function_call_id), message: m })),
  );
  const terminate = work.prepared.length > 0 && work.prepared.every((p) => work.executed[p.call.id].result.terminate === true);
  rec.function_results = results;
  delete rec.work;
  delete rec.awaiting_approval;
  turnEndOnce(tx, last);
  if (terminate) return finishSession(tx);
  rec.state = "assistant_streaming";
  await tx.save();
}

/** A stop while a batch is open: every call still without a result gets one (interrupted if it
 * was started, aborted otherwise) so no function_call is left dangling on the transcript. */
export async function closeBatchOnStop(tx: Tx, reason: string): Promise<void> {
  const rec = tx.rec;
  if (!rec.last_assistant) return;
  // Stopped before function_execute planned the batch: plan it, so every call gets its result.
  const work = (rec.work ??= { prepared: planBatch(rec.last_assistant), executed: {}, calls: {} });
  work.calls ??= {};
  for (const p of work.prepared) {
    const call = p.call;
    if (work.executed[call.id]) continue;
    const wasParked = (rec.awaiting_approval ?? []).some((a) => a.function_call_id === call.id);
    const result = work.calls[call.id] === "triggered" ? interrupted(call) : decisionResult(call, { decision: "aborted", reason });
    if (wasParked) noteGate(work, call.id, { approval: "aborted" });
    work.executed[call.id] = { call, result, is_error: true, duration_ms: 0, gate: work.gates?.[call.id] ?? { policy: "none" } };
    work.calls[call.id] = "done";
    if (wasParked) {
      await deleteDecision(tx.trigger, tx.sid, call.id);
      await retirePending(tx.trigger, tx.sid, call.id, "aborted", reason);
    }
  }
  delete rec.awaiting_approval;
  const now = Date.now();
  const results = work.prepared.map((p) => resultMessage(p, work, now));
  await appendMany(
    tx.trigger,
    tx.sid,
    results.map((m) => ({ entry_id: resultEntryId(rec.run_id, m.function_call_id), message: m })),
  );
  rec.function_results = results;
  turnEndOnce(tx, rec.last_assistant);
}
