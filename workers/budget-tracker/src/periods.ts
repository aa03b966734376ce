// Budget windows (docs/harness-contracts.md §6.2): UTC-anchored days, weeks starting Monday 00:00 UTC, and
// calendar months. Pure functions of a time in ms since the epoch.
import type { BudgetPeriod } from "@iii-edge/protocol/harness";

export const DAY_MS = 86_400_000;
/** `Date#getUTCDay()` of a Monday. */
const MONDAY = 1;

export interface Window {
  start: number;
  end: number;
}

/** The calendar window of `period` that contains `t`: [start, end). */
export function windowAt(period: BudgetPeriod, t: number): Window {
  const d = new Date(t);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  const dayStart = Date.UTC(y, m, d.getUTCDate());
  switch (period) {
    case "day":
      return { start: dayStart, end: dayStart + DAY_MS };
    case "week": {
      const sinceMonday = (d.getUTCDay() - MONDAY + 7) % 7;
      const start = dayStart - sinceMonday * DAY_MS;
      return { start, end: start + 7 * DAY_MS };
    }
    case "month":
      // Date.UTC normalises month 12 to January of the next year.
      return { start: Date.UTC(y, m, 1), end: Date.UTC(y, m + 1, 1) };
  }
}

const pad = (n: number, width = 2) => String(n).padStart(width, "0");

/** A stable, sortable name of the calendar window containing `t`: `day:2026-11-30`,
 * `week:2026-11-30` (its Monday), `month:2026-11`. Windows re-anchored by a reset keep the name of
 * the calendar window they fall in. */
export function periodKey(period: BudgetPeriod, t: number): string {
  const d = new Date(windowAt(period, t).start);
  const ym = `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}`;
  return period === "month" ? `month:${ym}` : `${period}:${ym}-${pad(d.getUTCDate())}`;
}
