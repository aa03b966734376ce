// The context-compaction worker (docs/harness-contracts.md §1.8, §6.1): keeps a session's requests
// inside its model's window. Woken once per turn by a `stream` trigger on `agent::turn_end` (never
// per event, docs/harness-contracts.md §7 item 3), and called synchronously by the orchestrator's pre-flight
// before a provider call that would overflow. Runs in workerd and in Node (Web APIs only).
import { z } from "zod";
import { IIIError, responseFormat } from "@iii-edge/protocol";
import {
  AGENT_EVENTS_STREAM,
  compactionEventItemId,
  compactionModelOf,
  compactNowRequest,
  compactSessionRequest,
  pruneToolOutputsRequest,
  TURN_END_STREAM,
  type AgentEvent,
  type AssistantMessage,
  type CompactionModel,
  type CompactNowResult,
  type Model,
  type PruneToolOutputsResult,
  compactNowResult,
  pruneToolOutputsResult,
} from "@iii-edge/protocol/harness";
import { compactionUsableTokens, type WorkerModule, type WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { usableTokens } from "./budget.ts";
import { call, errorCode, errorText, type Trigger } from "./calls.ts";
import { configFromEnv, type CompactionConfig } from "./config.ts";
import { COMPACTION_LEASE_SCOPE, tryLease, waitLease } from "./lease.ts";
import { countView, LAST_COMPACTION_SCOPE, pruneOutputs, runCompaction, type PipelineDeps } from "./pipeline.ts";
import { assetRanks, isAssetFetcher, type RankLoader } from "./ranks.ts";
import { counterFor } from "./tokens.ts";
import { readPath, readView } from "./transcript.ts";

export { configFromEnv, type CompactionConfig } from "./config.ts";

/** The background compaction's own deadline: two summariser calls and the storage round trips. */
export const ASYNC_COMPACTION_TIMEOUT_MS = 300_000;
/** `models::get` answers are cached this long per process (the catalog changes at deploy time). */
export const MODEL_CACHE_TTL_MS = 60_000;
/** Most cached catalog answers (one per model in use). */
export const MODEL_CACHE_MAX = 256;
/** Manual compaction with no model anywhere (spec: "fallback limit 32k/32k/4k"). */
export const FALLBACK_LIMIT = { context: 32_000, input: 32_000, output: 4_000 } as const;
/** Most `agent::turn_end` pages a manual compaction reads to find the event anchor. */
const TURN_END_MAX_PAGES = 100;
const TURN_END_PAGE = 1_000;
/** Model names of messages the orchestrator writes itself (never a real model). */
const HARNESS_MODEL = "harness";

export interface ContextCompactionConfig extends CompactionConfig {
  now?: () => number;
  newId?: () => string;
  /** The tokenizer's rank tables (ranks.ts): from the Worker's static assets when its env has an
   * ASSETS binding, else the default (gpt-tokenizer's own modules in Node). */
  ranks?: RankLoader;
}

/** Settings from the env, and in a Worker the rank tables from its static assets. */
export function compactionConfigFrom(env: Readonly<Record<string, unknown>>): ContextCompactionConfig {
  const cfg: ContextCompactionConfig = configFromEnv(env);
  if (isAssetFetcher(env.ASSETS)) cfg.ranks = assetRanks(env.ASSETS);
  return cfg;
}

const sessionId = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[^/]+$/);
const turnEndEnvelope = z.looseObject({
  groupId: sessionId,
  id: z.string().min(1).max(300),
  event: z.looseObject({ type: z.string(), data: z.unknown() }),
});
const asyncRequest = z.object({
  session_id: sessionId,
  anchor_item_id: z.string().min(1).max(300),
  provider: z.string().min(1).max(64),
  model_id: z.string().min(1).max(200),
  round_started_at: z.number(),
  reported_tokens: z.number().int().nonnegative(),
});

function parse<T extends z.ZodType>(id: string, schema: T, data: unknown): z.output<T> {
  const r = schema.safeParse(data);
  if (!r.success) throw new IIIError("invalid_input", `${id}: ${z.prettifyError(r.error)}`);
  return r.data;
}

/** The size of the request a round's usage reports: its input, cached or not, and its output. */
function usageTokens(u: AssistantMessage["usage"]): number | undefined {
  if (!u) return undefined;
  const parts = [u.input, u.output, u.cache_read, u.cache_write].filter(
    (n): n is number => typeof n === "number" && Number.isFinite(n) && n >= 0,
  );
  return parts.length === 0 ? undefined : parts.reduce((a, b) => a + b, 0);
}

