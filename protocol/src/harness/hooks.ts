// Hooks at every point of a turn: iii's hook contract (its harness spec, "Hooks"), as written there.
// A worker binds a hook with `registerTrigger({type: "harness::hook::<point>", function_id, config})`;
// the turn orchestrator calls the bound functions in-path at that point, in `priority` order, and
// acts on what they answer (docs/harness.md, "Hooks at every point of a turn"). A model cannot
// bind one: binding is a worker surface, never a function reachable through `agent_trigger`.
import { z } from "zod";
import type { AgentMessage, AssistantMessage, ContentBlock } from "./messages.ts";
import { agentMessageSchema } from "./messages.ts";

export const HOOK_POINTS = ["pre_turn", "pre_generate", "post_generate", "pre_trigger", "post_trigger"] as const;
export type HookPoint = (typeof HOOK_POINTS)[number];

/** The trigger type of each point. */
export const HOOK_TRIGGER_TYPES = {
  pre_turn: "harness::hook::pre_turn",
  pre_generate: "harness::hook::pre_generate",
  post_generate: "harness::hook::post_generate",
  pre_trigger: "harness::hook::pre_trigger",
  post_trigger: "harness::hook::post_trigger",
} as const satisfies Record<HookPoint, string>;
export type HookTriggerType = (typeof HOOK_TRIGGER_TYPES)[HookPoint];

export const HOOK_TRIGGER_TYPE_PREFIX = "harness::hook::";

/** The point a trigger type names, or undefined for any other type. */
export function hookPointOf(triggerType: string): HookPoint | undefined {
  if (!triggerType.startsWith(HOOK_TRIGGER_TYPE_PREFIX)) return undefined;
  const point = triggerType.slice(HOOK_TRIGGER_TYPE_PREFIX.length);
  return (HOOK_POINTS as readonly string[]).includes(point) ? (point as HookPoint) : undefined;
}

/** A hook's own deadline when its binding names none (iii's default). */
export const HOOK_POINT_DEFAULT_TIMEOUT_MS = 5_000;
/** The longest a binding may ask for: hooks run inside a queued step, whose lease must cover the
 * whole chain; a hook that needs a person returns `hold` instead of waiting. */
export const HOOK_POINT_MAX_TIMEOUT_MS = 60_000;
/** Globs per binding: a target list, not a policy file. */
export const HOOK_MAX_FUNCTION_GLOBS = 64;
/** Messages a `pre_generate` chain may append to one round's context, all hooks together: injected
 * context rides the window's reserved headroom and must stay small. */
export const HOOK_MAX_APPENDED_MESSAGES = 16;
/** Longest system prompt a `pre_generate` hook may set (characters). */
export const HOOK_MAX_SYSTEM_PROMPT_CHARS = 200_000;
/** Longest deny reason kept (characters): what the model or the turn's error reads. */
export const HOOK_MAX_REASON_CHARS = 2_000;

export const hookOnError = z.enum(["fail_closed", "fail_open"]);
export type HookOnError = z.infer<typeof hookOnError>;

const globList = z.array(z.string().min(1).max(256)).max(HOOK_MAX_FUNCTION_GLOBS);
const baseConfig = {
  priority: z.number().int().min(-1_000_000).max(1_000_000).optional(),
  timeout_ms: z.number().int().min(1).max(HOOK_POINT_MAX_TIMEOUT_MS).optional(),
  on_error: hookOnError.optional(),
};

/** `config` of a `pre_trigger` / `post_trigger` binding: `functions` globs select the targets
 * (absent: every call). */
export const hookCallConfig = z.strictObject({ functions: globList.optional(), ...baseConfig });
/** `config` of a `pre_turn` / `pre_generate` / `post_generate` binding: no target list there. */
export const hookTurnConfig = z.strictObject(baseConfig);

/** iii's `HookTriggerConfig`. */
export type HookTriggerConfig = z.infer<typeof hookCallConfig>;

