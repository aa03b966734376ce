// The budget ledger's logic at its own layer (pure functions, an explicit clock): UTC windows,
// rollover, the check's order, holds, alerts once per window, idempotent records, µUSD rounding and
// the forecast (docs/harness-contracts.md §6.2).
import {
  BUDGET_EXEMPTION_MS,
  BUDGET_HOLD_TTL_MS,
  budgetCheckRequest,
  budgetCreateRequest,
  budgetRecordRequest,
  budgetUpdateRequest,
  type BudgetPeriod,
} from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";
import { createBudget, decide, forecastOf, RECENT_RECORDS_MAX, rollTo, toView, type BudgetRecord } from "../src/ledger.ts";
import { withAlert, withExemption, withHold, withRecord, withReset } from "../src/ledger.ts";
import { costMicros, microsFromUsd, pricesFromCatalog, pricesFromUsd } from "../src/money.ts";
import { DAY_MS, periodKey, windowAt } from "../src/periods.ts";

const utc = (y: number, m: number, d: number, h = 0, min = 0) => Date.UTC(y, m - 1, d, h, min);
const budget = (period: BudgetPeriod, ceiling: number, now: number, extra: Partial<BudgetRecord> = {}): BudgetRecord => ({
  ...createBudget("b1", { ceiling_micros: ceiling, period }, now),
  ...extra,
});

describe("windows: UTC days, Monday weeks, calendar months", () => {
  it("a day is 00:00–24:00 UTC whatever the hour", () => {
    expect(windowAt("day", utc(2026, 11, 30, 23, 59))).toEqual({ start: utc(2026, 11, 30), end: utc(2026, 12, 1) });
    expect(windowAt("day", utc(2026, 11, 30))).toEqual({ start: utc(2026, 11, 30), end: utc(2026, 12, 1) });
  });

  it("a week starts Monday 00:00 UTC: Sunday belongs to the week before, Monday starts the next", () => {
    // 2026-11-30 is a Monday; 2026-11-29 a Sunday.
    expect(new Date(utc(2026, 11, 30)).getUTCDay()).toBe(1);
    expect(windowAt("week", utc(2026, 11, 29, 23, 59))).toEqual({ start: utc(2026, 11, 23), end: utc(2026, 11, 30) });
    expect(windowAt("week", utc(2026, 11, 30))).toEqual({ start: utc(2026, 11, 30), end: utc(2026, 12, 7) });
    expect(windowAt("week", utc(2026, 12, 3, 12))).toEqual({ start: utc(2026, 11, 30), end: utc(2026, 12, 7) });
  });

  it("a month runs to the first of the next, across years and leap days", () => {
    expect(windowAt("month", utc(2026, 12, 31, 23))).toEqual({ start: utc(2026, 12, 1), end: utc(2027, 1, 1) });
    expect(windowAt("month", utc(2028, 2, 29, 12))).toEqual({ start: utc(2028, 2, 1), end: utc(2028, 3, 1) });
  });

  it("period keys are stable inside a window, distinct across windows, and sort in time order", () => {
    for (const period of ["day", "week", "month"] as const) {
      const w = windowAt(period, utc(2026, 11, 18, 9));
      expect(periodKey(period, w.start)).toBe(periodKey(period, w.end - 1));
      expect(periodKey(period, w.end)).not.toBe(periodKey(period, w.start));
      expect(periodKey(period, w.start) < periodKey(period, w.end)).toBe(true);
    }
    expect(periodKey("day", utc(2026, 11, 18, 9))).toBe("day:2026-11-18");
    expect(periodKey("week", utc(2026, 11, 18, 9))).toBe("week:2026-11-16");
    expect(periodKey("month", utc(2026, 11, 18, 9))).toBe("month:2026-11");
  });
});

