// The budget tracker's contracts (docs/harness-contracts.md §1.9, §6.2): `budget::*`.
import { z } from "zod";
import { providerName } from "./providers.ts";
import type { StateKey } from "./state.ts";

// LLM spend per budget (a budget is tagged with a `workspace_id` and/or an `agent_id`; a run names
// the one it is charged to with `budget_id`). Money is **integer micro-USD** (1 USD = 1 000 000 µUSD)
// in storage and in every sum; the `_usd` fields of answers are derived from them for display.
// Every mutation is a compare-and-set on the budget's state row (no in-process lock), so any
// number of copies of the worker may run. The orchestrator calls `budget::check` before each
// provider call (with a hold on the estimate) and `budget::record` after it (with the round's id).

export const BUDGETS_SCOPE = "budgets";
/** Archived windows (rollovers and resets) of one budget live in their own scope, so one budget's
 * log is listed without reading every other budget's. */
export const budgetSpendLogScope = (budgetId: string): string => `budget_spend_log:${budgetId}`;
/** User price overrides, key `<provider>:<model>` (they win over the models catalog's `pricing`). */
export const BUDGET_PRICES_SCOPE = "budget_prices";
/** The budget tracker's state: a budget (`budget:<id>`), one closed window of its spend log, and a
 * model's price override. */
export const budgetState = {
  budget: (budgetId: string): StateKey => ({ scope: BUDGETS_SCOPE, key: `budget:${budgetId}` }),
  spendLog: (budgetId: string, logKey: string): StateKey => ({ scope: budgetSpendLogScope(budgetId), key: logKey }),
  prices: (provider: string, model: string): StateKey => ({ scope: BUDGET_PRICES_SCOPE, key: `${provider}:${model}` }),
};
export const MICROS_PER_USD = 1_000_000;
/** Prices are per this many tokens (the catalog's `*_per_1m`). */
export const TOKENS_PER_PRICE_UNIT = 1_000_000;
export const BUDGET_PERIODS = ["day", "week", "month"] as const;
export type BudgetPeriod = (typeof BUDGET_PERIODS)[number];
/** How long `budget::exempt` lets a principal through (§6.2: 24 h). */
export const BUDGET_EXEMPTION_MS = 24 * 60 * 60 * 1000;
/** Largest ceiling (1e9 USD): far past any LLM budget, and a sum of spends under it stays an exact
 * integer in a JSON number (2^53 ≈ 9e15 µUSD). */
export const MAX_BUDGET_MICROS = 1_000_000_000_000_000;
/** Largest cost one record may add (1e6 USD): a model call costs cents to dollars; more is a bug. */
export const MAX_RECORD_MICROS = 1_000_000_000_000;
/** Most tokens of one kind in one call's usage: context windows are ~1e6 tokens. */
export const MAX_USAGE_TOKENS = 1_000_000_000;
/** Highest price accepted (10 000 USD per 1M tokens): current models cost 0.05–100. */
export const MAX_PRICE_PER_1M_USD = 10_000;

/** Why `budget::check` answered as it did, in the order it decides (§6.2): the first three let the
 * call through; `unpriced_model` (an estimate in tokens for a model with no price) and
 * `ceiling_exceeded` refuse it. */
export const BUDGET_CHECK_REASONS = ["paused", "not_enforced", "exempt", "unpriced_model", "ceiling_exceeded"] as const;
export type BudgetCheckReason = (typeof BUDGET_CHECK_REASONS)[number];

export const BUDGET_ID_PATTERN = /^[A-Za-z0-9._:@-]{1,200}$/;
export const budgetIdSchema = z.string().regex(BUDGET_ID_PATTERN, "budget_id must be 1–200 of A-Z a-z 0-9 . _ : @ -");
const budgetTag = z.string().min(1).max(200);
const microsAmount = z.number().int().nonnegative().max(MAX_BUDGET_MICROS);
const usdAmount = z
  .number()
  .nonnegative()
  .max(MAX_BUDGET_MICROS / MICROS_PER_USD);
const tokens = z.number().int().nonnegative().max(MAX_USAGE_TOKENS);
const pricePer1m = z.number().nonnegative().max(MAX_PRICE_PER_1M_USD);
/** Round ids (`<run_id>:<turn_count>`) and other caller-chosen idempotency keys. */
const recordIdSchema = z.string().min(1).max(300);
const budgetModelId = z.string().min(1).max(200);

