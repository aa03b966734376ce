// The budget ledger as pure functions of a stored record and a time (docs/harness-contracts.md §6.2):
// rollover, the check's order, holds, records with their alerts, resets, views and the forecast. No
// I/O here: ./store.ts runs these inside its compare-and-set loop, so whatever they decide is
// written only if nobody else changed the budget in between.
import { IIIError, formatIssues } from "@iii-edge/protocol";
import {
  BUDGET_EXEMPTION_MS,
  BUDGET_HOLD_TTL_MS,
  BUDGET_MAX_ALERTS,
  BUDGET_MAX_EXEMPTIONS,
  BUDGET_PERIODS,
  type BudgetAlert,
  type BudgetForecast,
  type BudgetCheckReason,
  type BudgetPeriod,
  type BudgetSpendLogEntry,
  type BudgetView,
} from "@iii-edge/protocol/harness";
import { z } from "zod";
import { productAtLeast, usdFromMicros } from "./money.ts";
import { DAY_MS, periodKey, windowAt } from "./periods.ts";

/** Record ids remembered per budget for idempotency: a redelivered step records again within
 * minutes (queue retries back off from 200 ms, the step deadline is 360 s), while 512 rounds would
 * have to be charged to the same budget in between to push an id out. */
export const RECENT_RECORDS_MAX = 512;
/** Concurrent holds per budget: one per provider call in flight on it (the turn-step queue runs
 * 100 steps at once per engine; a few engines' worth fits). */
export const MAX_HOLDS = 1_000;
/** The forecast's rate is spend over at least this much time: a cent spent in the first minute of
 * a month is not a projection of 430 USD. */
export const FORECAST_MIN_ELAPSED_MS = 60 * 60 * 1000;
/** The forecast's "month" (§6.2). */
export const FORECAST_MONTH_MS = 30 * DAY_MS;
/** Alert thresholds are kept in parts per million of the ceiling, compared exactly. */
const PPM = 1_000_000;

export interface StoredAlert extends BudgetAlert {
  threshold_ppm: number;
}
export interface Hold {
  hold_id: string;
  micros: number;
  expires_at: number;
}
/** A closed window as stored (`spent_usd` is added when shown). */
export type StoredLogEntry = Omit<BudgetSpendLogEntry, "spent_usd">;

/** `budgets` / `budget:<id>`: every amount an integer number of µUSD. */
export interface BudgetRecord {
  id: string;
  workspace_id?: string;
  agent_id?: string;
  name?: string;
  period: BudgetPeriod;
  ceiling_micros: number;
  spent_micros: number;
  records_count: number;
  period_start_at: number;
  period_resets_at: number;
  enforced: boolean;
  paused: boolean;
  alerts: StoredAlert[];
  exemptions: { principal_id: string; reason: string; expires_at: number }[];
  /** Estimates reserved by allowed checks, until their record settles them. */
  holds: Hold[];
  /** The last RECENT_RECORDS_MAX record ids, oldest first. */
  recent_records: string[];
  /** The last window closed (by rollover or reset): written to the spend log after the write that
   * closed it commits, and again (same content) before the next close replaces it. */
  last_closed?: StoredLogEntry;
  created_at: number;
  updated_at: number;
}

const int = z.number().int();
const storedAlert = z.object({
  alert_id: z.string(),
  threshold_pct: z.number(),
  threshold_ppm: int,
  callback_function_id: z.string(),
  callback_payload: z.record(z.string(), z.unknown()).optional(),
  last_fired_period_start: int.optional(),
});
const storedLog = z.object({
  budget_id: z.string(),
  log_key: z.string(),
  kind: z.enum(["rollover", "reset"]),
  period: z.enum(BUDGET_PERIODS),
  period_start: int,
  period_end: int,
  spent_micros: int,
  records_count: int,
});
const storedBudget = z.object({
  id: z.string(),
  workspace_id: z.string().optional(),
  agent_id: z.string().optional(),
  name: z.string().optional(),
  period: z.enum(BUDGET_PERIODS),
  ceiling_micros: int,
  spent_micros: int,
  records_count: int,
  period_start_at: int,
  period_resets_at: int,
  enforced: z.boolean(),
  paused: z.boolean(),
  alerts: z.array(storedAlert),
  exemptions: z.array(z.object({ principal_id: z.string(), reason: z.string(), expires_at: int })),
  holds: z.array(z.object({ hold_id: z.string(), micros: int, expires_at: int })),
  recent_records: z.array(z.string()),
  last_closed: storedLog.optional(),
  created_at: int,
  updated_at: int,
}) satisfies z.ZodType<BudgetRecord>;

