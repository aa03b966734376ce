// The providers worker (docs/harness-contracts.md §1.4, §4.2, §4.3, §6.6): `provider::openai::stream` (any
// OpenAI-compatible server), `provider::anthropic::stream`, and the models catalog (`models::*`).
// The catalog lives here because the providers are its main reader (pricing → usage.cost_usd,
// max output → Anthropic's required max_tokens) and it is small; its ids stand alone, so it can move
// to a worker of its own without a caller noticing. Web APIs only: runs in workerd and in Node.
import { responseFormat } from "@iii-edge/protocol";
import {
  modelsGetRequest,
  modelsListRequest,
  modelsRegisterRequest,
  modelsSupportsRequest,
  MODELS_SCOPE,
  type CredentialsCryptoKey,
  type CredentialsKeyResult,
  type Model,
  type ModelsSupportsResponse,
  modelsListResponse,
  modelsGetResponse,
  modelsSupportsResponse,
  modelsRegisterResponse,
  providerStreamResponse,
} from "@iii-edge/protocol/harness";
import { type WorkerModule, type WorkerSurface, credentialsKeyMaterial, deriveCredentialsKey } from "@iii-edge/sdk-edge/worker";
import type { ProviderAdapter } from "./adapter.ts";
import { ANTHROPIC_DEFAULT_BASE_URL, anthropic } from "./anthropic.ts";
import { CircuitBreaker, DEFAULT_BREAKER, type BreakerSettings } from "./breaker.ts";
import { BUILTIN_MODELS, Catalog, modelKey, parseOverrides, supports } from "./catalog.ts";
import { OPENAI_DEFAULT_BASE_URL, openai } from "./openai.ts";
import { DEFAULT_LIMITS, runProviderStream, type StreamLimits } from "./stream.ts";

export { BUILTIN_MODELS } from "./catalog.ts";
export { DEFAULT_LIMITS, type StreamLimits } from "./stream.ts";
export { BREAKER_COOL_DOWN_MS, BREAKER_FAILURE_THRESHOLD, CircuitBreaker, DEFAULT_BREAKER, type BreakerSettings } from "./breaker.ts";

export interface ProvidersConfig {
  openai_base_url: string;
  anthropic_base_url: string;
  /** Signs `auth::get_token` proofs (CREDENTIALS_KEY, else AUTH_SECRET), or why there is none. */
  key: CredentialsKeyResult;
  /** MODELS_OVERRIDES, as given. */
  models_overrides?: string;
  limits: StreamLimits;
  /** Each provider's circuit breaker (./breaker.ts); default DEFAULT_BREAKER. */
  breaker?: BreakerSettings;
  now?: () => number;
  random?: () => number;
}

const setting = (env: Readonly<Record<string, unknown>>, name: string): string | undefined => {
  const v = env[name];
  return typeof v === "string" && v.trim() !== "" ? v.trim() : undefined;
};

export function configFrom(env: Readonly<Record<string, unknown>>): ProvidersConfig {
  return {
    openai_base_url: setting(env, "OPENAI_BASE_URL") ?? OPENAI_DEFAULT_BASE_URL,
    anthropic_base_url: setting(env, "ANTHROPIC_BASE_URL") ?? ANTHROPIC_DEFAULT_BASE_URL,
    key: credentialsKeyMaterial(env),
    models_overrides: setting(env, "MODELS_OVERRIDES"),
    limits: DEFAULT_LIMITS,
  };
}

function register(iii: WorkerSurface, config: ProvidersConfig): void {
  const catalog = new Catalog(BUILTIN_MODELS, parseOverrides(config.models_overrides));
  for (const p of catalog.problems) console.warn(`providers: ${p}`);
  let proofKey: Promise<CredentialsCryptoKey> | undefined;
  const key = (): Promise<CredentialsCryptoKey | string> => {
    const k = config.key;
    if (!k.ok) return Promise.resolve(k.reason);
    proofKey ??= deriveCredentialsKey(k.material, "proof");
    return proofKey;
  };
  const now = config.now ?? Date.now;
  const random = config.random ?? Math.random;

  const streams: [ProviderAdapter, string][] = [
    [openai, config.openai_base_url],
    [anthropic, config.anthropic_base_url],
  ];
  for (const [adapter, base_url] of streams) {
    const breaker = new CircuitBreaker(config.breaker ?? DEFAULT_BREAKER, now);
    const deps = { iii, adapter, base_url, catalog, proofKey: key, limits: config.limits, breaker, now, random };
    iii.registerFunction(`provider::${adapter.name}::stream`, (data: unknown, ctx) => runProviderStream(deps, data, ctx), {
      description:
        `Stream one ${adapter.name === "openai" ? "OpenAI-compatible chat completion" : "Anthropic message"} into the writer_ref channel: ` +
        "one JSON AssistantMessageEvent per item, exactly one terminal done/error, then the channel closes. Never throws; answers {ok, status}.",
      response_format: responseFormat(providerStreamResponse),
    });
  }

  iii.registerFunction(
    "models::list",
    async (data: { provider?: string; capability?: string }, ctx) => {
      const all = await catalog.all(ctx.trigger);
      return all.filter((m) => (!data.provider || m.provider === data.provider) && (!data.capability || supports(m, data.capability)));
    },
    {
      description:
        "Models in the catalog (built-in table, MODELS_OVERRIDES, models::register), optionally of one provider or with one capability.",
      input: modelsListRequest,
      response_format: responseFormat(modelsListResponse),
    },
  );
  iii.registerFunction("models::get", (data: { provider: string; id: string }, ctx) => catalog.get(ctx.trigger, data.provider, data.id), {
    description: "One model, or null when the catalog does not know it (treat as capabilities unknown, not absent).",
    input: modelsGetRequest,
    response_format: responseFormat(modelsGetResponse),
  });
  iii.registerFunction(
    "models::supports",
    async (data: { provider: string; id: string; capability: string }, ctx): Promise<ModelsSupportsResponse> => {
      const m = await catalog.get(ctx.trigger, data.provider, data.id);
      return { supported: m ? supports(m, data.capability) : false, known: m !== null };
    },
    {
      description:
        "Whether a model has a capability (tools, vision, streaming, thinking, cache); unknown capability → false; `known:false` for a model the catalog lacks.",
      input: modelsSupportsRequest,
      response_format: responseFormat(modelsSupportsResponse),
    },
  );
  iii.registerFunction(
    "models::register",
    async (data: { model: Model }, ctx) => {
      const key = modelKey(data.model.provider, data.model.id);
      await ctx.trigger({ function_id: "state::set", payload: { scope: MODELS_SCOPE, key, value: data.model } });
      return { ok: true, key };
    },
    {
      description: "Add or correct one model (laid over the built-in entry of the same provider and id); kept in state scope `models`.",
      input: modelsRegisterRequest,
      response_format: responseFormat(modelsRegisterResponse),
    },
  );
}

/** The models catalog's reads: what a model may look up about models. Everything else here (the
 * provider streams, models::register, which sets prices the budget charges by) is the kernel's. */
const MODEL_READS = ["models::list", "models::get", "models::supports"] as const;

export const worker: WorkerModule<ProvidersConfig> = { name: "providers", kernel: true, modelCallable: MODEL_READS, register, configFrom };
export default worker;
