// The `budget::*` functions (docs/harness-contracts.md §6.2, plus `budget::log`, `budget::set_prices` and
// `budget::get_prices`): validation at the edge (zod, `invalid_input`), dollars converted to µUSD
// once, every change through BudgetStore's compare-and-set loop.
import { IIIError, responseFormat } from "@iii-edge/protocol";
import {
  budgetResponses,
  type BudgetFunctionId,
  budgetAlertSetRequest,
  budgetCheckRequest,
  budgetCreateRequest,
  budgetEnforceRequest,
  budgetExemptRequest,
  budgetGetPricesRequest,
  budgetIdRequest,
  budgetListRequest,
  budgetLogRequest,
  budgetPauseRequest,
  budgetRecordRequest,
  budgetSetPricesRequest,
  budgetUpdateRequest,
  budgetUsageRequest,
  BUDGET_LOG_MAX_LIMIT,
  type BudgetAlertPayload,
  type BudgetCheckResponse,
  type BudgetPricesResponse,
  type BudgetRecordResponse,
  type BudgetSpendLogEntry,
  type BudgetView,
  budgetState,
} from "@iii-edge/protocol/harness";
import type { WorkerSurface } from "@iii-edge/sdk-edge/worker";
import type { z } from "zod";
import {
  createBudget,
  decide,
  forecastOf,
  heldMicros,
  logView,
  parseBudget,
  remainingMicros,
  rollTo,
  toView,
  withAlert,
  withExemption,
  withHold,
  withRecord,
  withReset,
  type BudgetRecord,
  type Forecast,
  type StoredAlert,
  type StoredLogEntry,
} from "./ledger.ts";
import { costMicros, microsFromUsd, pricesFromUsd, usdFromMicros } from "./money.ts";
import { clearPrices, resolvePrices, setPrices } from "./prices.ts";
import { BudgetStore, LIST_PAGE, type Clock, type Trigger } from "./store.ts";

/** `budget::list` page size when the request gives none. */
export const LIST_DEFAULT_LIMIT = 100;
/** Rows one `budget::list` call scans for matches of its filters before answering with what it has
 * and a `next_offset` to go on from: a filtered page must not read an unbounded scope. */
export const LIST_SCAN_MAX_ROWS = 5_000;
/** `budget::log` page size when the request gives none. */
export const LOG_DEFAULT_LIMIT = 100;
/** Archived windows `budget::usage {window:"all"}` sums at most (13 years of daily windows); past it
 * the answer says `truncated` and `budget::log` pages through the rest. */
export const USAGE_MAX_LOG_ENTRIES = 5_000;

type In<S extends z.ZodType> = z.output<S>;

export interface BudgetConfig {
  /** The clock (injected in tests). */
  now?: Clock;
}