/** A stored budget, or undefined when absent; a row that is not a budget is a typed error. */
export function parseBudget(raw: unknown, id: string): BudgetRecord | undefined {
  if (raw === undefined || raw === null) return undefined;
  const r = storedBudget.safeParse(raw);
  if (!r.success) throw new IIIError("budget_unreadable", `budget ${id}: the stored row is not a budget (${formatIssues(r.error)})`);
  return r.data;
}
export const parseLogEntry = (raw: unknown): StoredLogEntry | undefined => {
  const r = storedLog.safeParse(raw);
  return r.success ? r.data : undefined;
};

export interface NewBudget {
  ceiling_micros: number;
  period: BudgetPeriod;
  workspace_id?: string;
  agent_id?: string;
  name?: string;
  enforced?: boolean;
  paused?: boolean;
}

export function createBudget(id: string, input: NewBudget, now: number): BudgetRecord {
  const w = windowAt(input.period, now);
  const rec: BudgetRecord = {
    id,
    period: input.period,
    ceiling_micros: input.ceiling_micros,
    spent_micros: 0,
    records_count: 0,
    period_start_at: w.start,
    period_resets_at: w.end,
    enforced: input.enforced ?? true,
    paused: input.paused ?? false,
    alerts: [],
    exemptions: [],
    holds: [],
    recent_records: [],
    created_at: now,
    updated_at: now,
  };
  if (input.workspace_id !== undefined) rec.workspace_id = input.workspace_id;
  if (input.agent_id !== undefined) rec.agent_id = input.agent_id;
  if (input.name !== undefined) rec.name = input.name;
  return rec;
}

function closedWindow(rec: BudgetRecord, kind: "rollover" | "reset", end: number): StoredLogEntry {
  const name = periodKey(rec.period, rec.period_start_at);
  return {
    budget_id: rec.id,
    log_key: kind === "reset" ? `${name}:reset-${end}` : name,
    kind,
    period: rec.period,
    period_start: rec.period_start_at,
    period_end: end,
    spent_micros: rec.spent_micros,
    records_count: rec.records_count,
  };
}

function startWindow(rec: BudgetRecord, start: number, end: number): void {
  rec.period_start_at = start;
  rec.period_resets_at = end;
  rec.spent_micros = 0;
  rec.records_count = 0;
  for (const a of rec.alerts) delete a.last_fired_period_start;
}

/**
 * The record as of `now` (a copy): a window that ended is closed into `last_closed` and the window
 * containing `now` starts at zero with no alert marked fired (windows in between had no spend and
 * are not logged); expired exemptions and holds are dropped. `changed` says whether anything did.
 */
export function rollTo(stored: BudgetRecord, now: number): { rec: BudgetRecord; changed: boolean } {
  const rec = structuredClone(stored);
  let changed = false;
  if (now >= rec.period_resets_at) {
    rec.last_closed = closedWindow(rec, "rollover", rec.period_resets_at);
    const w = windowAt(rec.period, now);
    startWindow(rec, w.start, w.end);
    changed = true;
  }
  const exemptions = rec.exemptions.filter((e) => e.expires_at > now);
  const holds = rec.holds.filter((h) => h.expires_at > now);
  if (exemptions.length !== rec.exemptions.length || holds.length !== rec.holds.length) changed = true;
  rec.exemptions = exemptions;
  rec.holds = holds;
  return { rec, changed };
}

/** Money held by in-flight calls, other than `exceptHold`'s own (a redelivered check replaces its hold). */
export const heldMicros = (rec: BudgetRecord, exceptHold?: string): number =>
  rec.holds.reduce((s, h) => (h.hold_id === exceptHold ? s : s + h.micros), 0);
