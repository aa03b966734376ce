// Budget enforcement around each provider call (docs/harness-contracts.md §6.2 "Where it is enforced"):
// before the call, `budget::check` with an estimate and a hold under the round's id; after it,
// `budget::record` of the provider's reported usage under the same id (so a redelivered step never
// charges twice). A run that names a budget cannot go past it unchecked: a check that cannot be
// made refuses the round (fail closed), except for transport failures, which go back to the queue
// like any dependency that is briefly unreachable (the provider has not been called yet).
import type { AgentFunction, AgentMessage, AssistantMessage, BudgetCheckReason, TurnStateRecord } from "@iii-edge/protocol/harness";
import { MAX_USAGE_TOKENS } from "@iii-edge/protocol/harness";
import { z } from "zod";
import { errorCode, errorText, isTransportFailure, TransientError, type Trigger } from "./calls.ts";
import { syntheticAssistant } from "./messages.ts";
import type { StoredRunRequest } from "./run-request.ts";
import { isRecord } from "@iii-edge/protocol";

/** Characters per token the input estimate assumes: low on purpose (English prose averages about
 * 4, code and JSON about 3), so the estimate errs high rather than letting a round through. */
export const ESTIMATE_CHARS_PER_TOKEN = 3;
/** Tokens an image is estimated at (a ~1 megapixel image is ~1 600 tokens at Anthropic and
 * OpenAI); its base64 text says nothing about its price. */
export const ESTIMATE_IMAGE_TOKENS = 1_600;
/** Framing tokens per message (role, separators) on top of its content. */
export const ESTIMATE_MESSAGE_OVERHEAD_TOKENS = 4;
/** Output tokens the estimate reserves: the answer's length is unknown before the call; this is a
 * typical answer (capped by the model's own maximum when the catalog knows it). */
export const ESTIMATE_OUTPUT_TOKENS = 1_024;
/** `budget::check` / `budget::record`: a few state reads and one compare-and-set, retried under
 * contention on a hot budget. */
export const BUDGET_CALL_TIMEOUT_MS = 10_000;
/** `budget::record` attempts when the call did not get through: the model has answered, so the
 * step cannot be retried for it (that would call the model again). */
export const RECORD_ATTEMPTS = 3;

/** The round's id, the hold's and the record's: stable across redeliveries of the step. */
export const budgetRoundId = (rec: Pick<TurnStateRecord, "run_id" | "turn_count">): string => `${rec.run_id}:${rec.turn_count}`;

export interface BudgetRefusal {
  /** `budget_exceeded`: the budget refused; `budget_unavailable`: it could not be checked. */
  kind: "budget_exceeded" | "budget_unavailable";
  message: string;
  assistant: AssistantMessage;
}

type Json = Record<string, unknown>;

function contentChars(content: unknown): number {
  if (typeof content === "string") return content.length;
  if (!Array.isArray(content)) return content === undefined ? 0 : (JSON.stringify(content)?.length ?? 0);
  let n = 0;
  for (const b of content) {
    if (!isRecord(b)) continue;
    if ((b.type === "text" || b.type === "thinking") && typeof b.text === "string") n += b.text.length;
    else if (b.type === "image") n += ESTIMATE_IMAGE_TOKENS * ESTIMATE_CHARS_PER_TOKEN;
    else if (b.type === "function_result") n += contentChars(b.content);
    else n += JSON.stringify(b).length;
  }
  return n;
}

/** Input tokens of a provider request, estimated from its size (ESTIMATE_CHARS_PER_TOKEN). */
export function estimateInputTokens(systemPrompt: string, messages: readonly AgentMessage[], tools: readonly AgentFunction[]): number {
  let chars = systemPrompt.length + JSON.stringify(tools).length;
  for (const m of messages)
    chars += contentChars((m as { content?: unknown }).content) + ESTIMATE_MESSAGE_OVERHEAD_TOKENS * ESTIMATE_CHARS_PER_TOKEN;
  return Math.ceil(chars / ESTIMATE_CHARS_PER_TOKEN);
}

const checkAnswer = z.looseObject({
  allowed: z.boolean(),
  reason: z.string().optional(),
  estimated_cost_micros: z.number().optional(),
  spent_micros: z.number().optional(),
  held_micros: z.number().optional(),
  ceiling_micros: z.number().optional(),
});

/** Exact dollars of an integer µUSD amount, e.g. 1500 → "0.001500". */
export function formatMicros(micros: number): string {
  const sign = micros < 0 ? "-" : "";
  const a = Math.abs(Math.trunc(micros));
  return `${sign}${Math.floor(a / 1_000_000)}.${String(a % 1_000_000).padStart(6, "0")}`;
}

function refusal(kind: BudgetRefusal["kind"], message: string): BudgetRefusal {
  return { kind, message, assistant: syntheticAssistant(message, "error", { error_kind: "permanent" }) };
}

