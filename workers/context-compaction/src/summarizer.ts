// The summary is made by the session's own model (docs/harness-contracts.md §6.1): `provider::<name>::stream`
// writing AssistantMessageEvents into an engine channel, collected to the final message, no tools.
// One retry after 250 ms for errors that say they may pass (rate limits, transient, unknown); auth,
// permanent and overflow errors fail at once.
import { IIIError } from "@iii-edge/protocol";
import type { AssistantMessage, ContentBlock, ErrorKind } from "@iii-edge/protocol/harness";
import { callIntoChannel, type Channels } from "@iii-edge/sdk-edge/worker";

export type Trigger = <TInput = unknown, TOutput = unknown>(request: {
  function_id: string;
  payload: TInput;
  timeoutMs?: number;
  action?: { type: "void" };
}) => Promise<TOutput>;

/** One summariser call's budget: a summary of a large head from a slow model. */
export const SUMMARY_TIMEOUT_MS = 120_000;
/** After the provider's call settled with no terminal frame, how long frames already written may
 * still take to come through the channel. */
export const SUMMARY_DRAIN_GRACE_MS = 2_000;
/** The wait before the one retry (spec: 250 ms). */
export const SUMMARY_RETRY_DELAY_MS = 250;
const RETRYABLE: ReadonlySet<string> = new Set<ErrorKind | "unknown">(["rate_limited", "transient", "unknown"]);

export class SummaryError extends IIIError {
  readonly kind: string;
  constructor(kind: string, message: string) {
    super("summary_failed", message);
    this.kind = kind;
  }
}

export interface SummaryRequest {
  provider: string;
  model: string;
  system_prompt: string;
  user_prompt: string;
  max_tokens: number;
}

const textOf = (m: AssistantMessage): string =>
  (Array.isArray(m.content) ? (m.content as ContentBlock[]) : [])
    .filter((b): b is { type: "text"; text: string } => b.type === "text")
    .map((b) => b.text)
    .join("")
    .trim();

/** One provider call: the summary text ("" when the model said nothing), or a SummaryError. */
async function once(trigger: Trigger, channels: Channels, req: SummaryRequest): Promise<string> {
  let summary: string | undefined;
  let failure: SummaryError | undefined;
  const { callError: providerError } = await callIntoChannel(
    { trigger: (r) => trigger({ function_id: r.function_id, payload: r.payload, timeoutMs: r.timeoutMs }), channels },
    (writer) => ({
      function_id: `provider::${req.provider}::stream`,
      payload: {
        writer_ref: writer,
        system_prompt: req.system_prompt,
        model: req.model,
        messages: [{ role: "user", content: [{ type: "text", text: req.user_prompt }], timestamp: Date.now() }],
        tools: [],
        max_tokens: req.max_tokens,
      },
    }),
    { timeoutMs: SUMMARY_TIMEOUT_MS, drainGraceMs: SUMMARY_DRAIN_GRACE_MS },
    (item) => {
      const text = typeof item === "string" ? item : new TextDecoder().decode(item);
      let frame: { type?: unknown; message?: unknown; error?: unknown };
      try {
        frame = JSON.parse(text) as typeof frame;
      } catch {
        return;
      }
      if (frame.type === "done" && frame.message && typeof frame.message === "object") {
        summary = textOf(frame.message as AssistantMessage);
        return true;
      }
      if (frame.type === "error") {
        const e = (frame.error ?? {}) as Partial<AssistantMessage>;
        failure = new SummaryError(
          e.error_kind ?? "unknown",
          `the summariser (${req.provider}/${req.model}) failed: ${e.error_message ?? "provider error"}`,
        );
        return true;
      }
    },
  );
  if (summary !== undefined) return summary;
  if (failure) throw failure;
  const code =
    providerError && typeof providerError === "object" ? String((providerError as { code?: unknown }).code ?? "error") : undefined;
  if (code === "function_not_found")
    throw new SummaryError("permanent", `provider::${req.provider}::stream is not registered: no summariser for ${req.provider}`);
  throw new SummaryError(
    "unknown",
    `the summariser (${req.provider}/${req.model}) ended without a final message${code ? ` (${code})` : ""}`,
  );
}

/** The summary, retried once for retryable failures. */
export async function summarise(
  trigger: Trigger,
  channels: Channels,
  req: SummaryRequest,
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
): Promise<string> {
  try {
    return await once(trigger, channels, req);
  } catch (e) {
    if (!(e instanceof SummaryError) || !RETRYABLE.has(e.kind)) throw e;
    await sleep(SUMMARY_RETRY_DELAY_MS);
    return once(trigger, channels, req);
  }
}