export const remainingMicros = (rec: BudgetRecord, exceptHold?: string): number =>
  rec.ceiling_micros - rec.spent_micros - heldMicros(rec, exceptHold);

export type CheckOutcome =
  | { allowed: true; reason?: Extract<BudgetCheckReason, "paused" | "not_enforced" | "exempt"> }
  | { allowed: false; reason: Extract<BudgetCheckReason, "unpriced_model" | "ceiling_exceeded"> };

/**
 * `budget::check`'s decision, in this order: paused → allowed; not enforced → allowed;
 * principal exempt → allowed; then (our additions) an estimate that could not be priced → refused,
 * and nothing left (≤ 0) → refused even for a zero estimate; remaining < estimate → refused; else
 * allowed. `estimate` undefined = the model has no price. Remaining counts other calls' holds.
 */
export function decide(rec: BudgetRecord, now: number, estimate: number | undefined, principal?: string, holdId?: string): CheckOutcome {
  if (rec.paused) return { allowed: true, reason: "paused" };
  if (!rec.enforced) return { allowed: true, reason: "not_enforced" };
  if (principal !== undefined && rec.exemptions.some((e) => e.principal_id === principal && e.expires_at > now))
    return { allowed: true, reason: "exempt" };
  if (estimate === undefined) return { allowed: false, reason: "unpriced_model" };
  const remaining = remainingMicros(rec, holdId);
  if (remaining <= 0 || remaining < estimate) return { allowed: false, reason: "ceiling_exceeded" };
  return { allowed: true };
}

/** Reserve `micros` under `holdId` until BUDGET_HOLD_TTL_MS (replacing an earlier hold of that id). */
export function withHold(rec: BudgetRecord, holdId: string, micros: number, now: number): void {
  rec.holds = rec.holds.filter((h) => h.hold_id !== holdId);
  if (rec.holds.length >= MAX_HOLDS)
    throw new IIIError("too_many_holds", `budget ${rec.id} has ${MAX_HOLDS} calls in flight; wait for some to be recorded`);
  rec.holds.push({ hold_id: holdId, micros, expires_at: now + BUDGET_HOLD_TTL_MS });
}

/**
 * Add a call's cost (in place). A `recordId` seen recently adds nothing (`duplicate`); either way
 * its hold is settled. Every alert whose threshold the new spend reached and that has not fired in
 * this window is marked fired here — in the same write as the spend, so exactly one record fires it.
 */
export function withRecord(rec: BudgetRecord, cost: number, recordId: string | undefined): { duplicate: boolean; fired: StoredAlert[] } {
  if (recordId !== undefined) rec.holds = rec.holds.filter((h) => h.hold_id !== recordId);
  if (recordId !== undefined && rec.recent_records.includes(recordId)) return { duplicate: true, fired: [] };
  if (!Number.isSafeInteger(rec.spent_micros + cost))
    throw new IIIError("invalid_input", `budget ${rec.id}: adding ${cost} µUSD would exceed the largest exact amount`);
  rec.spent_micros += cost;
  rec.records_count += 1;
  if (recordId !== undefined) {
    rec.recent_records.push(recordId);
    if (rec.recent_records.length > RECENT_RECORDS_MAX) rec.recent_records.splice(0, rec.recent_records.length - RECENT_RECORDS_MAX);
  }
  const fired: StoredAlert[] = [];
  for (const a of rec.alerts) {
    if (a.last_fired_period_start === rec.period_start_at) continue;
    if (!productAtLeast(rec.spent_micros, PPM, a.threshold_ppm, rec.ceiling_micros)) continue;
    a.last_fired_period_start = rec.period_start_at;
    fired.push(structuredClone(a));
  }
  return { duplicate: false, fired };
}

/** `budget::reset`: close the current window as a reset entry and start a new one at `now`
 * (ending at the calendar boundary), spend zero, alert marks cleared. Holds stay (calls in flight). */