export const budgetCreateRequest = z
  .object({
    /** Chosen by the caller (idempotent creation by name) or generated (`b_<uuid>`). */
    budget_id: budgetIdSchema.optional(),
    ceiling_micros: microsAmount.positive().optional(),
    ceiling_usd: usdAmount.positive().optional(),
    period: z.enum(BUDGET_PERIODS),
    workspace_id: budgetTag.optional(),
    agent_id: budgetTag.optional(),
    name: z.string().min(1).max(200).optional(),
    enforced: z.boolean().optional(),
    paused: z.boolean().optional(),
  })
  .refine(
    (r) => (r.ceiling_micros === undefined) !== (r.ceiling_usd === undefined),
    "give exactly one of ceiling_micros, ceiling_usd (> 0)",
  );
export const budgetIdRequest = z.object({ budget_id: budgetIdSchema });
/** Most budgets one `budget::list` page returns. */
export const BUDGET_LIST_MAX_LIMIT = 500;
export const budgetListRequest = z.object({
  workspace_id: budgetTag.optional(),
  agent_id: budgetTag.optional(),
  limit: z.number().int().min(1).max(BUDGET_LIST_MAX_LIMIT).optional(),
  /** Offset into the scope's rows (what `next_offset` of the previous page said). */
  offset: z.number().int().min(0).optional(),
});
/** The whitelist `budget::update` takes (`period` is fixed at creation: changing it would split a
 * window in two; create another budget). Anything else is refused. */
export const budgetUpdateRequest = z
  .strictObject({
    budget_id: budgetIdSchema,
    ceiling_micros: microsAmount.positive().optional(),
    ceiling_usd: usdAmount.positive().optional(),
    name: z.string().min(1).max(200).nullable().optional(),
    workspace_id: budgetTag.nullable().optional(),
    agent_id: budgetTag.nullable().optional(),
  })
  .refine((r) => r.ceiling_micros === undefined || r.ceiling_usd === undefined, "give at most one of ceiling_micros, ceiling_usd");
/** A call's cost in tokens of a model, priced by the worker (override, else the catalog). */
export const budgetTokenEstimate = z.object({
  provider: providerName,
  model: budgetModelId,
  input_tokens: tokens,
  output_tokens: tokens.default(0),
  cache_read_tokens: tokens.default(0),
  cache_write_tokens: tokens.default(0),
});
export const budgetCheckRequest = z
  .object({
    budget_id: budgetIdSchema,
    estimated_cost_micros: microsAmount.optional(),
    estimated_cost_usd: usdAmount.optional(),
    estimate: budgetTokenEstimate.optional(),
    /** Who is asking (the orchestrator sends the session id): `budget::exempt` names principals. */
    principal_id: z.string().min(1).max(300).optional(),
    /** Reserve the estimate under this id until `budget::record {record_id: hold_id}` settles it (or
     * BUDGET_HOLD_TTL_MS passes), so concurrent calls cannot all pass on the same remaining money. */
    hold_id: recordIdSchema.optional(),
  })
  .refine(
    (r) => [r.estimated_cost_micros, r.estimated_cost_usd, r.estimate].filter((v) => v !== undefined).length <= 1,
    "give at most one of estimated_cost_micros, estimated_cost_usd, estimate",
  );
/** A hold older than this is dropped: a provider call ends within 300 s and its step's queue
 * deadline is 360 s, after which the step is redelivered and holds again under the same id. */
export const BUDGET_HOLD_TTL_MS = 360_000;
export const budgetCheckResponse = z.object({
  budget_id: z.string(),
  allowed: z.boolean(),
  reason: z.enum(BUDGET_CHECK_REASONS).optional(),
  estimated_cost_micros: z.number(),
  /** ceiling − spent − held (holds of other calls), negative when overspent. */
  remaining_micros: z.number(),
  spent_micros: z.number(),
  held_micros: z.number(),
  ceiling_micros: z.number(),
  remaining_usd: z.number(),
  estimated_cost_usd: z.number(),
  /** Whether the estimate is now held under `hold_id`. */
  held: z.boolean(),
  period_resets_at: z.number(),
});
export type BudgetCheckResponse = z.infer<typeof budgetCheckResponse>;
export const budgetUsageSchema = z.object({
  input: tokens.optional(),
  output: tokens.optional(),
  cache_read: tokens.optional(),
  cache_write: tokens.optional(),
  reasoning: tokens.optional(),
  cost_usd: z.number().nonnegative().optional(),
});
export const budgetRecordRequest = z
  .object({
    budget_id: budgetIdSchema,
    /** Idempotency key: a repeat of a recent id adds nothing (and settles its hold). */
    record_id: recordIdSchema.optional(),
    cost_micros: z.number().int().nonnegative().max(MAX_RECORD_MICROS).optional(),
    cost_usd: z
      .number()
      .nonnegative()
      .max(MAX_RECORD_MICROS / MICROS_PER_USD)
      .optional(),
    /** A provider's usage (`AssistantMessage.usage`): priced by `provider` + `model`. */
    usage: budgetUsageSchema.optional(),
    provider: providerName.optional(),
    model: budgetModelId.optional(),
    principal_id: z.string().min(1).max(300).optional(),
  })
  .refine(
    (r) => [r.cost_micros, r.cost_usd, r.usage].filter((v) => v !== undefined).length === 1,
    "give exactly one of cost_micros, cost_usd, usage",
  )
  .refine(
    (r) => r.usage === undefined || (r.provider !== undefined && r.model !== undefined),
    "usage needs provider and model (to price it)",
  );