describe("rollover", () => {
  it("archives the ended window into last_closed, zeroes the spend, starts the window of now and clears alert marks", () => {
    const t0 = utc(2026, 11, 30, 10);
    const rec = budget("day", 1_000_000, t0);
    withAlert(rec, { alert_id: "half", threshold_pct: 0.5, callback_function_id: "ops::notify" });
    withRecord(rec, 600_000, "r1");
    expect(rec.alerts[0]!.last_fired_period_start).toBe(utc(2026, 11, 30));

    const { rec: next, changed } = rollTo(rec, utc(2026, 12, 1, 0, 1));
    expect(changed).toBe(true);
    expect(next.last_closed).toEqual({
      budget_id: "b1",
      log_key: "day:2026-11-30",
      kind: "rollover",
      period: "day",
      period_start: utc(2026, 11, 30),
      period_end: utc(2026, 12, 1),
      spent_micros: 600_000,
      records_count: 1,
    });
    expect(next).toMatchObject({
      spent_micros: 0,
      records_count: 0,
      period_start_at: utc(2026, 12, 1),
      period_resets_at: utc(2026, 12, 2),
    });
    expect(next.alerts[0]!.last_fired_period_start).toBeUndefined();
    // The stored record is not touched (a copy).
    expect(rec.spent_micros).toBe(600_000);
  });

  it("jumps over idle windows to the one containing now (only the window with the spend is archived)", () => {
    const rec = budget("week", 1_000, utc(2026, 11, 30, 10));
    withRecord(rec, 10, "r1");
    const { rec: next } = rollTo(rec, utc(2027, 1, 20));
    expect(next.last_closed).toMatchObject({ log_key: "week:2026-11-30", spent_micros: 10 });
    expect(next).toMatchObject({ period_start_at: utc(2027, 1, 18), period_resets_at: utc(2027, 1, 25), spent_micros: 0 });
  });

  it("inside the window nothing changes; expired exemptions and holds are dropped", () => {
    const t0 = utc(2026, 11, 30, 10);
    const rec = budget("month", 1_000, t0);
    expect(rollTo(rec, t0 + 1000).changed).toBe(false);
    withExemption(rec, "sess-1", "demo", t0);
    withHold(rec, "run:1", 100, t0);
    const later = rollTo(rec, t0 + Math.max(BUDGET_EXEMPTION_MS, BUDGET_HOLD_TTL_MS));
    expect(later.changed).toBe(true);
    expect(later.rec.exemptions).toEqual([]);
    expect(later.rec.holds).toEqual([]);
  });
});

describe("check: paused, not enforced, exempt, then the ceiling", () => {
  const t0 = utc(2026, 11, 30, 10);
  const exhausted = () => budget("day", 1_000, t0, { spent_micros: 1_000 });

  it("answers paused, not enforced, exempt, then the ceiling, in that order", () => {
    expect(decide(exhausted(), t0, 50)).toEqual({ allowed: false, reason: "ceiling_exceeded" });
    // Paused wins over everything, not-enforced over exemptions.
    expect(decide({ ...exhausted(), paused: true, enforced: false }, t0, 50)).toEqual({ allowed: true, reason: "paused" });
    const exempt = exhausted();
    withExemption(exempt, "sess-1", "incident", t0);
    expect(decide({ ...exempt, enforced: false }, t0, 50, "sess-1")).toEqual({ allowed: true, reason: "not_enforced" });
    expect(decide(exempt, t0, 50, "sess-1")).toEqual({ allowed: true, reason: "exempt" });
    // Exemptions are per principal and last 24 h.
    expect(decide(exempt, t0, 50, "sess-2")).toEqual({ allowed: false, reason: "ceiling_exceeded" });
    expect(decide(exempt, t0 + BUDGET_EXEMPTION_MS, 50, "sess-1")).toEqual({ allowed: false, reason: "ceiling_exceeded" });
  });

  it("the ceiling: an exact fit passes, a cent more does not; nothing left refuses even a zero estimate; no price refuses", () => {
    const rec = budget("day", 1_000, t0, { spent_micros: 400 });
    expect(decide(rec, t0, 600)).toEqual({ allowed: true });
    expect(decide(rec, t0, 601)).toEqual({ allowed: false, reason: "ceiling_exceeded" });
    expect(decide(rec, t0, 0)).toEqual({ allowed: true });
    expect(decide(exhausted(), t0, 0)).toEqual({ allowed: false, reason: "ceiling_exceeded" });
    expect(decide(rec, t0, undefined)).toEqual({ allowed: false, reason: "unpriced_model" });
    expect(decide({ ...rec, paused: true }, t0, undefined)).toEqual({ allowed: true, reason: "paused" });
  });

  it("calls in flight hold their estimate; a check repeating its own hold id does not count itself", () => {
    const rec = budget("day", 1_000, t0);
    withHold(rec, "run-a:1", 600, t0);
    expect(decide(rec, t0, 600)).toEqual({ allowed: false, reason: "ceiling_exceeded" });
    expect(decide(rec, t0, 400)).toEqual({ allowed: true });
    expect(decide(rec, t0, 600, undefined, "run-a:1")).toEqual({ allowed: true });
    // Its record settles the hold (replacing the estimate with the real cost).
    withRecord(rec, 550, "run-a:1");
    expect(rec.holds).toEqual([]);
    expect(decide(rec, t0, 450)).toEqual({ allowed: true });
    expect(decide(rec, t0, 451)).toEqual({ allowed: false, reason: "ceiling_exceeded" });
  });
});

