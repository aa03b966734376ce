// assistant_streaming (docs/harness-contracts.md §1.4, §2.3): one LLM round. The provider writes
// AssistantMessageEvents into an engine channel while this step drains it; the provider call is
// started, not awaited.
import { z } from "zod";
import type { AgentEvent, AgentMessage, AssistantMessage, AssistantMessageEvent } from "@iii-edge/protocol/harness";
import { parseModelRef, PROVIDER_CIRCUIT_OPEN, type FailoverReason, type ModelRef } from "@iii-edge/protocol/harness";
import { callIntoChannel, type Channels, type Tracer } from "@iii-edge/sdk-edge/worker";
import { errorCode, errorText, type Trigger } from "./calls.ts";
import { PROVIDER_DRAIN_GRACE_MS, PROVIDER_TIMEOUT_MS } from "./constants.ts";
import type { EventLog } from "./events.ts";
import { syntheticAssistant } from "./messages.ts";
import { outputRequestFields } from "./output-contract.ts";
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

/** The events of one channel item: one event, or (the request asks `batch_frames`) an array of
 * them; what does not parse is left out. The frame union is the providers' contract (§4.2); its
 * discriminator is checked here, the message fields where they are used. */
function parseFrames(item: string | Uint8Array): AssistantMessageEvent[] {
  const text = typeof item === "string" ? item : new TextDecoder().decode(item);
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return [];
  }
  return (Array.isArray(v) ? v : [v]).filter((f): f is AssistantMessageEvent => frameShape.safeParse(f).success);
}

const asAssistant = (v: unknown): AssistantMessage | undefined =>
  assistantShape.safeParse(v).success ? (v as AssistantMessage) : undefined;

export interface StreamOutcome {
  message: AssistantMessage;
  bodyStreamed: boolean;
}

/** What one provider call came to: its terminal message, or why there was none. */
interface Attempt {
  terminal?: AssistantMessage;
  providerError?: unknown;
  bodyStreamed: boolean;
  /** Some of the answer (a text, thinking or function-call frame) was streamed. */
  answered: boolean;
  /** The frames before the answer began (`start`, `usage`, an error's `stop`), not yet sent: a
   * step that goes on to the next model drops them, so the UI sees one message, not a failed one
   * first. */
  held: AgentEvent[];
}

/** A frame that carries part of the answer: a failure before the first of these is a failure
 * "before the first frame", which another model may take over without a half answer on screen. */
const isAnswerFrame = (type: string) => /^(?:text|thinking|functioncall)_/.test(type);

async function streamOnce(
  trigger: Trigger,
  channels: Channels,
  events: EventLog,
  req: StoredRunRequest,
  target: ModelRef,
  messages: AgentMessage[],
): Promise<Attempt> {
  let partial: AssistantMessage | undefined;
  const out: Attempt = { bodyStreamed: false, answered: false, held: [] };
  let deltaSeen = false;
  /** One event of the stream; true at the terminal one (what follows it is not read). */
  const onFrame = (frame: AssistantMessageEvent): boolean => {
    if (frame.type === "ping") return false;
    if (frame.type === "done") {
      out.terminal = asAssistant(frame.message);
      return true;
    }
    if (frame.type === "error") {
      const m = asAssistant(frame.error);
      out.terminal = m ? { ...m, stop_reason: "error" } : undefined;
      return true;
    }
    if ("partial" in frame) partial = asAssistant(frame.partial) ?? partial;
    if (frame.type === "text_delta" || frame.type === "thinking_delta") out.bodyStreamed = true;
    const update: AgentEvent = {
      type: "message_update",
      message: partial ?? syntheticAssistant("", "end", { model: target.model, provider: target.provider }),
      llm_event: frame,
    };
    if (!out.answered && isAnswerFrame(frame.type)) {
      out.answered = true;
      for (const held of out.held.splice(0)) events.emit(held);
    }
    if (!out.answered) {
      out.held.push(update);
      return false;
    }
    events.emit(update);
    // The answer's first delta goes in a write of its own, not behind the frames that came with it.
    if (!deltaSeen && frame.type.endsWith("_delta")) {
      deltaSeen = true;
      events.cut();
    }
    return false;
  };
  const { callError } = await callIntoChannel(
    { trigger, channels },
    (writer) => ({
      function_id: `provider::${target.provider}::stream`,
      payload: {
        writer_ref: writer,
        // Several events per channel item: a chunk of the answer crosses the channel as one message.
        batch_frames: true,
        system_prompt: req.system_prompt || null,
        model: target.model,
        messages,
        ...outputRequestFields(req.output, target.provider, req.function_schemas),
      },
    }),
    { timeoutMs: PROVIDER_TIMEOUT_MS, drainGraceMs: PROVIDER_DRAIN_GRACE_MS },
    (item) => parseFrames(item).some(onFrame),
  );
  out.providerError = callError;
  return out;
}