export const budgetRecordResponse = z.object({
  budget_id: z.string(),
  /** false: `record_id` was recorded before; nothing was added. */
  recorded: z.boolean(),
  cost_micros: z.number(),
  /** false: usage of a model with no price (and no `usage.cost_usd`): recorded as 0. */
  priced: z.boolean(),
  spent_micros: z.number(),
  remaining_micros: z.number(),
  spent_usd: z.number(),
  remaining_usd: z.number(),
  cost_usd: z.number(),
  /** Alerts this record crossed (each fires once per period). */
  alerts_fired: z.array(z.string()),
});
export type BudgetRecordResponse = z.infer<typeof budgetRecordResponse>;
/** Most alerts and exemptions one budget keeps (each is checked on every record/check). */
export const BUDGET_MAX_ALERTS = 32;
export const BUDGET_MAX_EXEMPTIONS = 64;
export const budgetAlertSetRequest = z.object({
  budget_id: budgetIdSchema,
  /** Given: replaces that alert (or adds it under this id). */
  alert_id: z.string().min(1).max(200).optional(),
  /** A fraction of the ceiling in (0, 1]. */
  threshold_pct: z.number().gt(0).max(1),
  callback_function_id: z.string().min(1).max(300),
  /** Spread into the callback's payload (an object). */
  callback_payload: z.record(z.string(), z.unknown()).optional(),
});
/** What an alert's callback gets (triggered fire-and-forget once per period). */
export interface BudgetAlertPayload {
  alert_id: string;
  budget_id: string;
  threshold_pct: number;
  spent_micros: number;
  ceiling_micros: number;
  spent_usd: number;
  ceiling_usd: number;
  period_start_at: number;
  [key: string]: unknown;
}
export const budgetUsageRequest = z.object({
  budget_id: budgetIdSchema,
  /** `all`: every archived window and the current one; `current` or the budget's period: the current one. */
  window: z.union([z.literal("all"), z.literal("current"), z.enum(BUDGET_PERIODS)]).default("all"),
});
export const budgetEnforceRequest = z.object({ budget_id: budgetIdSchema, enforced: z.boolean() });
export const budgetExemptRequest = z.object({
  budget_id: budgetIdSchema,
  principal_id: z.string().min(1).max(300),
  reason: z.string().min(1).max(2_000),
});
export const budgetPauseRequest = z.object({ budget_id: budgetIdSchema, paused: z.boolean().default(true) });
/** Most spend-log entries one `budget::log` page returns. */
export const BUDGET_LOG_MAX_LIMIT = 1_000;
export const budgetLogRequest = z.object({
  budget_id: budgetIdSchema,
  limit: z.number().int().min(1).max(BUDGET_LOG_MAX_LIMIT).optional(),
  offset: z.number().int().min(0).optional(),
});
export const budgetSetPricesRequest = z
  .object({
    provider: providerName,
    model: budgetModelId,
    input_per_1m: pricePer1m.optional(),
    output_per_1m: pricePer1m.optional(),
    /** Default: the input price (as the providers price cache tokens without one). */
    cache_read_per_1m: pricePer1m.optional(),
    cache_write_per_1m: pricePer1m.optional(),
    /** Remove the override (the catalog's price applies again). */
    clear: z.boolean().optional(),
  })
  .refine(
    (r) => (r.clear === true) !== (r.input_per_1m !== undefined && r.output_per_1m !== undefined),
    "give input_per_1m and output_per_1m, or clear:true",
  );
export const budgetGetPricesRequest = z.object({ provider: providerName, model: budgetModelId });

