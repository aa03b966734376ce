// The providers worker's contracts (docs/harness-contracts.md §1.4, §4.2, §6.6): `provider::<name>::stream`
// and the models catalog (`models::*`).
import { z } from "zod";
import { ERROR_KINDS } from "./messages.ts";
import type { StateKey } from "./state.ts";

/** `provider::<name>::stream` request. `writer_ref` is the write end of an engine channel: the
 * provider writes one JSON text item per AssistantMessageEvent (or, asked with `batch_frames`, an
 * array of them) and closes it after the terminal one. */
export const providerStreamRequest = z.object({
  writer_ref: z.object({ channel_id: z.string(), access_key: z.string(), direction: z.literal("write") }),
  system_prompt: z.string().nullable().optional(),
  model: z.string().min(1),
  messages: z.array(z.unknown()),
  tools: z.array(z.unknown()).optional(),
  max_tokens: z.number().int().positive().optional(),
  /** A typed turn's output (docs/harness.md, "Typed outputs"): OpenAI-compatible providers send it as
   * `response_format` (json_schema when a schema is given, json_object otherwise). */
  response_format: z.object({ type: z.literal("json"), schema: z.record(z.string(), z.unknown()).optional() }).optional(),
  /** The reader takes several events in one item: the provider may write the events it has at once
   * (those one chunk of the upstream body made) as one JSON array item, in order, instead of one
   * item each. A reader that does not ask gets one event per item; a provider that does not know
   * the field writes one event per item, which such a reader also takes. */
  batch_frames: z.boolean().optional(),
});
export type ProviderStreamRequest = z.infer<typeof providerStreamRequest>;

// ------------------------------------------------------------------ models catalog (§6.6)

/** A catalog entry (modelSchema). */
export type Model = z.infer<typeof modelSchema>;

/** Provider names: what `auth::*` and `models::*` accept (lower case, like the env map's keys). */
export const PROVIDER_NAME_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;
export const providerName = z.string().regex(PROVIDER_NAME_PATTERN, "provider must be 1–64 of a-z 0-9 . _ - (lower case)");

/** `provider::<name>::stream`'s answer. The outcome is in the channel; `status` repeats it. */
export const providerStreamResponse = z.object({
  ok: z.literal(true),
  status: z.enum(["done", "error", "cancelled", "channel_unavailable"]),
  error_kind: z.enum(ERROR_KINDS).optional(),
});
export type ProviderStreamResponse = z.infer<typeof providerStreamResponse>;

/** Engine state scope of registered models (key `<provider>:<id>`, value a Model). */
export const MODELS_SCOPE = "models";
/** The providers worker's state: a registered model (`models::register`), key `<provider>:<id>`. */
export const modelsState = {
  model: (provider: string, id: string): StateKey => ({ scope: MODELS_SCOPE, key: `${provider}:${id}` }),
};
export const MODEL_CAPABILITIES = ["tools", "vision", "streaming", "thinking", "cache"] as const;
export type ModelCapability = (typeof MODEL_CAPABILITIES)[number];

const modelId = z.string().min(1).max(200);
const tokenCount = z.number().int().positive();
const perMillion = z.number().nonnegative();
export const modelSchema = z.object({
  id: modelId,
  provider: providerName,
  api: z.string().max(64).optional(),
  display_name: z.string().max(200).optional(),
  context_window: tokenCount,
  max_output_tokens: tokenCount.optional(),
  input_limit: tokenCount.optional(),
  supports_thinking: z.boolean().optional(),
  supports_tools: z.boolean().optional(),
  supports_vision: z.boolean().optional(),
  supports_cache: z.boolean().optional(),
  transports: z
    .array(z.enum(["sse", "websocket", "auto"]))
    .max(3)
    .optional(),
  pricing: z
    .object({
      input_per_1m: perMillion,
      output_per_1m: perMillion,
      cache_read_per_1m: perMillion.optional(),
      cache_write_per_1m: perMillion.optional(),
    })
    .optional(),
});
/** A MODELS_OVERRIDES entry: any fields of a model, laid over the built-in entry of the same
 * provider and id (a model the table lacks needs `context_window`). */
export const modelOverrideSchema = modelSchema.partial().required({ provider: true, id: true });
export const modelsListRequest = z.object({ provider: providerName.optional(), capability: z.string().max(64).optional() });
export const modelsGetRequest = z.object({ provider: providerName, id: modelId });
export const modelsSupportsRequest = z.object({ provider: providerName, id: modelId, capability: z.string().min(1).max(64) });
export const modelsRegisterRequest = z.object({ model: modelSchema });
/** `models::register`: the state key the entry is kept under (`<provider>:<id>`). */
export const modelsRegisterResponse = z.object({ ok: z.literal(true), key: z.string() });
/** `models::list`: every catalog entry that matches. */
export const modelsListResponse = z.array(modelSchema);
/** `models::get`: the entry, or null when the catalog does not know the model. */
export const modelsGetResponse = modelSchema.nullable();
/** `known: false` = the model is not in the catalog: its capabilities are unknown, not absent. */
export const modelsSupportsResponse = z.object({ supported: z.boolean(), known: z.boolean() });
export type ModelsSupportsResponse = z.infer<typeof modelsSupportsResponse>;