export function withReset(rec: BudgetRecord, now: number): void {
  rec.last_closed = closedWindow(rec, "reset", now);
  startWindow(rec, now, windowAt(rec.period, now).end);
}

export function withAlert(rec: BudgetRecord, alert: Omit<StoredAlert, "threshold_ppm" | "last_fired_period_start">): void {
  const others = rec.alerts.filter((a) => a.alert_id !== alert.alert_id);
  if (others.length >= BUDGET_MAX_ALERTS) throw new IIIError("too_many_alerts", `budget ${rec.id} already has ${BUDGET_MAX_ALERTS} alerts`);
  others.push({ ...alert, threshold_ppm: Math.round(alert.threshold_pct * PPM) });
  rec.alerts = others;
}

export function withExemption(rec: BudgetRecord, principal: string, reason: string, now: number): number {
  const expires_at = now + BUDGET_EXEMPTION_MS;
  const others = rec.exemptions.filter((e) => e.principal_id !== principal);
  if (others.length >= BUDGET_MAX_EXEMPTIONS)
    throw new IIIError("too_many_exemptions", `budget ${rec.id} already has ${BUDGET_MAX_EXEMPTIONS} exemptions`);
  others.push({ principal_id: principal, reason, expires_at });
  rec.exemptions = others;
  return expires_at;
}

export function toView(rec: BudgetRecord): BudgetView {
  const held = heldMicros(rec);
  const v: BudgetView = {
    budget_id: rec.id,
    period: rec.period,
    ceiling_micros: rec.ceiling_micros,
    spent_micros: rec.spent_micros,
    held_micros: held,
    remaining_micros: rec.ceiling_micros - rec.spent_micros - held,
    records_count: rec.records_count,
    ceiling_usd: usdFromMicros(rec.ceiling_micros),
    spent_usd: usdFromMicros(rec.spent_micros),
    remaining_usd: usdFromMicros(rec.ceiling_micros - rec.spent_micros - held),
    period_start_at: rec.period_start_at,
    period_resets_at: rec.period_resets_at,
    enforced: rec.enforced,
    paused: rec.paused,
    alerts: rec.alerts.map(({ threshold_ppm: _ppm, ...a }) => a),
    exemptions: rec.exemptions.map((e) => ({ ...e })),
    created_at: rec.created_at,
    updated_at: rec.updated_at,
  };
  if (rec.workspace_id !== undefined) v.workspace_id = rec.workspace_id;
  if (rec.agent_id !== undefined) v.agent_id = rec.agent_id;
  if (rec.name !== undefined) v.name = rec.name;
  return v;
}

export const logView = (e: StoredLogEntry): BudgetSpendLogEntry => ({ ...e, spent_usd: usdFromMicros(e.spent_micros) });

export type Forecast = BudgetForecast;

/** `budget::forecast`: a linear rate since the window started (at least FORECAST_MIN_ELAPSED_MS). */
export function forecastOf(rec: BudgetRecord, now: number): Forecast {
  const elapsed = Math.max(now - rec.period_start_at, FORECAST_MIN_ELAPSED_MS);
  const perMs = rec.spent_micros / elapsed;
  const projectedMonth = Math.round(perMs * FORECAST_MONTH_MS);
  const projectedPeriod = rec.spent_micros + Math.round(perMs * Math.max(0, rec.period_resets_at - now));
  let days: number | null;
  if (rec.spent_micros >= rec.ceiling_micros) days = 0;
  else if (perMs === 0) days = null;
  else {
    const ms = (rec.ceiling_micros - rec.spent_micros) / perMs;
    days = now + ms < rec.period_resets_at ? ms / DAY_MS : null;
  }
  return {
    budget_id: rec.id,
    spent_micros: rec.spent_micros,
    rate_micros_per_day: Math.round(perMs * DAY_MS),
    projected_month_micros: projectedMonth,
    projected_month_usd: usdFromMicros(projectedMonth),
    projected_period_micros: projectedPeriod,
    projected_period_usd: usdFromMicros(projectedPeriod),
    on_track: projectedPeriod <= rec.ceiling_micros,
    days_until_breach: days,
  };
}