describe("records", () => {
  const t0 = utc(2026, 11, 30, 10);

  it("a record id counts once (a redelivered round adds nothing); the remembered ids are bounded", () => {
    const rec = budget("day", 1_000_000, t0);
    expect(withRecord(rec, 300, "run:1")).toEqual({ duplicate: false, fired: [] });
    expect(withRecord(rec, 300, "run:1")).toEqual({ duplicate: true, fired: [] });
    expect(rec).toMatchObject({ spent_micros: 300, records_count: 1 });
    withRecord(rec, 1, undefined);
    expect(rec).toMatchObject({ spent_micros: 301, records_count: 2 });
    for (let i = 0; i < RECENT_RECORDS_MAX + 5; i++) withRecord(rec, 0, `x:${i}`);
    expect(rec.recent_records).toHaveLength(RECENT_RECORDS_MAX);
    expect(rec.recent_records.at(-1)).toBe(`x:${RECENT_RECORDS_MAX + 4}`);
  });

  it("alerts fire once per window at their threshold, exactly (no float drift), several at once if crossed together", () => {
    const rec = budget("day", 1_000_000, t0);
    withAlert(rec, { alert_id: "a80", threshold_pct: 0.8, callback_function_id: "ops::notify", callback_payload: { channel: "#spend" } });
    withAlert(rec, { alert_id: "a50", threshold_pct: 0.5, callback_function_id: "ops::notify" });
    expect(withRecord(rec, 499_999, "r1").fired).toEqual([]);
    expect(withRecord(rec, 1, "r2").fired.map((a) => a.alert_id)).toEqual(["a50"]);
    expect(withRecord(rec, 299_999, "r3").fired).toEqual([]);
    expect(withRecord(rec, 1, "r4").fired.map((a) => a.alert_id)).toEqual(["a80"]);
    expect(withRecord(rec, 500_000, "r5").fired).toEqual([]);
    // The next window fires them again — both in one record that crosses both.
    const { rec: next } = rollTo(rec, utc(2026, 12, 1, 1));
    expect(
      withRecord(next, 900_000, "r6")
        .fired.map((a) => a.alert_id)
        .sort(),
    ).toEqual(["a50", "a80"]);
    expect(withRecord(next, 1, "r7").fired).toEqual([]);
  });

  it("a reset archives the window as a reset entry, zeroes it from now on, clears the alert marks and keeps holds", () => {
    const t0 = utc(2026, 11, 10, 10);
    const rec = budget("month", 1_000, t0);
    withAlert(rec, { alert_id: "a", threshold_pct: 0.1, callback_function_id: "f" });
    withRecord(rec, 500, "r1");
    withHold(rec, "r2", 100, t0);
    const at = t0 + 5 * DAY_MS;
    withReset(rec, at);
    expect(rec.last_closed).toMatchObject({
      log_key: `month:2026-11:reset-${at}`,
      kind: "reset",
      period_start: utc(2026, 11, 1),
      period_end: at,
      spent_micros: 500,
    });
    expect(rec).toMatchObject({ spent_micros: 0, period_start_at: at, period_resets_at: utc(2026, 12, 1) });
    expect(rec.alerts[0]!.last_fired_period_start).toBeUndefined();
    expect(rec.holds).toHaveLength(1);
    expect(withRecord(rec, 100, "r3").fired.map((a) => a.alert_id)).toEqual(["a"]);
  });

  it("a view shows dollars derived from the integers and never the internals", () => {
    const rec = budget("day", 2_500_000, t0);
    withRecord(rec, 1_250_000, "r1");
    withHold(rec, "r2", 250_000, t0);
    const v = toView(rec);
    expect(v).toMatchObject({
      budget_id: "b1",
      ceiling_micros: 2_500_000,
      spent_micros: 1_250_000,
      held_micros: 250_000,
      remaining_micros: 1_000_000,
      ceiling_usd: 2.5,
      spent_usd: 1.25,
      remaining_usd: 1,
    });
    expect(v).not.toHaveProperty("holds");
    expect(v).not.toHaveProperty("recent_records");
  });
});

