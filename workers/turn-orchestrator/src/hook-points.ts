// The five hook points of a turn (protocol/src/harness/hooks.ts), where the steps call them:
//   pre_turn       provisioning, before anything is spent           deny → the run fails
//   pre_generate   each round, over the window about to be sent     system prompt / appended messages; deny → fails
//   post_generate  each round, once the assistant message is final  read-only
//   pre_trigger    each call, after the policy (or a person) allowed it, before it runs
//                  arguments rewritten; deny → an error result with the reason; hold → parks like an approval
//   post_trigger   each call, over its result before it is recorded content / details / is_error rewritten
// A point with nothing bound costs nothing (hook-chain.ts's cache). A chain that ran gets one span
// (`hooks <point>`) in the turn's trace. What pre_trigger / post_trigger changed is kept with the
// call's checkpoint (`work.hooks`), written in the same save as the call's state, so a redelivered
// step neither asks the hooks again for a call already checkpointed nor sees something else.
import {
  HOOK_TRIGGER_TYPES,
  type AgentMessage,
  type AssistantMessage,
  type FunctionCall,
  type FunctionResult,
  type HookChange,
  type HookInput,
  type HookPoint,
} from "@iii-edge/protocol/harness";
import { depthOf, enginePorts, hookBindings, hookEnvelope, runHookChain, type ChainOutcome, type HookBinding } from "./hook-chain.ts";
import { loadRunRequest, type StoredRunRequest } from "./run-request.ts";
import type { Tx } from "./store.ts";

/** What a call's hooks changed, per call id, kept in the batch checkpoint. */
export interface CallHookChanges {
  pre_trigger?: HookChange[];
  post_trigger?: HookChange[];
  /** The hook that held the call (the chain resumes after it once a person allows). */
  held_by?: string;
}
export type WorkWithHooks = { hooks?: Record<string, CallHookChanges> };

/** Run `point`'s chain with a span around it; undefined when nothing is bound there. */
async function chain(
  tx: Tx,
  point: HookPoint,
  input: () => Promise<HookInput>,
  opts: { resumeAfter?: string } = {},
): Promise<ChainOutcome | undefined> {
  const bindings: HookBinding[] = await hookBindings.of(tx.trigger, point);
  if (bindings.length === 0) return undefined;
  const hookInput = await input();
  return tx.tracer.withSpan(
    `hooks ${point}`,
    { attributes: { "iii.trigger.type": HOOK_TRIGGER_TYPES[point], "iii.session_id": tx.sid, "iii.hook.bound": bindings.length } },
    async (span) => {
      const out = await runHookChain(enginePorts(tx.trigger), bindings, hookInput, opts);
      span.setAttribute("iii.hook.decision", out.decision);
      if (out.decision !== "continue") span.setAttribute("iii.hook.by", out.by);
      if (out.changes.length > 0) span.setAttribute("iii.hook.changed_by", out.changes.map((c) => c.function_id).join(","));
      return out;
    },
  );
}

async function envelope(tx: Tx, point: HookPoint, req?: StoredRunRequest): Promise<HookInput> {
  const r = req ?? (await loadRunRequest(tx.trigger, tx.sid)).req;
  return hookEnvelope(point, tx.sid, tx.rec.run_id, tx.rec.turn_count, depthOf(r));
}

/** `pre_turn`: the reason a hook denied the run, or undefined to go on. */
export async function preTurn(tx: Tx, req: StoredRunRequest): Promise<string | undefined> {
  const out = await chain(tx, "pre_turn", () => envelope(tx, "pre_turn", req));
  return out?.decision === "deny" ? `denied by pre_turn hook ${out.by}: ${out.reason}` : undefined;
}

/** `pre_generate` over what is about to be sent: the system prompt and messages to send (as the
 * hooks left them), or the reason a hook denied the round. */
