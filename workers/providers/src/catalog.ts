// The models catalog (docs/harness-contracts.md §6.6): a built-in table, laid under MODELS_OVERRIDES (env
// JSON) and under models registered at runtime (engine state scope `models`, key
// `<provider>:<id>`). A model missing from all three is "capabilities unknown" — callers fail open:
// a new model works before anyone lists it, it only loses the checks its entry would allow.
import { formatIssues } from "@iii-edge/protocol";
import { MODELS_SCOPE, modelOverrideSchema, modelSchema, type Model, type ModelCapability, modelsState } from "@iii-edge/protocol/harness";

type Trigger = <I, O>(request: { function_id: string; payload?: I; timeoutMs?: number }) => Promise<O>;

/** A chat model served over SSE with tools, vision and prompt caching, as every built-in one is. */
const model =
  (provider: "openai" | "anthropic", api: Model["api"]) =>
  (
    id: string,
    display_name: string,
    context_window: number,
    max_output_tokens: number,
    supports_thinking: boolean,
    pricing: Model["pricing"],
    input_limit?: number,
  ): Model => ({
    id,
    provider,
    api,
    display_name,
    context_window,
    ...(input_limit === undefined ? {} : { input_limit }),
    max_output_tokens,
    supports_thinking,
    supports_tools: true,
    supports_vision: true,
    supports_cache: true,
    transports: ["sse"],
    pricing,
  });
const openai = model("openai", "openai-completions");
const anthropic = model("anthropic", "anthropic-messages");
/** USD per 1M tokens: input, output, cache reads and (where the provider bills them) cache writes. */
const usd = (input_per_1m: number, output_per_1m: number, cache_read_per_1m: number, cache_write_per_1m?: number): Model["pricing"] => ({
  input_per_1m,
  output_per_1m,
  cache_read_per_1m,
  ...(cache_write_per_1m === undefined ? {} : { cache_write_per_1m }),
});

/** Current models as published by the providers: context window, max output tokens, thinking, USD
 * per 1M tokens (and an input limit below the window where the provider sets one).
 * Overrides correct it without a release: MODELS_OVERRIDES or `models::register`. */
export const BUILTIN_MODELS: readonly Model[] = [
  openai("gpt-5", "GPT-5", 400_000, 128_000, true, usd(1.25, 10, 0.125), 272_000),
  openai("gpt-5-mini", "GPT-5 mini", 400_000, 128_000, true, usd(0.25, 2, 0.025), 272_000),
  openai("gpt-4.1", "GPT-4.1", 1_047_576, 32_768, false, usd(2, 8, 0.5)),
  openai("gpt-4.1-mini", "GPT-4.1 mini", 1_047_576, 32_768, false, usd(0.4, 1.6, 0.1)),
  openai("gpt-4o", "GPT-4o", 128_000, 16_384, false, usd(2.5, 10, 1.25)),
  openai("gpt-4o-mini", "GPT-4o mini", 128_000, 16_384, false, usd(0.15, 0.6, 0.075)),
  openai("o3", "o3", 200_000, 100_000, true, usd(2, 8, 0.5)),
  openai("o4-mini", "o4-mini", 200_000, 100_000, true, usd(1.1, 4.4, 0.275)),
  anthropic("claude-opus-4-1", "Claude Opus 4.1", 200_000, 32_000, true, usd(15, 75, 1.5, 18.75)),
  anthropic("claude-sonnet-4-5", "Claude Sonnet 4.5", 200_000, 64_000, true, usd(3, 15, 0.3, 3.75)),
  anthropic("claude-sonnet-4-0", "Claude Sonnet 4", 200_000, 64_000, true, usd(3, 15, 0.3, 3.75)),
  anthropic("claude-haiku-4-5", "Claude Haiku 4.5", 200_000, 64_000, true, usd(1, 5, 0.1, 1.25)),
  anthropic("claude-3-5-haiku-latest", "Claude Haiku 3.5", 200_000, 8_192, false, usd(0.8, 4, 0.08, 1)),
];

export const modelKey = (provider: string, id: string) => modelsState.model(provider, id).key;

/** A dated snapshot id (`claude-sonnet-4-5-20250929`, `gpt-4o-2024-08-06`) → its alias. */
const undated = (id: string) => id.replace(/-\d{8}$/, "").replace(/-\d{4}-\d{2}-\d{2}$/, "");