describe("micro-units", () => {
  it("dollars a caller typed become the µUSD they meant; costs in dollars round up", () => {
    expect(0.0079 * 1e6).not.toBe(7900); // 7900.000000000001: why microsFromUsd exists
    expect(microsFromUsd(0.0079, "up")).toBe(7900);
    expect(microsFromUsd(0.0157, "nearest")).toBe(15_700);
    expect(microsFromUsd(0.0015, "up")).toBe(1500);
    expect(microsFromUsd(0.3, "nearest")).toBe(300_000);
    expect(microsFromUsd(0.0000001, "up")).toBe(1);
    expect(microsFromUsd(0.0000001, "nearest")).toBe(0);
    expect(microsFromUsd(12.3456789, "up")).toBe(12_345_679);
  });

  it("a call's cost is Σ tokens × price exactly, rounded up once per call", () => {
    const sonnet = pricesFromUsd(3, 15, 0.3, 3.75);
    // 1234 × 3 + 567 × 15 + 1000 × 0.3 + 100 × 3.75 µUSD = 3702 + 8505 + 300 + 375 exactly.
    expect(costMicros({ input: 1234, output: 567, cache_read: 1000, cache_write: 100 }, sonnet)).toBe(12_882);
    // gpt-4o-mini: one input token is 0.15 µUSD → charged 1.
    const mini = pricesFromCatalog({ pricing: { input_per_1m: 0.15, output_per_1m: 0.6, cache_read_per_1m: 0.075 } })!;
    expect(mini).toEqual({
      input_micros_per_1m: 150_000,
      output_micros_per_1m: 600_000,
      cache_read_micros_per_1m: 75_000,
      cache_write_micros_per_1m: 150_000,
    });
    expect(costMicros({ input: 1 }, mini)).toBe(1);
    expect(costMicros({ input: 20, output: 5 }, mini)).toBe(6); // 3 + 3
    expect(costMicros({ input: 21 }, mini)).toBe(4); // 3.15 → 4
    expect(costMicros({}, mini)).toBe(0);
    // Large counts stay exact (BigInt): 1e9 tokens at 10 000 USD/1M.
    expect(costMicros({ output: 1_000_000_000 }, pricesFromUsd(0, 10_000))).toBe(10_000_000_000_000);
  });

  it("a thousand records sum to exactly the integers recorded (no float accumulation)", () => {
    const rec = budget("month", 1_000_000_000, utc(2026, 11, 30));
    let expected = 0;
    for (let i = 0; i < 1000; i++) {
      const c = microsFromUsd(0.000123 * (i % 7), "up");
      expected += c;
      withRecord(rec, c, `r${i}`);
    }
    expect(rec.spent_micros).toBe(expected);
    expect(expected).toBe(123 * (142 * 21 + 15)); // 142 cycles of 0..6 (21 each), then 0..5
  });
});

describe("forecast (linear since the window started, month = 30 days)", () => {
  it("projects the month and the window, says when the ceiling is reached", () => {
    const start = utc(2026, 11, 1);
    const rec = budget("month", 30_000_000, start);
    withRecord(rec, 10_000_000, "r1");
    const f = forecastOf(rec, start + 10 * DAY_MS);
    expect(f.rate_micros_per_day).toBe(1_000_000);
    expect(f.projected_month_micros).toBe(30_000_000);
    expect(f.projected_period_micros).toBe(30_000_000); // November has 30 days
    expect(f.on_track).toBe(true);
    expect(f.days_until_breach).toBeNull(); // reached exactly at the reset: not within the window
    withRecord(rec, 5_000_000, "r2");
    const g = forecastOf(rec, start + 10 * DAY_MS);
    expect(g.on_track).toBe(false);
    expect(g.days_until_breach).toBeCloseTo(10, 6);
    expect(forecastOf({ ...rec, spent_micros: 30_000_000 }, start + DAY_MS).days_until_breach).toBe(0);
    expect(forecastOf(budget("day", 1, start), start).days_until_breach).toBeNull();
  });
});

describe("request contracts", () => {
  it("bad input is refused with what is wrong", () => {
    expect(budgetCreateRequest.safeParse({ period: "day" }).success).toBe(false);
    expect(budgetCreateRequest.safeParse({ period: "year", ceiling_usd: 1 }).success).toBe(false);
    expect(budgetCreateRequest.safeParse({ period: "day", ceiling_usd: 1, ceiling_micros: 5 }).success).toBe(false);
    expect(budgetCreateRequest.safeParse({ period: "day", ceiling_micros: 1.5 }).success).toBe(false);
    expect(budgetCreateRequest.safeParse({ period: "day", ceiling_usd: 0 }).success).toBe(false);
    expect(budgetCreateRequest.safeParse({ period: "week", ceiling_usd: 5, budget_id: "team/a" }).success).toBe(false);
    expect(budgetUpdateRequest.safeParse({ budget_id: "b1", spent_micros: 0 }).success).toBe(false); // not on the whitelist
    expect(budgetUpdateRequest.safeParse({ budget_id: "b1", period: "day" }).success).toBe(false);
    expect(budgetCheckRequest.safeParse({ budget_id: "b1", estimated_cost_micros: -1 }).success).toBe(false);
    expect(budgetRecordRequest.safeParse({ budget_id: "b1" }).success).toBe(false);
    expect(budgetRecordRequest.safeParse({ budget_id: "b1", usage: { input: 5 } }).success).toBe(false); // no model to price it
    expect(budgetRecordRequest.safeParse({ budget_id: "b1", cost_micros: 5, cost_usd: 1 }).success).toBe(false);
    expect(budgetRecordRequest.safeParse({ budget_id: "b1", cost_micros: 5 }).success).toBe(true);
  });
});