function refusalText(budgetId: string, a: z.infer<typeof checkAnswer>, req: StoredRunRequest): string {
  const reason = (a.reason ?? "refused") as BudgetCheckReason | "refused";
  if (reason === "unpriced_model")
    return `budget exceeded: unpriced_model (budget ${budgetId}: no price is known for ${req.provider}/${req.model}, so the call cannot be checked; set one with budget::set_prices)`;
  const usd = (m: number | undefined) => (m === undefined ? "?" : formatMicros(m));
  return `budget exceeded: ${reason} (budget ${budgetId}: ${usd(a.spent_micros)} USD spent and ${usd(a.held_micros)} held by calls in flight, of ${usd(a.ceiling_micros)}; this call was estimated at ${usd(a.estimated_cost_micros)} USD)`;
}

/**
 * `budget::check` before a provider call, holding the estimate (input from the request's size ×
 * the input price, plus ESTIMATE_OUTPUT_TOKENS × the output price — the worker prices it) under the
 * round's id. Undefined: go ahead. A refusal: end the run without calling the model.
 */
export async function checkBudget(
  trigger: Trigger,
  rec: TurnStateRecord,
  req: StoredRunRequest,
  messages: readonly AgentMessage[],
): Promise<BudgetRefusal | undefined> {
  const budgetId = req.budget_id!;
  const maxOut = rec.model_meta?.max_output_tokens;
  const estimate = {
    provider: req.provider,
    model: req.model,
    input_tokens: Math.min(estimateInputTokens(req.system_prompt ?? "", messages, req.function_schemas ?? []), MAX_USAGE_TOKENS),
    output_tokens: maxOut ? Math.min(ESTIMATE_OUTPUT_TOKENS, maxOut) : ESTIMATE_OUTPUT_TOKENS,
  };
  let answer: unknown;
  try {
    answer = await trigger({
      function_id: "budget::check",
      payload: { budget_id: budgetId, estimate, principal_id: rec.session_id, hold_id: budgetRoundId(rec) },
      timeoutMs: BUDGET_CALL_TIMEOUT_MS,
    });
  } catch (e) {
    const code = errorCode(e);
    if (isTransportFailure(e) || code === "budget_busy") throw new TransientError(`budget::check: ${errorText(e)}`, { cause: e });
    if (code === "function_not_found") {
      return refusal(
        "budget_unavailable",
        `budget not checked: budget::check is not registered (no budget worker is connected); the run names budget ${budgetId}, so the model is not called`,
      );
    }
    return refusal(
      "budget_unavailable",
      `budget not checked: budget::check failed for budget ${budgetId}: ${code ?? "error"}: ${errorText(e)}`,
    );
  }
  const a = checkAnswer.safeParse(answer);
  if (!a.success)
    return refusal("budget_unavailable", `budget not checked: budget::check answered an unreadable result for budget ${budgetId}`);
  if (a.data.allowed) return undefined;
  return refusal("budget_exceeded", refusalText(budgetId, a.data, req));
}

const token = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isFinite(v) && v >= 0 ? Math.min(Math.trunc(v), MAX_USAGE_TOKENS) : undefined;

/** The provider's usage as `budget::record` takes it (whole, non-negative token counts). */
function usageOf(m: AssistantMessage): Json {
  const u: Json = {};
  const src = isRecord(m.usage) ? m.usage : {};
  for (const k of ["input", "output", "cache_read", "cache_write", "reasoning"] as const) {
    const n = token(src[k]);
    if (n !== undefined) u[k] = n;
  }
  if (typeof src.cost_usd === "number" && Number.isFinite(src.cost_usd) && src.cost_usd >= 0) u.cost_usd = src.cost_usd;
  return u;
}

/**
 * After the provider call: `budget::record` of the reported usage under the round's id (idempotent;
 * it also settles the check's hold — a round with no usage records 0). It never fails the run: the
 * model has answered and its cost is spent. A failure is retried a little, then logged.
 */
export async function recordBudgetSpend(
  trigger: Trigger,
  rec: TurnStateRecord,
  req: StoredRunRequest,
  message: AssistantMessage,
): Promise<void> {
  const payload = {
    budget_id: req.budget_id,
    record_id: budgetRoundId(rec),
    usage: usageOf(message),
    // The model that served the round prices it: after a failover that is a fallback, not the run's own.
    provider: message.provider || req.provider,
    model: message.model || req.model,
    principal_id: rec.session_id,
  };
  for (let attempt = 1; ; attempt++) {
    try {
      await trigger({ function_id: "budget::record", payload, timeoutMs: BUDGET_CALL_TIMEOUT_MS });
      return;
    } catch (e) {
      const retry = isTransportFailure(e) || errorCode(e) === "budget_busy";
      if (!retry || attempt >= RECORD_ATTEMPTS) {
        console.warn(
          `turn-orchestrator: spend of round ${payload.record_id} not recorded on budget ${req.budget_id}: ${errorCode(e) ?? "error"}: ${errorText(e)}`,
        );
        return;
      }
    }
  }
}
