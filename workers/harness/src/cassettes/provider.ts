// `provider::cassette::stream`: a provider whose answers are a cassette's. The orchestrator streams
// a replay's model step exactly as any other (a channel, frames, a terminal `done`); this writes the
// recorded step into it. Which step: the replay's transcript holds one assistant message per step
// already answered, so the next is the one after them.
import { isRecord } from "@iii-edge/protocol";
import { CASSETTE_PROVIDER, providerStreamRequest, type AssistantMessage, type AssistantMessageEvent } from "@iii-edge/protocol/harness";
import type { WorkerSurface } from "@iii-edge/sdk-edge/worker";
import type { ReplayRecord } from "./index.ts";

export async function streamStep(
  iii: WorkerSurface,
  data: unknown,
  load: () => Promise<ReplayRecord>,
  now: () => number,
): Promise<{ ok: true; status: string }> {
  const req = providerStreamRequest.safeParse(data);
  if (!req.success) return { ok: true, status: "invalid_request" };
  const writer = await iii.channels.openWriter(req.data.writer_ref);
  const emit = (e: AssistantMessageEvent) => writer.write(JSON.stringify(e));
  try {
    let rec: ReplayRecord;
    try {
      rec = await load();
    } catch (e) {
      emit({ type: "error", error: failed(`replay not found: ${(e as Error).message}`, now()) });
      return { ok: true, status: "error" };
    }
    const k = req.data.messages.filter((m) => isRecord(m) && m.role === "assistant").length;
    const step = rec.cassette.steps[k];
    if (!step) {
      emit({
        type: "error",
        error: failed(`the cassette has ${rec.cassette.steps.length} model steps; the replay asked for step ${k + 1}`, now()),
      });
      return { ok: true, status: "error" };
    }
    const message: AssistantMessage = {
      ...step.message,
      provider: CASSETTE_PROVIDER,
      model: rec.overrides?.model ?? step.message.model,
      timestamp: now(),
    };
    emit({ type: "start", partial: { ...message, content: [] } });
    for (const b of message.content) {
      if (b.type === "text") emit({ type: "text_delta", partial: message, delta: b.text });
      else if (b.type === "function_call") emit({ type: "functioncall_end", partial: message });
    }
    emit({ type: "done", message });
    return { ok: true, status: "done" };
  } finally {
    writer.close();
  }
}

function failed(text: string, at: number): AssistantMessage {
  return {
    role: "assistant",
    content: [{ type: "text", text }],
    stop_reason: "error",
    error_message: text,
    error_kind: "permanent",
    model: "cassette",
    provider: CASSETTE_PROVIDER,
    timestamp: at,
  };
}