/** `b_` + 24 hex digits of a random UUID. */
const newBudgetId = (): string => `b_${crypto.randomUUID().replaceAll("-", "").slice(0, 24)}`;
const newAlertId = (): string => `a_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;

export function registerBudgetFunctions(iii: WorkerSurface, config: BudgetConfig): void {
  const clock = config.now ?? Date.now;
  const storeOf = (trigger: unknown) => new BudgetStore(trigger as Trigger, clock);
  // Each function answers its contract's response (protocol's budgetResponses), published as its response_format.
  const register = <S extends z.ZodType, Id extends BudgetFunctionId>(
    id: Id,
    input: S,
    description: string,
    handler: (data: In<S>, store: BudgetStore, trigger: Trigger) => Promise<z.input<(typeof budgetResponses)[Id]>>,
  ) =>
    iii.registerFunction(id, (data: In<S>, ctx) => handler(data, storeOf(ctx.trigger), ctx.trigger as Trigger), {
      description,
      input,
      response_format: responseFormat(budgetResponses[id]),
    });

  /** A change whose answer is the budget as written. */
  const changeView = (store: BudgetStore, id: string, edit: (rec: BudgetRecord, now: number) => void): Promise<BudgetView> =>
    store.change(id, (rec, now) => {
      edit(rec, now);
      return { next: rec, out: toView(rec) };
    });

  register(
    "budget::create",
    budgetCreateRequest,
    "Create a budget: {ceiling_usd|ceiling_micros, period: day|week|month, workspace_id?, agent_id?, name?, budget_id?} → {budget_id, budget}",
    async (data, store) => {
      const id = data.budget_id ?? newBudgetId();
      const ceiling = data.ceiling_micros ?? microsFromUsd(data.ceiling_usd!, "nearest");
      if (ceiling <= 0) throw new IIIError("invalid_input", "budget::create: the ceiling must be at least 1 µUSD");
      const rec = createBudget(id, { ...data, ceiling_micros: ceiling }, store.now());
      if (!(await store.create(rec))) throw new IIIError("already_exists", `budget ${id} already exists (budget::update changes it)`);
      return { budget_id: id, budget: toView(rec) };
    },
  );

  register("budget::get", budgetIdRequest, "A budget as of now (rolled over): {budget_id} → BudgetView", async (data, store) =>
    toView((await store.view(data.budget_id)).rec),
  );

  register(
    "budget::list",
    budgetListRequest,
    "Budgets, optionally of one workspace_id / agent_id: {workspace_id?, agent_id?, limit?, offset?} → {budgets, next_offset}",
    async (data, store) => {
      const limit = data.limit ?? LIST_DEFAULT_LIMIT;
      const now = store.now();
      const budgets: BudgetView[] = [];
      let offset = data.offset ?? 0;
      const scanEnd = offset + LIST_SCAN_MAX_ROWS;
      while (offset < scanEnd) {
        const rows = await store.budgetPage(offset, Math.min(LIST_PAGE, scanEnd - offset));
        for (let i = 0; i < rows.length; i++) {
          const rec = readable(rows[i]);
          if (
            !rec ||
            (data.workspace_id !== undefined && rec.workspace_id !== data.workspace_id) ||
            (data.agent_id !== undefined && rec.agent_id !== data.agent_id)
          )
            continue;
          budgets.push(toView(rollToNow(rec, now)));
          if (budgets.length === limit) return { budgets, next_offset: offset + i + 1 };
        }
        if (rows.length < LIST_PAGE) return { budgets, next_offset: null };
        offset += rows.length;
      }
      return { budgets, next_offset: offset };
    },
  );

  register(
    "budget::update",
    budgetUpdateRequest,
    "Change a budget's ceiling (ceiling_usd|ceiling_micros), name, workspace_id or agent_id (null removes a tag) → BudgetView",
    async (data, store) => {
      const ceiling = data.ceiling_micros ?? (data.ceiling_usd !== undefined ? microsFromUsd(data.ceiling_usd, "nearest") : undefined);
      if (ceiling !== undefined && ceiling <= 0) throw new IIIError("invalid_input", "budget::update: the ceiling must be at least 1 µUSD");
      return changeView(store, data.budget_id, (rec) => {
        if (ceiling !== undefined) rec.ceiling_micros = ceiling;
        for (const field of ["name", "workspace_id", "agent_id"] as const) {
          const v = data[field];
          if (v === null) delete rec[field];
          else if (v !== undefined) rec[field] = v;
        }
      });
    },
  );

  register(
    "budget::delete",
    budgetIdRequest,
    "Delete a budget and its spend log: {budget_id} → {budget_id, deleted}",
    async (data, store, trigger) => {
      const deleted = await store.delete(data.budget_id);
      // The log goes too, page by page (deleting shifts the offsets, so always the first page).
      for (;;) {
        const page = await store.logPage(data.budget_id, 0, LIST_PAGE);
        if (page.length === 0) break;
        await Promise.all(
          page.map((e) => trigger({ function_id: "state::delete", payload: budgetState.spendLog(data.budget_id, e.log_key) })),
        );
        if (page.length < LIST_PAGE) break;
      }
      return { budget_id: data.budget_id, deleted };
    },
  );

  register(
    "budget::check",
    budgetCheckRequest,
    "May a call costing about this much go ahead? {budget_id, estimated_cost_micros|estimated_cost_usd|estimate:{provider, model, input_tokens, output_tokens?}, principal_id?, hold_id?} → {allowed, reason?, remaining_micros, …}. With hold_id an allowed estimate is reserved until budget::record {record_id: hold_id}.",
    async (data, store, trigger): Promise<BudgetCheckResponse> => {
      const first = prefetch(store, data.budget_id);
      let estimate: number | undefined = 0;
      if (data.estimated_cost_micros !== undefined) estimate = data.estimated_cost_micros;
      else if (data.estimated_cost_usd !== undefined) estimate = microsFromUsd(data.estimated_cost_usd, "up");
      else if (data.estimate) {
        const e = data.estimate;
        const p = await resolvePrices(trigger, e.provider, e.model);
        estimate = p.prices
          ? costMicros(
              { input: e.input_tokens, output: e.output_tokens, cache_read: e.cache_read_tokens, cache_write: e.cache_write_tokens },
              p.prices,
            )
          : undefined;
      }
      return store.change(
        data.budget_id,
        (rec, now) => {
          const outcome = decide(rec, now, estimate, data.principal_id, data.hold_id);
          // Only a call let through by the ceiling rule holds money: the others are not enforced.
          const hold = outcome.allowed && outcome.reason === undefined && data.hold_id !== undefined;
          const remaining = remainingMicros(rec, data.hold_id);
          if (hold) withHold(rec, data.hold_id!, estimate ?? 0, now);
          const out: BudgetCheckResponse = {
            budget_id: rec.id,
            allowed: outcome.allowed,
            estimated_cost_micros: estimate ?? 0,
            remaining_micros: remaining,
            spent_micros: rec.spent_micros,
            held_micros: heldMicros(rec, data.hold_id),
            ceiling_micros: rec.ceiling_micros,
            remaining_usd: usdFromMicros(remaining),
            estimated_cost_usd: usdFromMicros(estimate ?? 0),
            held: hold,
            period_resets_at: rec.period_resets_at,
          };
          if (outcome.reason) out.reason = outcome.reason;
          return { next: hold ? rec : undefined, out };
        },
        first,
      );
    },
  );

  register(
    "budget::record",
    budgetRecordRequest,
    "Add a call's cost: {budget_id, record_id?, cost_micros|cost_usd|usage (+provider, model)} → {recorded, cost_micros, spent_micros, remaining_micros, alerts_fired, …}. A repeated record_id adds nothing.",
    async (data, store, trigger): Promise<BudgetRecordResponse> => {
      const first = prefetch(store, data.budget_id);
      let cost: number;
      let priced = true;
      if (data.cost_micros !== undefined) cost = data.cost_micros;
      else if (data.cost_usd !== undefined) cost = microsFromUsd(data.cost_usd, "up");
      else {
        const u = data.usage!;
        const p = await resolvePrices(trigger, data.provider!, data.model!);
        if (p.prices) cost = costMicros(u, p.prices);
        else if (u.cost_usd !== undefined) cost = microsFromUsd(u.cost_usd, "up");
        else {
          cost = 0;
          priced = false;
          console.warn(
            `budget-tracker: no price for ${data.provider}/${data.model}: usage recorded at 0 on budget ${data.budget_id} (budget::set_prices sets one)`,
          );
        }
      }
      const result = await store.change(
        data.budget_id,
        (rec) => {
          const holdsBefore = rec.holds.length;
          const { duplicate, fired } = withRecord(rec, cost, data.record_id);
          const remaining = remainingMicros(rec);
          const out: BudgetRecordResponse = {
            budget_id: rec.id,
            recorded: !duplicate,
            cost_micros: duplicate ? 0 : cost,
            priced,
            spent_micros: rec.spent_micros,
            remaining_micros: remaining,
            spent_usd: usdFromMicros(rec.spent_micros),
            remaining_usd: usdFromMicros(remaining),
            cost_usd: usdFromMicros(duplicate ? 0 : cost),
            alerts_fired: fired.map((a) => a.alert_id),
          };
          const wrote = !duplicate || rec.holds.length !== holdsBefore;
          return { next: wrote ? rec : undefined, out: { out, fired, rec } };
        },
        first,
      );
      for (const a of result.fired) fireAlert(trigger, result.rec, a);
      return result.out;
    },
  );

  register(
    "budget::reset",
    budgetIdRequest,
    "Archive the current window to the spend log, zero the spend, re-anchor the window at now, clear alert marks → BudgetView",
    async (data, store) => changeView(store, data.budget_id, (rec, now) => withReset(rec, now)),
  );

  register(
    "budget::alert_set",
    budgetAlertSetRequest,
    "Add or replace an alert: {budget_id, threshold_pct ∈ (0,1], callback_function_id, callback_payload?, alert_id?} → {budget_id, alert_id}. The callback is triggered once per window when a record reaches the threshold.",
    async (data, store) => {
      const alert_id = data.alert_id ?? newAlertId();
      await changeView(store, data.budget_id, (rec) => {
        const a: Omit<StoredAlert, "threshold_ppm"> = {
          alert_id,
          threshold_pct: data.threshold_pct,
          callback_function_id: data.callback_function_id,
        };
        if (data.callback_payload !== undefined) a.callback_payload = data.callback_payload;
        withAlert(rec, a);
      });
      return { budget_id: data.budget_id, alert_id };
    },
  );

  register(
    "budget::usage",
    budgetUsageRequest,
    "Spend by window: {budget_id, window: all|current|<period>} → {spent_micros, records_count, by_period:[…], …}",
    async (data, store) => {
      const { rec, stored } = await store.view(data.budget_id);
      if (data.window !== "all" && data.window !== "current" && data.window !== rec.period) {
        throw new IIIError(
          "invalid_input",
          `budget ${rec.id} is a ${rec.period} budget: window must be "all", "current" or "${rec.period}"`,
        );
      }
      const current: BudgetSpendLogEntry = {
        budget_id: rec.id,
        log_key: "current",
        kind: "rollover",
        period: rec.period,
        period_start: rec.period_start_at,
        period_end: rec.period_resets_at,
        spent_micros: rec.spent_micros,
        spent_usd: usdFromMicros(rec.spent_micros),
        records_count: rec.records_count,
      };
      let archived: StoredLogEntry[] = [];
      let truncated = false;
      if (data.window === "all") ({ entries: archived, truncated } = await archive(store, stored, rec));
      const by_period = [...archived.map(logView), current];
      const spent = by_period.reduce((s, e) => s + e.spent_micros, 0);
      return {
        budget_id: rec.id,
        window: data.window,
        spent_micros: spent,
        spent_usd: usdFromMicros(spent),
        records_count: by_period.reduce((s, e) => s + e.records_count, 0),
        by_period,
        truncated,
      };
    },
  );

  register(
    "budget::forecast",
    budgetIdRequest,
    "A linear projection of the current window's spend: {budget_id} → {projected_month_usd, on_track, days_until_breach, …} (month = 30 days)",
    async (data, store): Promise<Forecast> => {
      const { rec, now } = await store.view(data.budget_id);
      return forecastOf(rec, now);
    },
  );

  register(
    "budget::enforce",
    budgetEnforceRequest,
    "Turn enforcement on or off: {budget_id, enforced} → BudgetView (off: checks allow, reason not_enforced; spend is still recorded)",
    async (data, store) => changeView(store, data.budget_id, (rec) => void (rec.enforced = data.enforced)),
  );

  register(
    "budget::exempt",
    budgetExemptRequest,
    "Let one principal (the orchestrator sends the session id) through for 24 h: {budget_id, principal_id, reason} → {budget_id, principal_id, expires_at}",
    async (data, store) => {
      const expires_at = await store.change(data.budget_id, (rec, now) => ({
        next: rec,
        out: withExemption(rec, data.principal_id, data.reason, now),
      }));
      return { budget_id: data.budget_id, principal_id: data.principal_id, expires_at };
    },
  );

  register(
    "budget::pause",
    budgetPauseRequest,
    "Pause (paused:true, the default) or resume a budget → BudgetView (paused: checks allow, reason paused; spend is still recorded)",
    async (data, store) => changeView(store, data.budget_id, (rec) => void (rec.paused = data.paused)),
  );

  register(
    "budget::log",
    budgetLogRequest,
    "The spend log (closed windows, oldest first): {budget_id, limit?, offset?} → {entries, next_offset}",
    async (data, store) => {
      const { rec, stored } = await store.view(data.budget_id);
      if (stored.last_closed) await store.writeLog(stored.last_closed);
      const limit = Math.min(data.limit ?? LOG_DEFAULT_LIMIT, BUDGET_LOG_MAX_LIMIT);
      const offset = data.offset ?? 0;
      const page = await store.logPage(rec.id, offset, limit);
      return { budget_id: rec.id, entries: page.map(logView), next_offset: page.length === limit ? offset + limit : null };
    },
  );

  register(
    "budget::set_prices",
    budgetSetPricesRequest,
    "Override a model's prices (USD per 1M tokens; they win over the models catalog): {provider, model, input_per_1m, output_per_1m, cache_read_per_1m?, cache_write_per_1m?} or {provider, model, clear:true} → the prices in force",
    async (data, _store, trigger): Promise<BudgetPricesResponse> => {
      if (data.clear) {
        await clearPrices(trigger, data.provider, data.model);
        return resolvePrices(trigger, data.provider, data.model);
      }
      const prices = pricesFromUsd(data.input_per_1m!, data.output_per_1m!, data.cache_read_per_1m, data.cache_write_per_1m);
      await setPrices(trigger, { provider: data.provider, model: data.model, ...prices, updated_at: clock() });
      return { provider: data.provider, model: data.model, source: "override", prices };
    },
  );

  register(
    "budget::get_prices",
    budgetGetPricesRequest,
    "The prices a model's usage is charged at (µUSD per 1M tokens) and where they come from (override, catalog, none): {provider, model}",
    async (data, _store, trigger) => resolvePrices(trigger, data.provider, data.model),
  );
}

/** A listed row as a budget; a row that is not one is passed over (and logged), not fatal to the list. */
function readable(row: unknown): BudgetRecord | undefined {
  try {
    return parseBudget(row, "(listed)");
  } catch (e) {
    console.warn(`budget-tracker: ${String(e)}`);
    return undefined;
  }
}

/** A read's rollover (not written: ./store.ts view()). */
const rollToNow = (rec: BudgetRecord, now: number): BudgetRecord => rollTo(rec, now).rec;

/** The budget row, fetched while the caller prices its call; a failure surfaces where it is awaited. */
function prefetch(store: BudgetStore, id: string): Promise<unknown> {
  const p = store.readRaw(id);
  p.catch(() => undefined);
  return p;
}

/**
 * The closed windows of a budget, oldest first: the spend log, plus the windows only the row knows
 * yet — its `last_closed` (written again here: its first write may have been lost with a crash right
 * after the close) and the window a read's rollover just closed in memory (archived by the next change).
 */
async function archive(
  store: BudgetStore,
  stored: BudgetRecord,
  rolled: BudgetRecord,
): Promise<{ entries: StoredLogEntry[]; truncated: boolean }> {
  if (stored.last_closed) await store.writeLog(stored.last_closed);
  const entries: StoredLogEntry[] = [];
  let truncated = true;
  while (entries.length < USAGE_MAX_LOG_ENTRIES) {
    const page = await store.logPage(stored.id, entries.length, Math.min(LIST_PAGE, USAGE_MAX_LOG_ENTRIES - entries.length));
    entries.push(...page);
    if (page.length < LIST_PAGE) {
      truncated = false;
      break;
    }
  }
  const closedNow = rolled.last_closed;
  if (closedNow && !entries.some((e) => e.log_key === closedNow.log_key)) entries.push(closedNow);
  return { entries, truncated };
}

/** An alert's callback, fire-and-forget (its outcome is the callback's business; it was marked
 * fired in the same write as the spend that crossed it). */
function fireAlert(trigger: Trigger, rec: BudgetRecord, a: StoredAlert): void {
  const payload: BudgetAlertPayload = {
    ...(a.callback_payload ?? {}),
    alert_id: a.alert_id,
    budget_id: rec.id,
    threshold_pct: a.threshold_pct,
    spent_micros: rec.spent_micros,
    ceiling_micros: rec.ceiling_micros,
    spent_usd: usdFromMicros(rec.spent_micros),
    ceiling_usd: usdFromMicros(rec.ceiling_micros),
    period_start_at: rec.period_start_at,
  };
  trigger({ function_id: a.callback_function_id, payload, action: { type: "void" } }).catch((e: unknown) =>
    console.warn(`budget-tracker: alert ${a.alert_id} of ${rec.id} could not be sent to ${a.callback_function_id}: ${String(e)}`),
  );
}
