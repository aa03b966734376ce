// The difference between a recorded turn and its replay, step by step and call by call, each as a
// sentence a person reads and a kind a test asserts (docs/cassettes.md).
import type { CallGate, CassetteCall, CassetteStep, ReplayDifference } from "@iii-edge/protocol/harness";
import { textOf } from "./turn.ts";

export interface TurnOutcome {
  steps: CassetteStep[];
  final_state: string;
  /** What a person read at the end: a cassette's `final_text`, the replay's last step's text. */
  final_text: string;
}

/** JSON with object keys sorted: two values are the same when these are. */
export function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.keys(v)
      .sort()
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(v) ?? "null";
}

const same = (a: unknown, b: unknown) => canonical(a) === canonical(b);

/** How a call was decided, in words. */
function decidedText(g: CallGate | undefined): string {
  if (!g) return "not recorded";
  const policy = {
    allow: "allowed by the policy",
    deny: "denied by the policy",
    needs_approval: "needing a person",
    none: "settled before the policy",
  }[g.policy];
  if (!g.approval) return g.policy === "needs_approval" ? `${policy}, with no decision` : policy;
  const person = { allow: "approved", deny: "denied", aborted: "aborted", expired: "left to expire" }[g.approval];
  return `${policy}, ${person} by a person`;
}

/** What a call ran on: the policy's allow, or a person's. */
const ran = (g: CallGate) => g.policy === "allow" || (g.policy === "needs_approval" && g.approval === "allow");

function gateDifference(step: number, before: CassetteCall, after: CassetteCall): ReplayDifference | undefined {
  const b = before.gate;
  const a = after.gate;
  if (!b || !a) return undefined;
  if (b.policy === a.policy && b.approval === a.approval) return undefined;
  const at = `step ${step}, call ${before.function_call_id} to ${before.function_id}`;
  const base = { step, function_call_id: before.function_call_id, function_id: before.function_id, before: b, after: a };
  const text = `${at}: was ${decidedText(b)}, now ${decidedText(a)}`;
  if (a.policy === "deny" && b.policy !== "deny") return { kind: "call_denied", ...base, text };
  if (a.policy === "needs_approval" && b.policy === "allow") return { kind: "call_needs_approval", ...base, text };
  if (a.policy === "allow" && b.policy !== "allow") return { kind: "call_allowed", ...base, text };
  if (a.policy !== b.policy) return { kind: "policy_changed", ...base, text };
  if (ran(a) !== ran(b) || a.approval !== b.approval) return { kind: "approval_changed", ...base, text };
  return undefined;
}

function callDifferences(step: number, before: CassetteCall, after: CassetteCall): ReplayDifference[] {
  const out: ReplayDifference[] = [];
  const where = { step, function_call_id: before.function_call_id, function_id: before.function_id };
  const at = `step ${step}, call ${before.function_call_id} to ${before.function_id}`;
  if (before.function_id !== after.function_id)
    out.push({
      kind: "argument_changed",
      ...where,
      before: before.function_id,
      after: after.function_id,
      text: `${at}: now calls ${after.function_id}`,
    });
  if (!same(before.arguments, after.arguments))
    out.push({
      kind: "argument_changed",
      ...where,
      before: before.arguments,
      after: after.arguments,
      text: `${at}: arguments ${canonical(before.arguments)} became ${canonical(after.arguments)}`,
    });
  const gate = gateDifference(step, before, after);
  if (gate) out.push(gate);
  // A different decision already explains a different result; a result that changed on its own is worth its own line.
  else if (before.is_error !== after.is_error || !same(before.result?.content, after.result?.content))
    out.push({
      kind: "result_changed",
      ...where,
      before: { is_error: before.is_error, result: before.result },
      after: { is_error: after.is_error, result: after.result },
      text: `${at}: its result changed${before.is_error !== after.is_error ? (after.is_error ? " to an error" : " from an error to a success") : ""}`,
    });
  return out;
}

/** Every difference between the recorded turn and the replayed one, in step order. */
export function diffTurns(recorded: TurnOutcome, replayed: TurnOutcome): ReplayDifference[] {
  const out: ReplayDifference[] = [];
  const n = Math.max(recorded.steps.length, replayed.steps.length);
  for (let i = 0; i < n; i++) {
    const step = i + 1;
    const b = recorded.steps[i];
    const a = replayed.steps[i];
    if (!a) {
      out.push({ kind: "step_missing", step, before: textOf(b!.message), after: null, text: `step ${step}: the replay ended before it` });
      continue;
    }
    if (!b) {
      out.push({
        kind: "step_added",
        step,
        before: null,
        after: textOf(a.message),
        text: `step ${step}: the replay took a step the recorded turn did not`,
      });
      continue;
    }
    if ((b.message.model ?? "") !== (a.message.model ?? ""))
      out.push({
        kind: "model_changed",
        step,
        before: b.message.model,
        after: a.message.model,
        text: `step ${step}: answered as ${a.message.model}, recorded from ${b.message.model}`,
      });
    const replayedCalls = new Map(a.calls.map((c) => [c.function_call_id, c]));
    for (const rc of b.calls) {
      const ac = replayedCalls.get(rc.function_call_id);
      if (!ac) {
        out.push({
          kind: "call_missing",
          step,
          function_call_id: rc.function_call_id,
          function_id: rc.function_id,
          before: rc.arguments,
          after: null,
          text: `step ${step}: the replay made no call ${rc.function_call_id} to ${rc.function_id}`,
        });
        continue;
      }
      replayedCalls.delete(rc.function_call_id);
      out.push(...callDifferences(step, rc, ac));
    }
    for (const ac of replayedCalls.values())
      out.push({
        kind: "call_added",
        step,
        function_call_id: ac.function_call_id,
        function_id: ac.function_id,
        before: null,
        after: ac.arguments,
        text: `step ${step}: the replay made a new call ${ac.function_call_id} to ${ac.function_id}`,
      });
  }
  const lastBefore = recorded.final_text;
  const lastAfter = replayed.final_text;
  if (lastBefore !== lastAfter)
    out.push({
      kind: "final_text_changed",
      before: lastBefore,
      after: lastAfter,
      text: `the final text changed: ${JSON.stringify(lastBefore)} became ${JSON.stringify(lastAfter)}`,
    });
  if (recorded.final_state !== replayed.final_state)
    out.push({
      kind: "final_state_changed",
      before: recorded.final_state,
      after: replayed.final_state,
      text: `the turn ended ${replayed.final_state}, recorded ${recorded.final_state}`,
    });
  return out;
}

/** The differences as lines a person reads. */
export function reportOf(differences: readonly ReplayDifference[]): string {
  if (differences.length === 0) return "no difference: the replay decided and answered every step as the recorded turn did";
  return differences.map((d) => `- ${d.text}`).join("\n");
}
