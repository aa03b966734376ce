// Settings (docs/harness-contracts.md §6.1 "Config", env only): each COMPACT_* variable, its default, and the
// bounds a value must be in (anything else is refused at startup, naming the variable).

export interface CompactionConfig {
  /** `COMPACT_RESERVED_TOKENS`: the most the reserve may be (the reserve is min(this, 10 % of
   * the window), so a small model is not left with nothing). */
  reservedTokens: number;
  /** `COMPACT_TAIL_TURNS`: user turns the kept tail may span. */
  tailTurns: number;
  /** `COMPACT_PRESERVE_RECENT_TOKENS`: the tail's budget; unset → adaptive (budget.ts). */
  preserveRecentTokens?: number;
  /** `COMPACT_PRUNE_PROTECT`: newest output tokens never pruned; unset → min(40 000, 40 % of usable). */
  pruneProtect?: number;
  /** `COMPACT_PRUNE_MIN_FREE`: a prune that frees less does nothing; unset → min(20 000, 20 % of usable). */
  pruneMinFree?: number;
  /** `COMPACT_TOOL_OUTPUT_MAX_CHARS`: each output is clipped to this in the summariser's input. */
  toolOutputMaxChars: number;
  /** `COMPACT_BUSY_TIMEOUT_MS`: how long compact_now waits for another compaction's lease. */
  busyTimeoutMs: number;
  /** `COMPACT_PRUNE_PROTECTED_TOOLS`: function ids whose outputs are never pruned. */
  pruneProtectedTools: string[];
}

export const DEFAULT_CONFIG: CompactionConfig = {
  reservedTokens: 20_000,
  tailTurns: 2,
  toolOutputMaxChars: 2_000,
  busyTimeoutMs: 30_000,
  pruneProtectedTools: [],
};

/** Largest token setting accepted: context windows are ~1e6 tokens. */
const MAX_TOKEN_SETTING = 10_000_000;
/** Most turns a tail may span: past a few, the tail is the window and nothing gets summarised. */
const MAX_TAIL_TURNS = 50;
/** Largest clip of one output in the summariser's input. */
const MAX_TOOL_OUTPUT_CHARS = 200_000;
/** compact_now itself gets 60 s from the orchestrator; the lease wait must end well inside it. */
const MAX_BUSY_TIMEOUT_MS = 50_000;
/** Most protected function ids. */
const MAX_PROTECTED_TOOLS = 200;

function int(env: Readonly<Record<string, unknown>>, name: string, min: number, max: number): number | undefined {
  const v = env[name];
  if (v === undefined || v === null || (typeof v === "string" && v.trim() === "")) return undefined;
  const text = String(v).trim();
  if (!/^\d+$/.test(text)) throw new Error(`${name} must be a whole number (got ${JSON.stringify(text)})`);
  const n = Number(text);
  if (n < min || n > max) throw new Error(`${name} must be between ${min} and ${max} (got ${n})`);
  return n;
}

export function configFromEnv(env: Readonly<Record<string, unknown>>): CompactionConfig {
  const tools =
    typeof env.COMPACT_PRUNE_PROTECTED_TOOLS === "string"
      ? env.COMPACT_PRUNE_PROTECTED_TOOLS.split(",")
          .map((s) => s.trim())
          .filter((s) => s !== "")
      : [];
  if (tools.length > MAX_PROTECTED_TOOLS) throw new Error(`COMPACT_PRUNE_PROTECTED_TOOLS lists more than ${MAX_PROTECTED_TOOLS} functions`);
  const cfg: CompactionConfig = {
    reservedTokens: int(env, "COMPACT_RESERVED_TOKENS", 0, MAX_TOKEN_SETTING) ?? DEFAULT_CONFIG.reservedTokens,
    tailTurns: int(env, "COMPACT_TAIL_TURNS", 1, MAX_TAIL_TURNS) ?? DEFAULT_CONFIG.tailTurns,
    toolOutputMaxChars: int(env, "COMPACT_TOOL_OUTPUT_MAX_CHARS", 100, MAX_TOOL_OUTPUT_CHARS) ?? DEFAULT_CONFIG.toolOutputMaxChars,
    busyTimeoutMs: int(env, "COMPACT_BUSY_TIMEOUT_MS", 0, MAX_BUSY_TIMEOUT_MS) ?? DEFAULT_CONFIG.busyTimeoutMs,
    pruneProtectedTools: tools,
  };
  const preserve = int(env, "COMPACT_PRESERVE_RECENT_TOKENS", 0, MAX_TOKEN_SETTING);
  if (preserve !== undefined) cfg.preserveRecentTokens = preserve;
  const protect = int(env, "COMPACT_PRUNE_PROTECT", 0, MAX_TOKEN_SETTING);
  if (protect !== undefined) cfg.pruneProtect = protect;
  const minFree = int(env, "COMPACT_PRUNE_MIN_FREE", 0, MAX_TOKEN_SETTING);
  if (minFree !== undefined) cfg.pruneMinFree = minFree;
  return cfg;
}
