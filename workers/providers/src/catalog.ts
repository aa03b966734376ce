// The models catalog (docs/harness-contracts.md §6.6): a built-in table, laid under MODELS_OVERRIDES (env
// JSON) and under models registered at runtime (engine state scope `models`, key
// `<provider>:<id>`). A model missing from all three is "capabilities unknown" — callers fail open:
// a new model works before anyone lists it, it only loses the checks its entry would allow.
import { formatIssues } from "@iii-edge/protocol";
import { MODELS_SCOPE, modelOverrideSchema, modelSchema, type Model, type ModelCapability, modelsState } from "@iii-edge/protocol/harness";

type Trigger = <I, O>(request: { function_id: string; payload?: I; timeoutMs?: number }) => Promise<O>;

const chat = ["sse"] as ("sse" | "websocket" | "auto")[];

/** Current models as published by the providers (context window, max output, USD per 1M tokens).
 * Overrides correct it without a release: MODELS_OVERRIDES or `models::register`. */
export const BUILTIN_MODELS: readonly Model[] = [
  {
    id: "gpt-5",
    provider: "openai",
    api: "openai-completions",
    display_name: "GPT-5",
    context_window: 400_000,
    input_limit: 272_000,
    max_output_tokens: 128_000,
    supports_thinking: true,
    supports_tools: true,
    supports_vision: true,
    supports_cache: true,
    transports: chat,
    pricing: { input_per_1m: 1.25, output_per_1m: 10, cache_read_per_1m: 0.125 },
  },
  {
    id: "gpt-5-mini",
    provider: "openai",
    api: "openai-completions",
    display_name: "GPT-5 mini",
    context_window: 400_000,
    input_limit: 272_000,
    max_output_tokens: 128_000,
    supports_thinking: true,
    supports_tools: true,
    supports_vision: true,
    supports_cache: true,
    transports: chat,
    pricing: { input_per_1m: 0.25, output_per_1m: 2, cache_read_per_1m: 0.025 },
  },
  {
    id: "gpt-4.1",
    provider: "openai",
    api: "openai-completions",
    display_name: "GPT-4.1",
    context_window: 1_047_576,
    max_output_tokens: 32_768,
    supports_thinking: false,
    supports_tools: true,
    supports_vision: true,
    supports_cache: true,
    transports: chat,
    pricing: { input_per_1m: 2, output_per_1m: 8, cache_read_per_1m: 0.5 },
  },
  {
    id: "gpt-4.1-mini",
    provider: "openai",
    api: "openai-completions",
    display_name: "GPT-4.1 mini",
    context_window: 1_047_576,
    max_output_tokens: 32_768,
    supports_thinking: false,
    supports_tools: true,
    supports_vision: true,
    supports_cache: true,
    transports: chat,
    pricing: { input_per_1m: 0.4, output_per_1m: 1.6, cache_read_per_1m: 0.1 },
  },
  {
    id: "gpt-4o",
    provider: "openai",
    api: "openai-completions",
    display_name: "GPT-4o",
    context_window: 128_000,
    max_output_tokens: 16_384,
    supports_thinking: false,
    supports_tools: true,
    supports_vision: true,
    supports_cache: true,
    transports: chat,
    pricing: { input_per_1m: 2.5, output_per_1m: 10, cache_read_per_1m: 1.25 },
  },
  {
    id: "gpt-4o-mini",
    provider: "openai",
    api: "openai-completions",
    display_name: "GPT-4o mini",
    context_window: 128_000,
    max_output_tokens: 16_384,
    supports_thinking: false,
    supports_tools: true,
    supports_vision: true,
    supports_cache: true,
    transports: chat,
    pricing: { input_per_1m: 0.15, output_per_1m: 0.6, cache_read_per_1m: 0.075 },
  },
  {
    id: "o3",
    provider: "openai",
    api: "openai-completions",
    display_name: "o3",
    context_window: 200_000,
    max_output_tokens: 100_000,
    supports_thinking: true,
    supports_tools: true,
    supports_vision: true,
    supports_cache: true,
    transports: chat,
    pricing: { input_per_1m: 2, output_per_1m: 8, cache_read_per_1m: 0.5 },
  },
  {
    id: "o4-mini",
    provider: "openai",
    api: "openai-completions",
    display_name: "o4-mini",
    context_window: 200_000,
    max_output_tokens: 100_000,
    supports_thinking: true,
    supports_tools: true,
    supports_vision: true,
    supports_cache: true,
    transports: chat,
    pricing: { input_per_1m: 1.1, output_per_1m: 4.4, cache_read_per_1m: 0.275 },
  },
  {
    id: "claude-opus-4-1",
    provider: "anthropic",
    api: "anthropic-messages",
    display_name: "Claude Opus 4.1",
    context_window: 200_000,
    max_output_tokens: 32_000,
    supports_thinking: true,
    supports_tools: true,
    supports_vision: true,
    supports_cache: true,
    transports: chat,
    pricing: { input_per_1m: 15, output_per_1m: 75, cache_read_per_1m: 1.5, cache_write_per_1m: 18.75 },
  },
  {
    id: "claude-sonnet-4-5",
    provider: "anthropic",
    api: "anthropic-messages",
    display_name: "Claude Sonnet 4.5",
    context_window: 200_000,
    max_output_tokens: 64_000,
    supports_thinking: true,
    supports_tools: true,
    supports_vision: true,
    supports_cache: true,
    transports: chat,
    pricing: { input_per_1m: 3, output_per_1m: 15, cache_read_per_1m: 0.3, cache_write_per_1m: 3.75 },
  },
  {
    id: "claude-sonnet-4-0",
    provider: "anthropic",
    api: "anthropic-messages",
    display_name: "Claude Sonnet 4",
    context_window: 200_000,
    max_output_tokens: 64_000,
    supports_thinking: true,
    supports_tools: true,
    supports_vision: true,
    supports_cache: true,
    transports: chat,
    pricing: { input_per_1m: 3, output_per_1m: 15, cache_read_per_1m: 0.3, cache_write_per_1m: 3.75 },
  },
  {
    id: "claude-haiku-4-5",
    provider: "anthropic",
    api: "anthropic-messages",
    display_name: "Claude Haiku 4.5",
    context_window: 200_000,
    max_output_tokens: 64_000,
    supports_thinking: true,
    supports_tools: true,
    supports_vision: true,
    supports_cache: true,
    transports: chat,
    pricing: { input_per_1m: 1, output_per_1m: 5, cache_read_per_1m: 0.1, cache_write_per_1m: 1.25 },
  },
  {
    id: "claude-3-5-haiku-latest",
    provider: "anthropic",
    api: "anthropic-messages",
    display_name: "Claude Haiku 3.5",
    context_window: 200_000,
    max_output_tokens: 8_192,
    supports_thinking: false,
    supports_tools: true,
    supports_vision: true,
    supports_cache: true,
    transports: chat,
    pricing: { input_per_1m: 0.8, output_per_1m: 4, cache_read_per_1m: 0.08, cache_write_per_1m: 1 },
  },
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
