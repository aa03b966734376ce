// assistant_streaming (docs/harness-contracts.md §1.4, §2.3): one LLM round. The provider writes
// AssistantMessageEvents into an engine channel while this step drains it; the provider call is
// started, not awaited.
import { z } from "zod";
import type { AgentMessage, AssistantMessage, AssistantMessageEvent } from "@iii-edge/protocol/harness";
import { callIntoChannel, type Channels } from "@iii-edge/sdk-edge/worker";
import { errorCode, errorText, type Trigger } from "./calls.ts";
import { PROVIDER_DRAIN_GRACE_MS, PROVIDER_TIMEOUT_MS } from "./constants.ts";
import type { EventLog } from "./events.ts";
import { syntheticAssistant } from "./messages.ts";
import type { StoredRunRequest } from "./run-request.ts";

/** Which provider serves `model` when the run names none (§1.4): never lmstudio. */
export function inferProvider(model: string): string {
  const m = model.trim().toLowerCase();
  if (m.startsWith("gpt-") || /^o\d(?:$|[-.])/.test(m)) return "openai";
  if (m.startsWith("kimi-") || m.startsWith("moonshot-v1-")) return "kimi";
  return "anthropic";
}

const assistantShape = z.looseObject({
  role: z.literal("assistant"),
  content: z.array(z.looseObject({ type: z.string() })),
  stop_reason: z.string(),
});
const frameShape = z.looseObject({ type: z.string() });

function parseFrame(item: string | Uint8Array): AssistantMessageEvent | undefined {
  const text = typeof item === "string" ? item : new TextDecoder().decode(item);
  try {
    const v: unknown = JSON.parse(text);
    // The frame union is the providers' contract (§4.2); its discriminator is checked here, the
    // message fields where they are used.
    return frameShape.safeParse(v).success ? (v as AssistantMessageEvent) : undefined;
  } catch {
    return undefined;
  }
}

const asAssistant = (v: unknown): AssistantMessage | undefined =>
  assistantShape.safeParse(v).success ? (v as AssistantMessage) : undefined;

export interface StreamOutcome {
  message: AssistantMessage;
  bodyStreamed: boolean;
}

/**
 * Start `provider::<name>::stream` into a fresh channel and drain it concurrently: every
 * non-terminal frame goes out as `message_update` as it arrives; the first `done`/`error` ends
 * the round. No terminal frame (the provider failed, the channel closed early, the budget ran
 * out) → a synthetic error assistant (`error_kind: "transient"`), surfaced as one text delta.
 */
export async function streamAssistant(
  trigger: Trigger,
  channels: Channels,
  events: EventLog,
  req: StoredRunRequest,
  messages: AgentMessage[],
): Promise<StreamOutcome> {
  let partial: AssistantMessage | undefined;
  let terminal: AssistantMessage | undefined;
  let bodyStreamed = false;
  const { callError: providerError } = await callIntoChannel(
    { trigger, channels },
    (writer) => ({
      function_id: `provider::${req.provider}::stream`,
      payload: { writer_ref: writer, system_prompt: req.system_prompt || null, model: req.model, messages, tools: req.function_schemas },
    }),
    { timeoutMs: PROVIDER_TIMEOUT_MS, drainGraceMs: PROVIDER_DRAIN_GRACE_MS },
    (item) => {
      const frame = parseFrame(item);
      if (!frame || frame.type === "ping") return;
      if (frame.type === "done") {
        terminal = asAssistant(frame.message);
        return true;
      }
      if (frame.type === "error") {
        const m = asAssistant(frame.error);
        terminal = m ? { ...m, stop_reason: "error" } : undefined;
        return true;
      }
      if ("partial" in frame) partial = asAssistant(frame.partial) ?? partial;
      if (frame.type === "text_delta" || frame.type === "thinking_delta") bodyStreamed = true;
      events.emit({
        type: "message_update",
        message: partial ?? syntheticAssistant("", "end", { model: req.model, provider: req.provider }),
        llm_event: frame,
      });
    },
  );
  if (terminal) return { message: terminal, bodyStreamed };

  const why =
    providerError !== undefined
      ? `provider ${req.provider} failed: ${errorCode(providerError) ?? "error"}: ${errorText(providerError)}`
      : `provider ${req.provider} ended the stream without a final message`;
  const message = syntheticAssistant(why, "error", { error_kind: "transient", model: req.model, provider: req.provider });
  events.emit({ type: "message_update", message, llm_event: { type: "text_delta", partial: message, delta: why } });
  return { message, bodyStreamed: true };
}