/** Why `attempt` may go to the next model, or undefined when it may not: only a provider that was
 * rate-limited, down or cut before any of the answer streamed (its own retries already spent). */
function failoverReason(attempt: Attempt): { reason: FailoverReason; message: string } | undefined {
  if (attempt.answered) return undefined;
  const t = attempt.terminal;
  if (!t)
    return {
      reason: "transient",
      message: `no final message: ${attempt.providerError === undefined ? "the stream ended early" : `${errorCode(attempt.providerError) ?? "error"}: ${errorText(attempt.providerError)}`}`,
    };
  if (t.stop_reason !== "error") return undefined;
  const message = t.error_message ?? "";
  if (message.startsWith(PROVIDER_CIRCUIT_OPEN)) return { reason: "circuit_open", message };
  if (t.error_kind === "rate_limited" || t.error_kind === "transient") return { reason: t.error_kind, message };
  return undefined;
}

/** The models a step may use, in order: the run's own, then its fallbacks (docs/harness.md). */
export function candidatesOf(req: StoredRunRequest): ModelRef[] {
  const own = { provider: req.provider, model: req.model };
  const rest = (req.fallback_models ?? []).map(parseModelRef);
  return [own, ...rest.filter((r) => r.provider !== own.provider || r.model !== own.model)];
}

/**
 * Start `provider::<name>::stream` into a fresh channel and drain it concurrently: every
 * non-terminal frame goes out as `message_update` as it arrives; the first `done`/`error` ends
 * the round. When the provider fails before any of the answer streamed (rate-limited, 5xx,
 * unreachable, cut, its breaker open) and the run names fallback models, the next one takes the
 * round: the switch is an `agent::events` entry and a span in the turn's trace. No terminal frame
 * from the last model tried (the provider failed, the channel closed early, the budget ran out) →
 * a synthetic error assistant (`error_kind: "transient"`), surfaced as one text delta.
 */
export async function streamAssistant(
  trigger: Trigger,
  channels: Channels,
  events: EventLog,
  req: StoredRunRequest,
  messages: AgentMessage[],
  tracer?: Tracer,
): Promise<StreamOutcome> {
  const candidates = candidatesOf(req);
  let attempt: Attempt | undefined;
  let target = candidates[0]!;
  for (let i = 0; i < candidates.length; i++) {
    target = candidates[i]!;
    attempt = await streamOnce(trigger, channels, events, req, target, messages);
    const next = candidates[i + 1];
    const why = next ? failoverReason(attempt) : undefined;
    if (!why || !next) {
      for (const held of attempt.held) events.emit(held);
      break;
    }
    events.emit({ type: "provider_failover", from: target, to: next, reason: why.reason, message: why.message });
    recordFailoverSpan(tracer, target, next, why.reason, why.message);
  }
  const { terminal, providerError, bodyStreamed } = attempt!;
  if (terminal) return { message: terminal, bodyStreamed };

  const why =
    providerError !== undefined
      ? `provider ${target.provider} failed: ${errorCode(providerError) ?? "error"}: ${errorText(providerError)}`
      : `provider ${target.provider} ended the stream without a final message`;
  const message = syntheticAssistant(why, "error", { error_kind: "transient", model: target.model, provider: target.provider });
  events.emit({ type: "message_update", message, llm_event: { type: "text_delta", partial: message, delta: why } });
  return { message, bodyStreamed: true };
}

/** A `provider_failover` span, child of the step's span: which model gave up, which took over, why. */
function recordFailoverSpan(tracer: Tracer | undefined, from: ModelRef, to: ModelRef, reason: FailoverReason, message: string): void {
  if (!tracer) return;
  const attributes = {
    "iii.failover.from": `${from.provider}:${from.model}`,
    "iii.failover.to": `${to.provider}:${to.model}`,
    "iii.failover.reason": reason,
  };
  const span = tracer.startSpan("provider_failover", { attributes: { ...attributes, "error.type": reason } });
  span.addEvent("provider_failover", { ...attributes, "exception.message": message.slice(0, 500) });
  span.end();
}