export function createCompaction(iii: Pick<WorkerSurface, "channels">, cfg: ContextCompactionConfig) {
  const now = cfg.now ?? Date.now;
  const newId = cfg.newId ?? (() => crypto.randomUUID());
  const models = new Map<string, { at: number; model: CompactionModel | null }>();
  const deps = (trigger: Trigger): PipelineDeps => ({ trigger, channels: iii.channels, cfg, ranks: cfg.ranks, now, newId });

  /** The catalog's entry (`models::get`), cached; null when unknown. */
  async function catalogModel(trigger: Trigger, provider: string, id: string): Promise<CompactionModel | null> {
    const key = `${provider}:${id}`;
    const hit = models.get(key);
    if (hit && now() - hit.at < MODEL_CACHE_TTL_MS) return hit.model;
    let model: CompactionModel | null = null;
    try {
      const m = await call<Model | null | undefined>(trigger, "models::get", { provider, id });
      if (m && typeof m.context_window === "number") model = compactionModelOf(m);
    } catch (e) {
      if (errorCode(e) !== "function_not_found" && errorCode(e) !== "not_found")
        console.warn(`context-compaction: models::get ${key}: ${errorText(e)}`);
    }
    if (models.size >= MODEL_CACHE_MAX) models.delete(models.keys().next().value as string);
    models.set(key, { at: now(), model });
    return model;
  }

  /** Explicit model → its catalog limits → the last assistant's model → the fallback limits. */
  async function resolveModel(
    trigger: Trigger,
    sid: string,
    given: { id: string; providerID: string; limit?: CompactionModel["limit"] } | undefined,
  ): Promise<CompactionModel> {
    if (given?.limit) return { id: given.id, providerID: given.providerID, limit: given.limit };
    let id = given?.id;
    let provider = given?.providerID;
    if (!id || !provider) {
      const path = await readPath(trigger, sid);
      const last = path
        .map((e) => e.message)
        .reverse()
        .find(
          (m): m is AssistantMessage =>
            m.role === "assistant" &&
            typeof m.provider === "string" &&
            m.provider !== "" &&
            m.provider !== HARNESS_MODEL &&
            typeof m.model === "string" &&
            m.model !== "",
        );
      if (!last)
        throw new IIIError("invalid_input", `session ${sid} has no assistant message to take the model from: pass model {id, providerID}`);
      id = last.model;
      provider = last.provider;
    }
    return (await catalogModel(trigger, provider, id)) ?? { id, providerID: provider, limit: { ...FALLBACK_LIMIT } };
  }

  async function emitDone(
    trigger: Trigger,
    sid: string,
    itemId: string,
    mode: "async" | "sync",
    r: Extract<CompactNowResult, { status: "ok" }>,
  ): Promise<void> {
    const data: AgentEvent = {
      type: "compaction_done",
      mode,
      summary_text: r.summary_text,
      tokens_before: r.tokens_before,
      compaction_entry_id: r.compaction_entry_id,
      tail_start_id: r.tail_start_id,
    };
    try {
      await call(trigger, "stream::set", { stream_name: AGENT_EVENTS_STREAM, group_id: sid, item_id: itemId, data });
    } catch (e) {
      console.warn(`context-compaction: compaction_done of ${sid} not written: ${errorText(e)}`);
    }
  }

  /** The newest `agent::turn_end` item of a session (the manual compaction's event anchor). */
  async function lastTurnEnd(trigger: Trigger, sid: string): Promise<string | undefined> {
    let after: string | undefined;
    let last: string | undefined;
    for (let page = 0; page < TURN_END_MAX_PAGES; page++) {
      const r = await call<{ items: { item_id: string }[]; next: string | null }>(trigger, "stream::list_items", {
        stream_name: TURN_END_STREAM,
        group_id: sid,
        limit: TURN_END_PAGE,
        ...(after ? { after } : {}),
      });
      last = r.items.at(-1)?.item_id ?? last;
      if (!r.next) return last;
      after = r.next;
    }
    return last;
  }

  async function withLease<T>(
    trigger: Trigger,
    sid: string,
    waitMs: number | undefined,
    fn: () => Promise<T>,
  ): Promise<T | { status: "busy" }> {
    const lease =
      waitMs === undefined
        ? await tryLease(trigger, COMPACTION_LEASE_SCOPE, sid, { now })
        : await waitLease(trigger, COMPACTION_LEASE_SCOPE, sid, waitMs, { now });
    if (!lease) return { status: "busy" };
    try {
      return await fn();
    } finally {
      await lease.release();
    }
  }

  return {
    /** `context-compaction::on_turn_end`: the `agent::turn_end` stream trigger. Decides from the
     * round's reported usage alone and hands the work to `compact_async` (fire and forget), so the
     * trigger's delivery never waits on a summariser. */
    async onTurnEnd(trigger: Trigger, payload: unknown): Promise<null> {
      const env = turnEndEnvelope.safeParse(payload);
      if (!env.success || (env.data.event.type !== "create" && env.data.event.type !== "update")) return null;
      const ev = env.data.event.data as Partial<Extract<AgentEvent, { type: "turn_end" }>> | null;
      if (ev?.type !== "turn_end" || !ev.message || ev.message.role !== "assistant") return null;
      const m = ev.message;
      const tokens = usageTokens(m.usage);
      if (tokens === undefined || !m.provider || !m.model || m.provider === HARNESS_MODEL) return null;
      const model = await catalogModel(trigger, m.provider, m.model);
      if (!model) return null;
      const usable = compactionUsableTokens(model.limit, cfg.reservedTokens);
      if (usable === 0 || tokens < usable) return null;
      await trigger({
        function_id: "context-compaction::compact_async",
        payload: {
          session_id: env.data.groupId,
          anchor_item_id: env.data.id,
          provider: m.provider,
          model_id: m.model,
          round_started_at: m.timestamp,
          reported_tokens: tokens,
        },
        action: { type: "void" },
        timeoutMs: ASYNC_COMPACTION_TIMEOUT_MS,
      });
      return null;
    },

    /** `context-compaction::compact_async` (internal): the per-turn compaction. Skips when another
     * compaction holds the lease, or one finished after the reporting round began. */
    async compactAsync(trigger: Trigger, data: unknown): Promise<CompactNowResult | { status: "skipped"; reason: string }> {
      const req = parse("context-compaction::compact_async", asyncRequest, data);
      const model = await catalogModel(trigger, req.provider, req.model_id);
      if (!model || req.reported_tokens < usableTokens(model.limit, cfg)) return { status: "skipped", reason: "fits" };
      const r = await withLease(trigger, req.session_id, undefined, async () => {
        const last = await call<{ at?: unknown } | null | undefined>(trigger, "state::get", {
          scope: LAST_COMPACTION_SCOPE,
          key: req.session_id,
        });
        if (last && typeof last.at === "number" && last.at >= req.round_started_at)
          return { status: "skipped" as const, reason: "compacted_since" };
        let out: CompactNowResult;
        try {
          out = await runCompaction(deps(trigger), req.session_id, {
            mode: "async",
            model,
            force: true,
            reportedTokens: req.reported_tokens,
            entryId: `cmp_${req.anchor_item_id}`,
          });
        } catch (e) {
          // Nobody waits for this call's answer: say what failed where someone will read it.
          console.warn(
            `context-compaction: compaction of ${req.session_id} after ${req.anchor_item_id} failed: ${errorCode(e) ?? "error"}: ${errorText(e)}`,
          );
          throw e;
        }
        if (out.status === "ok") await emitDone(trigger, req.session_id, compactionEventItemId(req.anchor_item_id, "async"), "async", out);
        return out;
      });
      if (r.status === "busy") return { status: "skipped", reason: "busy" };
      return r;
    },

    /** `context-compaction::compact_now`: the orchestrator's pre-flight (it emits `compaction_done`
     * itself, in its own event ids). */
    async compactNow(trigger: Trigger, data: unknown): Promise<CompactNowResult> {
      const req = parse("context-compaction::compact_now", compactNowRequest, data);
      return withLease(trigger, req.session_id, cfg.busyTimeoutMs, () =>
        runCompaction(deps(trigger), req.session_id, {
          mode: "sync",
          model: req.model,
          system: req.system_prompt ?? null,
          tools: req.tools ?? [],
          replayTargetId: req.last_user_message_id ?? null,
          force: req.force === true,
        }),
      );
    },

    /** `context-compaction::compact_session`: a person's `/compact` — always summarises. */
    async compactSession(trigger: Trigger, data: unknown): Promise<CompactNowResult> {
      const req = parse("context-compaction::compact_session", compactSessionRequest, data);
      const model = await resolveModel(trigger, req.session_id, req.model);
      return withLease(trigger, req.session_id, cfg.busyTimeoutMs, async () => {
        const out = await runCompaction(deps(trigger), req.session_id, { mode: "manual", model, force: true });
        if (out.status === "ok") {
          const anchor = await lastTurnEnd(trigger, req.session_id);
          if (anchor) await emitDone(trigger, req.session_id, compactionEventItemId(anchor, "manual"), "sync", out);
        }
        return out;
      });
    },

    /** `context-compaction::prune_tool_outputs`: the prune pass alone. */
    async pruneToolOutputs(trigger: Trigger, data: unknown): Promise<PruneToolOutputsResult> {
      const req = parse("context-compaction::prune_tool_outputs", pruneToolOutputsRequest, data);
      const model = await resolveModel(trigger, req.session_id, req.model);
      const counter = await counterFor({ id: model.id, provider: model.providerID }, cfg.ranks);
      const view = await readView(trigger, req.session_id);
      const counted = countView(counter, view.messages);
      const r = await pruneOutputs(deps(trigger), req.session_id, counted, usableTokens(model.limit, cfg), counter);
      const out: PruneToolOutputsResult = { pruned_tokens: r.tokens, pruned_parts: r.parts, scanned_parts: r.scanned };
      if (r.busy) out.busy = true;
      return out;
    },
  };
}

