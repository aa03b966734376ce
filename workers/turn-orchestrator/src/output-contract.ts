// Typed outputs (docs/harness.md, "Typed outputs"): a turn's `options.output` (iii's
// OutputContract) held to the provider's native structured output where it has one (OpenAI-compatible
// `response_format`), or to a synthetic `submit_result` tool the harness consumes itself (Anthropic).
// What the model answers is validated against the contract's JSON Schema; an answer that does not
// validate gets a nudge, at most MAX_VALIDATION_RETRIES times, then the turn ends with
// `result_error`. Pure: the steps call these and write what they return.
import {
  MAX_VALIDATION_RETRIES,
  SUBMIT_RESULT_TOOL,
  type AgentFunction,
  type AssistantMessage,
  type FunctionCall,
  type OutputContract,
} from "@iii-edge/protocol/harness";
import { z } from "zod";

/** Providers with no native structured output: the model ends a typed turn with `submit_result`. */
const SUBMIT_RESULT_PROVIDERS = new Set(["anthropic"]);

export const usesSubmitResult = (provider: string): boolean => SUBMIT_RESULT_PROVIDERS.has(provider);

/** Anthropic's tool input must be an object: a schema of another type is wrapped as `{result}`. */
const isObjectSchema = (schema: Record<string, unknown> | undefined): boolean => schema === undefined || schema.type === "object";

export function submitResultTool(contract: Extract<OutputContract, { type: "json" }>): AgentFunction {
  const parameters = isObjectSchema(contract.schema)
    ? (contract.schema ?? { type: "object" })
    : { type: "object", properties: { result: contract.schema }, required: ["result"] };
  return {
    name: SUBMIT_RESULT_TOOL,
    description:
      "Submit the final result of this task. Call it once, when you are done, with the result as its arguments; the turn ends with it.",
    parameters,
  };
}

/** What a provider request carries for the contract: the tools (with `submit_result` when the
 * provider needs it) and, for the others, `response_format`. */
export function outputRequestFields(
  contract: OutputContract | undefined,
  provider: string,
  tools: AgentFunction[],
): { tools: AgentFunction[]; response_format?: { type: "json"; schema?: Record<string, unknown> } } {
  if (contract?.type !== "json") return { tools };
  if (usesSubmitResult(provider)) return { tools: [...tools, submitResultTool(contract)] };
  return { tools, response_format: contract.schema ? { type: "json", schema: contract.schema } : { type: "json" } };
}

export type Validation = { ok: true; value: unknown } | { ok: false; error: string };

/** Validate `value` against the contract's schema (none: any JSON value). A schema zod cannot read
 * is reported as the error rather than waving the value through. */
export function validateOutput(contract: Extract<OutputContract, { type: "json" }>, value: unknown): Validation {
  if (!contract.schema) return { ok: true, value };
  let schema: z.ZodType;
  try {
    schema = z.fromJSONSchema(contract.schema as Parameters<typeof z.fromJSONSchema>[0]);
  } catch (e) {
    return { ok: false, error: `the output schema cannot be used: ${(e as Error).message}` };
  }
  const r = schema.safeParse(value);
  if (r.success) return { ok: true, value: r.data };
  return { ok: false, error: r.error.issues.map((i) => `${i.path.length ? i.path.join(".") : "(root)"}: ${i.message}`).join("; ") };
}

/** The JSON a text answer holds: the whole text, or the body of a fenced ```json block. */
export function parseJsonAnswer(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  const trimmed = text.trim();
  const fenced = /^```(?:json)?\s*\n([\s\S]*?)\n?```$/.exec(trimmed);
  const body = fenced ? fenced[1] : trimmed;
  if (body === "") return { ok: false, error: "the answer is empty, not JSON" };
  try {
    return { ok: true, value: JSON.parse(body) };
  } catch (e) {
    return { ok: false, error: `the answer is not JSON: ${(e as Error).message}` };
  }
}

const textOf = (m: AssistantMessage | null | undefined): string =>
  (m?.content ?? []).map((b) => (b.type === "text" ? b.text : "")).join("");

/** A `submit_result` call's value: its arguments, unwrapped when the schema was wrapped. */
export function submittedValue(contract: Extract<OutputContract, { type: "json" }>, call: Pick<FunctionCall, "arguments">): unknown {
  const args = call.arguments;
  if (isObjectSchema(contract.schema)) return args;
  return args && typeof args === "object" && "result" in args ? (args as { result: unknown }).result : args;
}

/** What the end of a typed turn decides. `accept`: the result; `nudge`: ask again with this text;
 * `give_up`: end with `result_error` (and the raw text as a best-effort result). */
export type OutputDecision =
  | { kind: "accept"; value: unknown }
  | { kind: "nudge"; text: string; error: string }
  | { kind: "give_up"; error: string; raw: string };

/** At the end of a turn with a `json` contract and no accepted result yet: judge the final text. */
export function judgeFinalAnswer(
  contract: Extract<OutputContract, { type: "json" }>,
  last: AssistantMessage | null | undefined,
  retriesSoFar: number,
  provider: string,
): OutputDecision {
  const raw = textOf(last);
  const parsed = parseJsonAnswer(raw);
  const checked: Validation = parsed.ok ? validateOutput(contract, parsed.value) : parsed;
  if (checked.ok) return { kind: "accept", value: checked.value };
  return nudgeOrGiveUp(checked.error, raw, retriesSoFar, usesSubmitResult(provider));
}

export function nudgeOrGiveUp(error: string, raw: string, retriesSoFar: number, submitTool: boolean): OutputDecision {
  if (retriesSoFar >= MAX_VALIDATION_RETRIES) return { kind: "give_up", error, raw };
  const how = submitTool
    ? `Call ${SUBMIT_RESULT_TOOL} with the result as its arguments.`
    : "Answer with the JSON value alone, nothing before or after it.";
  return { kind: "nudge", error, text: `Your result does not match the required output: ${error}. ${how}` };
}