/** The config schema of a point's bindings (`null`/absent config is `{}`). */
export function hookConfigSchema(point: HookPoint): typeof hookCallConfig | typeof hookTurnConfig {
  return point === "pre_trigger" || point === "post_trigger" ? hookCallConfig : hookTurnConfig;
}

/** A binding's config with iii's defaults filled in. */
export interface ResolvedHookConfig {
  functions?: string[];
  priority: number;
  timeout_ms: number;
  on_error: HookOnError;
}

export const defaultOnError = (point: HookPoint): HookOnError => (point.startsWith("pre_") ? "fail_closed" : "fail_open");

/** Parse a binding's config for `point`: the resolved config, or the issues (a bad config). */
export function parseHookConfig(point: HookPoint, raw: unknown): z.ZodSafeParseResult<ResolvedHookConfig> {
  const r = hookConfigSchema(point).safeParse(raw ?? {});
  if (!r.success) return r as z.ZodSafeParseError<ResolvedHookConfig>;
  const c = r.data as HookTriggerConfig;
  const out: ResolvedHookConfig = {
    priority: c.priority ?? 0,
    timeout_ms: c.timeout_ms ?? HOOK_POINT_DEFAULT_TIMEOUT_MS,
    on_error: c.on_error ?? defaultOnError(point),
  };
  if (c.functions) out.functions = c.functions;
  return { success: true, data: out } as z.ZodSafeParseSuccess<ResolvedHookConfig>;
}

/** iii's `HookInput`: what a bound function receives as its `data`. */
export interface HookInput {
  point: HookPoint;
  session_id: string;
  turn_id: string;
  step: number;
  /** Sub-agent depth (hooks run for child turns too). */
  depth: number;
  metadata?: Record<string, unknown>;
  generate?: { system_prompt: string; messages: AgentMessage[]; model: string; provider: string };
  generated?: { message: AssistantMessage };
  call?: { id: string; function_id: string; arguments: unknown };
  result?: { function_call_id: string; function_id: string; content: ContentBlock[]; is_error: boolean; details?: unknown };
}

const contentBlock = z.looseObject({ type: z.string().min(1) });

/** What a `continue` may change, by point (a mutation for another point is ignored there). */
export const hookMutations = z.looseObject({
  system_prompt: z.string().max(HOOK_MAX_SYSTEM_PROMPT_CHARS).optional(),
  append_messages: z.array(agentMessageSchema).max(HOOK_MAX_APPENDED_MESSAGES).optional(),
  arguments: z.unknown().optional(),
  content: z.array(contentBlock).optional(),
  details: z.unknown().optional(),
  is_error: z.boolean().optional(),
});
export type HookMutations = {
  system_prompt?: string;
  append_messages?: AgentMessage[];
  arguments?: unknown;
  content?: ContentBlock[];
  details?: unknown;
  is_error?: boolean;
};

/** iii's `HookOutput`. `null`/absent (a function that returns nothing) is `continue` with no changes. */
export const hookOutput = z.union([
  z.looseObject({
    decision: z.literal("continue"),
    mutations: hookMutations.optional(),
    annotations: z.record(z.string(), z.unknown()).optional(),
  }),
  z.looseObject({ decision: z.literal("deny"), reason: z.string() }),
  z.looseObject({ decision: z.literal("hold"), pending_timeout_ms: z.number().int().positive().optional() }),
  z.null(),
  z.undefined(),
]);
export type HookOutput =
  | { decision: "continue"; mutations?: HookMutations; annotations?: Record<string, unknown> }
  | { decision: "deny"; reason: string }
  | { decision: "hold"; pending_timeout_ms?: number }
  | null
  | undefined;

/** One hook that changed something, as kept with the call's checkpoint (or the round): who, and
 * what it set. A redelivered step reads this instead of asking the hook again. */
export interface HookChange {
  function_id: string;
  mutations: HookMutations;
  annotations?: Record<string, unknown>;
}

/** The error a turn fails with when a `pre_turn` / `pre_generate` hook denies it. */
export const HOOK_DENIED = "hook_denied";