const descriptions = {
  "context-compaction::on_turn_end":
    "Stream trigger on agent::turn_end: when the round's reported usage reached the model's usable window, compact the session in the background.",
  "context-compaction::compact_async":
    "Internal: the per-turn compaction on_turn_end starts (lease without waiting; compaction_done on agent::events).",
  "context-compaction::compact_now":
    "Pre-flight before a provider call: {session_id, model:{id, providerID, limit}, system_prompt?, tools?, last_user_message_id?} → CompactNowResult (fits | pruned | ok | busy | overflow | empty).",
  "context-compaction::compact_session": "Compact a session now (a UI's /compact): {session_id, model?} → CompactNowResult.",
  "context-compaction::prune_tool_outputs":
    "Replace large old function outputs with [output pruned]: {session_id, model?} → {pruned_tokens, pruned_parts, scanned_parts, busy?}.",
} as const;

export const worker: WorkerModule<ContextCompactionConfig> = {
  name: "context-compaction",
  kernel: true,
  configFrom: compactionConfigFrom,
  register(iii, config) {
    const c = createCompaction(iii, config ?? compactionConfigFrom(iii.env));
    const t = (ctx: { trigger: Trigger }) => ctx.trigger;
    iii.registerFunction("context-compaction::on_turn_end", (data: unknown, ctx) => c.onTurnEnd(t(ctx), data), {
      description: descriptions["context-compaction::on_turn_end"],
    });
    iii.registerFunction("context-compaction::compact_async", (data: unknown, ctx) => c.compactAsync(t(ctx), data), {
      description: descriptions["context-compaction::compact_async"],
    });
    iii.registerFunction("context-compaction::compact_now", (data: unknown, ctx) => c.compactNow(t(ctx), data), {
      description: descriptions["context-compaction::compact_now"],
      request_format: z.toJSONSchema(compactNowRequest, { io: "input", unrepresentable: "any" }),
      response_format: responseFormat(compactNowResult),
    });
    iii.registerFunction("context-compaction::compact_session", (data: unknown, ctx) => c.compactSession(t(ctx), data), {
      description: descriptions["context-compaction::compact_session"],
      request_format: z.toJSONSchema(compactSessionRequest, { io: "input", unrepresentable: "any" }),
      response_format: responseFormat(compactNowResult),
    });
    iii.registerFunction("context-compaction::prune_tool_outputs", (data: unknown, ctx) => c.pruneToolOutputs(t(ctx), data), {
      description: descriptions["context-compaction::prune_tool_outputs"],
      request_format: z.toJSONSchema(pruneToolOutputsRequest, { io: "input", unrepresentable: "any" }),
      response_format: responseFormat(pruneToolOutputsResult),
    });
    // Once per round, not per event (§7 item 3): the orchestrator writes each turn_end here too.
    iii.registerTrigger({ type: "stream", function_id: "context-compaction::on_turn_end", config: { stream_name: TURN_END_STREAM } });
  },
};
export default worker;
