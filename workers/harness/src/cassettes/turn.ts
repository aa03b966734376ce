// A turn as a cassette reads it from a session's transcript: the entries of one run (`e_<run>_…`,
// docs/harness-contracts.md), its seed messages, each model step's final assistant message and each
// call's result with how it was decided (the `gate` the orchestrator stores on it).
import {
  AGENT_TRIGGER,
  type AgentMessage,
  type AssistantMessage,
  type CassetteCall,
  type CassetteStep,
  type ContentBlock,
  type FunctionResultMessage,
} from "@iii-edge/protocol/harness";
import { isRecord } from "@iii-edge/protocol";

export interface StoredEntry {
  entry_id: string;
  message: AgentMessage;
}

export interface RecordedTurn {
  input: AgentMessage[];
  steps: CassetteStep[];
}

/** The function a model's call reaches and its arguments: `agent_trigger {function, payload}` unwrapped. */
export function callTarget(block: { function_id: string; arguments: unknown }): { function_id: string; args: unknown } {
  let args = block.arguments;
  if (typeof args === "string") {
    try {
      args = JSON.parse(args);
    } catch {
      // kept as the string, as the orchestrator does
    }
  }
  if (block.function_id === AGENT_TRIGGER && isRecord(args) && typeof args.function === "string")
    return { function_id: args.function.trim(), args: args.payload ?? {} };
  return { function_id: block.function_id, args };
}

export const textOf = (m: AssistantMessage | undefined): string =>
  (m?.content ?? [])
    .filter((b): b is Extract<ContentBlock, { type: "text" }> => b?.type === "text")
    .map((b) => b.text)
    .join("");

/** The run's entries of a transcript (the active path, oldest first), as seeds and model steps. */
export function turnOf(entries: readonly StoredEntry[], runId: string): RecordedTurn | undefined {
  const prefix = `e_${runId}_`;
  const mine = entries.filter((e) => e.entry_id.startsWith(prefix));
  if (mine.length === 0) return undefined;
  const seedPrefix = `${prefix}user_`;
  const input = mine.filter((e) => e.entry_id.startsWith(seedPrefix)).map((e) => e.message);
  const results = new Map<string, FunctionResultMessage>();
  for (const e of mine) if (e.message.role === "function_result") results.set(e.message.function_call_id, e.message);
  const steps: CassetteStep[] = [];
  for (const e of mine) {
    if (e.message.role !== "assistant") continue;
    const message = e.message;
    const calls: CassetteCall[] = [];
    for (const b of message.content ?? []) {
      if (b?.type !== "function_call") continue;
      const t = callTarget(b);
      const r = results.get(b.id);
      const call: CassetteCall = {
        function_call_id: b.id,
        function_id: t.function_id,
        arguments: t.args,
        result: r ? { content: r.content, details: r.details ?? null } : null,
        is_error: r?.is_error ?? false,
      };
      if (r?.gate) call.gate = r.gate;
      calls.push(call);
    }
    steps.push({ message, calls });
  }
  return { input, steps };
}