/** Prices in integer micro-USD per 1M tokens. */
export const budgetPricesSchema = z.object({
  input_micros_per_1m: z.number(),
  output_micros_per_1m: z.number(),
  cache_read_micros_per_1m: z.number(),
  cache_write_micros_per_1m: z.number(),
});
export type BudgetPrices = z.infer<typeof budgetPricesSchema>;
export const budgetPricesResponse = z.object({
  provider: z.string(),
  model: z.string(),
  /** `override` (budget::set_prices), `catalog` (models::get pricing) or `none` (unpriced). */
  source: z.enum(["override", "catalog", "none"]),
  prices: budgetPricesSchema.nullable(),
});
export type BudgetPricesResponse = z.infer<typeof budgetPricesResponse>;
export const budgetAlertSchema = z.object({
  alert_id: z.string(),
  threshold_pct: z.number(),
  callback_function_id: z.string(),
  callback_payload: z.record(z.string(), z.unknown()).optional(),
  /** The window (its `period_start_at`) the alert last fired in. */
  last_fired_period_start: z.number().optional(),
});
export type BudgetAlert = z.infer<typeof budgetAlertSchema>;
export const budgetExemptionSchema = z.object({ principal_id: z.string(), reason: z.string(), expires_at: z.number() });
export type BudgetExemption = z.infer<typeof budgetExemptionSchema>;
/** What callers see of a budget (`budget::get`, `list`, mutations), already rolled over to now. */
export const budgetViewSchema = z.object({
  budget_id: z.string(),
  workspace_id: z.string().optional(),
  agent_id: z.string().optional(),
  name: z.string().optional(),
  period: z.enum(BUDGET_PERIODS),
  ceiling_micros: z.number(),
  spent_micros: z.number(),
  held_micros: z.number(),
  remaining_micros: z.number(),
  records_count: z.number(),
  ceiling_usd: z.number(),
  spent_usd: z.number(),
  remaining_usd: z.number(),
  period_start_at: z.number(),
  period_resets_at: z.number(),
  enforced: z.boolean(),
  paused: z.boolean(),
  alerts: z.array(budgetAlertSchema),
  exemptions: z.array(budgetExemptionSchema),
  created_at: z.number(),
  updated_at: z.number(),
});
export type BudgetView = z.infer<typeof budgetViewSchema>;
/** One closed window (`budget::log`, `budget::usage`'s `by_period`). */
export const budgetSpendLogEntrySchema = z.object({
  budget_id: z.string(),
  /** Stable and sortable: `day:2026-11-30`, `week:2026-11-30` (its Monday), `month:2026-11`;
   * a manual reset adds `:reset-<ms>`. */
  log_key: z.string(),
  kind: z.enum(["rollover", "reset"]),
  period: z.enum(BUDGET_PERIODS),
  period_start: z.number(),
  period_end: z.number(),
  spent_micros: z.number(),
  spent_usd: z.number(),
  records_count: z.number(),
});
export type BudgetSpendLogEntry = z.infer<typeof budgetSpendLogEntrySchema>;

/** `budget::forecast`: a linear projection of the current window's spend (month = 30 days). */
export const budgetForecastResponse = z.object({
  budget_id: z.string(),
  spent_micros: z.number(),
  rate_micros_per_day: z.number(),
  projected_month_micros: z.number(),
  projected_month_usd: z.number(),
  /** What the window will have spent at its end at the current rate. */
  projected_period_micros: z.number(),
  projected_period_usd: z.number(),
  on_track: z.boolean(),
  /** Days from now until the ceiling is reached at the current rate; 0 when it already is; null
   * when there is no spend or the window resets first. */
  days_until_breach: z.number().nullable(),
});
export type BudgetForecast = z.infer<typeof budgetForecastResponse>;

/** What each `budget::*` function answers. */
export const budgetResponses = {
  "budget::create": z.object({ budget_id: z.string(), budget: budgetViewSchema }),
  "budget::get": budgetViewSchema,
  "budget::list": z.object({
    budgets: z.array(budgetViewSchema),
    /** Pass as `offset` for the next page; null: no more. */
    next_offset: z.number().nullable(),
  }),
  "budget::update": budgetViewSchema,
  "budget::delete": z.object({ budget_id: z.string(), deleted: z.boolean() }),
  "budget::check": budgetCheckResponse,
  "budget::record": budgetRecordResponse,
  "budget::reset": budgetViewSchema,
  "budget::alert_set": z.object({ budget_id: z.string(), alert_id: z.string() }),
  "budget::usage": z.object({
    budget_id: z.string(),
    window: z.string(),
    spent_micros: z.number(),
    spent_usd: z.number(),
    records_count: z.number(),
    /** The archived windows asked for, then the current one. */
    by_period: z.array(budgetSpendLogEntrySchema),
    /** true: the log was longer than one answer reads; the oldest windows are left out. */
    truncated: z.boolean(),
  }),
  "budget::forecast": budgetForecastResponse,
  "budget::enforce": budgetViewSchema,
  "budget::exempt": z.object({ budget_id: z.string(), principal_id: z.string(), expires_at: z.number() }),
  "budget::pause": budgetViewSchema,
  "budget::log": z.object({ budget_id: z.string(), entries: z.array(budgetSpendLogEntrySchema), next_offset: z.number().nullable() }),
  "budget::set_prices": budgetPricesResponse,
  "budget::get_prices": budgetPricesResponse,
} as const;
export type BudgetFunctionId = keyof typeof budgetResponses;