export async function preGenerate(
  tx: Tx,
  req: StoredRunRequest,
  messages: AgentMessage[],
): Promise<{ deny: string } | { system_prompt: string; messages: AgentMessage[] }> {
  const out = await chain(tx, "pre_generate", async () => ({
    ...(await envelope(tx, "pre_generate", req)),
    generate: { system_prompt: req.system_prompt, messages, model: req.model, provider: req.provider },
  }));
  if (!out) return { system_prompt: req.system_prompt, messages };
  if (out.decision === "deny") return { deny: `denied by pre_generate hook ${out.by}: ${out.reason}` };
  const g = out.input.generate!;
  return { system_prompt: g.system_prompt, messages: g.messages };
}

/** `post_generate` (read-only): the reason a fail_closed hook failed, or undefined. */
export async function postGenerate(tx: Tx, req: StoredRunRequest, message: AssistantMessage): Promise<string | undefined> {
  const out = await chain(tx, "post_generate", async () => ({ ...(await envelope(tx, "post_generate", req)), generated: { message } }));
  return out?.decision === "deny" ? `post_generate hook ${out.by}: ${out.reason}` : undefined;
}

export type PreTriggerOutcome =
  | { kind: "run"; call: FunctionCall; changes: HookChange[] }
  | { kind: "deny"; by: string; reason: string }
  | { kind: "hold"; by: string; call: FunctionCall; changes: HookChange[]; pending_timeout_ms?: number };

/** `pre_trigger` for a call about to run (`resumeAfter`: a held call released, the chain goes on
 * after the hook that held it). */
export async function preTrigger(tx: Tx, call: FunctionCall, resumeAfter?: string): Promise<PreTriggerOutcome> {
  const out = await chain(
    tx,
    "pre_trigger",
    async () => ({
      ...(await envelope(tx, "pre_trigger")),
      call: { id: call.id, function_id: call.function_id, arguments: call.arguments },
    }),
    resumeAfter === undefined ? {} : { resumeAfter },
  );
  if (!out) return { kind: "run", call, changes: [] };
  const rewritten = (input: HookInput): FunctionCall =>
    input.call && input.call.arguments !== call.arguments ? { ...call, arguments: input.call.arguments } : call;
  if (out.decision === "deny") return { kind: "deny", by: out.by, reason: out.reason };
  if (out.decision === "hold") {
    const held: PreTriggerOutcome = { kind: "hold", by: out.by, call: rewritten(out.input), changes: out.changes };
    if (out.pending_timeout_ms !== undefined) held.pending_timeout_ms = out.pending_timeout_ms;
    return held;
  }
  return { kind: "run", call: rewritten(out.input), changes: out.changes };
}

/** `post_trigger` over a call's result: the result (and error flag) as the hooks left them. A
 * fail_closed hook that failed withholds the result: the model reads why instead. */
export async function postTrigger(
  tx: Tx,
  call: FunctionCall,
  result: FunctionResult,
  isError: boolean,
): Promise<{ result: FunctionResult; is_error: boolean; changes: HookChange[] }> {
  const out = await chain(tx, "post_trigger", async () => ({
    ...(await envelope(tx, "post_trigger")),
    result: {
      function_call_id: call.id,
      function_id: call.function_id,
      content: result.content,
      is_error: isError,
      details: result.details,
    },
  }));
  if (!out) return { result, is_error: isError, changes: [] };
  if (out.decision === "deny") {
    const reason = `The result of \`${call.function_id}\` was withheld: ${out.reason}`;
    return {
      result: { content: [{ type: "text", text: reason }], details: { error: "hook_failed", hook: out.by, reason } },
      is_error: true,
      changes: out.changes,
    };
  }
  const r = out.input.result!;
  const next: FunctionResult = { content: r.content, details: r.details };
  if (result.terminate !== undefined) next.terminate = result.terminate;
  return { result: next, is_error: r.is_error, changes: out.changes };
}

/** Keep what a call's hooks changed with the batch (saved by the caller's next checkpoint). */
export function keepChanges(work: WorkWithHooks, cid: string, point: "pre_trigger" | "post_trigger", changes: HookChange[]): void {
  if (changes.length === 0) return;
  work.hooks ??= {};
  const entry = (work.hooks[cid] ??= {});
  entry[point] = [...(entry[point] ?? []), ...changes];
}