export function supports(model: Model, capability: string): boolean {
  switch (capability as ModelCapability | "thinking:low" | "thinking:medium" | "thinking:high") {
    case "tools":
      return model.supports_tools === true;
    case "vision":
      return model.supports_vision === true;
    case "streaming":
      return (model.transports ?? []).some((t) => t === "sse" || t === "auto");
    case "thinking":
    case "thinking:low":
    case "thinking:medium":
    case "thinking:high":
      return model.supports_thinking === true;
    case "cache":
      return model.supports_cache === true;
    default:
      return false;
  }
}

/** MODELS_OVERRIDES: a JSON array of (partial) models. Entries that do not parse are reported,
 * not applied — a typo must not take the catalog down. */
export function parseOverrides(text: string | undefined): {
  overrides: ReturnType<typeof modelOverrideSchema.parse>[];
  problems: string[];
} {
  if (!text || text.trim() === "") return { overrides: [], problems: [] };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { overrides: [], problems: ["MODELS_OVERRIDES is not JSON (expected an array of models)"] };
  }
  if (!Array.isArray(raw)) return { overrides: [], problems: ["MODELS_OVERRIDES must be a JSON array of models"] };
  const overrides: ReturnType<typeof modelOverrideSchema.parse>[] = [];
  const problems: string[] = [];
  raw.forEach((entry, i) => {
    const r = modelOverrideSchema.safeParse(entry);
    if (r.success) overrides.push(r.data);
    else problems.push(`MODELS_OVERRIDES[${i}] ignored: ${formatIssues(r.error, { root: "entry" })}`);
  });
  return { overrides, problems };
}

/** Bound on how long a stream waits for the registered-model lookup: the catalog only tunes the
 * request (pricing, max_tokens), so a slow state read must not delay the model. */
const STREAM_LOOKUP_TIMEOUT_MS = 2_000;

export class Catalog {
  /** Table ← MODELS_OVERRIDES, by `<provider>:<id>`. */
  private readonly base = new Map<string, Model>();
  readonly problems: string[] = [];

  constructor(table: readonly Model[], overrides: ReturnType<typeof parseOverrides>) {
    for (const m of table) this.base.set(modelKey(m.provider, m.id), m);
    this.problems.push(...overrides.problems);
    for (const o of overrides.overrides) {
      const key = modelKey(o.provider, o.id);
      const merged = modelSchema.safeParse({ ...this.base.get(key), ...o });
      if (merged.success) this.base.set(key, merged.data);
      else this.problems.push(`MODELS_OVERRIDES entry ${key} ignored: a model the table lacks needs context_window`);
    }
  }

  private merge(registered: Model | undefined, key: string): Model | undefined {
    const base = this.base.get(key);
    if (!registered) return base;
    return { ...base, ...registered };
  }

  /** Every model: the registered ones laid over the table. */
  async all(trigger: Trigger): Promise<Model[]> {
    const rows = await trigger<unknown, unknown>({ function_id: "state::list", payload: { scope: MODELS_SCOPE } });
    const registered = new Map<string, Model>();
    for (const row of Array.isArray(rows) ? rows : []) {
      const r = modelSchema.safeParse(row);
      if (r.success) registered.set(modelKey(r.data.provider, r.data.id), r.data);
    }
    const keys = new Set([...this.base.keys(), ...registered.keys()]);
    return [...keys]
      .map((k) => this.merge(registered.get(k), k)!)
      .sort((a, b) => a.provider.localeCompare(b.provider) || a.id.localeCompare(b.id));
  }

  async get(trigger: Trigger, provider: string, id: string, timeoutMs?: number): Promise<Model | null> {
    for (const candidate of id === undated(id) ? [id] : [id, undated(id)]) {
      const key = modelKey(provider, candidate);
      const row = await trigger<unknown, unknown>({ function_id: "state::get", payload: { scope: MODELS_SCOPE, key }, timeoutMs });
      const r = modelSchema.safeParse(row);
      const m = this.merge(r.success ? r.data : undefined, key);
      if (m) return candidate === id ? m : { ...m, id };
    }
    return null;
  }

  /** For a stream: the same lookup, but a failed or slow state read falls back to the table. */
  async forStream(trigger: Trigger, provider: string, id: string): Promise<Model | null> {
    try {
      return await this.get(trigger, provider, id, STREAM_LOOKUP_TIMEOUT_MS);
    } catch {
      return this.base.get(modelKey(provider, id)) ?? this.base.get(modelKey(provider, undated(id))) ?? null;
    }
  }
}
