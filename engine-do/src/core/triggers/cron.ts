// The `cron` trigger type (protocol/README.md §8.2). Every schedule is a row of `cron_schedule`;
// all of them share the object's one alarm (core.addAlarmClient). Exactly once: an occurrence is
// claimed in SQLite (next_at advanced, last_scheduled and running_since recorded, in one
// transaction) before the function is called, so an eviction, restart or repeated alarm never fires
// it again. Runs of one job never overlap: an occurrence that comes due while `running_since` is
// set is skipped and counted. A run cut short by eviction is not retried (it was claimed).
import { Cron } from "croner";
import { TRIGGER_TYPES } from "@iii-edge/protocol";
import { defineBuiltin } from "../builtins/define.ts";
import type { TriggerRecord } from "../catalog.ts";
import type { AlarmClient, EngineApi } from "../api.ts";
import { freshTraceparent } from "../trace.ts";

/** Default deadline of one run; a run may choose its own with config `timeout_ms`. The job stays
 * "running" (later occurrences skipped) until the run answers or this passes. */
export const CRON_RUN_TIMEOUT_MS = 5 * 60_000;
/** Longest expression accepted (bounds parsing work and the stored row). */
const MAX_EXPRESSION_LENGTH = 256;
/** Most due jobs one alarm starts (the rest run on the next alarm, moments later). */
const MAX_FIRES_PER_ALARM = 500;

export interface CronConfig {
  expression: string;
  condition_function_id?: string;
  timeout_ms?: number;
}

/**
 * Parse an expression. 6 fields (`sec min hour dom month dow`) and 7 (with year) follow the Rust
 * `cron` crate as iii does: day-of-week numbers 1–7 are Sunday–Saturday and day-of-month and
 * day-of-week must both match. The classic 5-field form (`min hour dom month dow`, Sunday = 0,
 * Vixie OR rule) is accepted too, as an iii-edge extension. Times are UTC.
 */
export function parseCron(expression: string): Cron {
  const fields = expression.trim().split(/\s+/).length;
  if (fields === 5) return new Cron(expression.trim(), { paused: true, timezone: "UTC", mode: "5-part" });
  if (fields === 6 || fields === 7) {
    return new Cron(expression.trim(), { paused: true, timezone: "UTC", mode: "6-or-7-parts", alternativeWeekdays: true, domAndDow: true });
  }
  throw new Error(
    `expression '${expression}' has ${fields} fields; expected 6 (sec min hour day month weekday), 7 (… year) or 5 (min hour day month weekday)`,
  );
}

/** RFC 3339 in UTC with an explicit offset, as iii prints it. */
export function rfc3339(ms: number, withMillis: boolean): string {
  const iso = new Date(ms).toISOString(); // 2026-11-29T08:45:00.012Z
  return `${withMillis ? iso.slice(0, 23) : iso.slice(0, 19)}+00:00`;
}

interface ScheduleRow {
  trigger_id: string;
  expression: string;
  next_at: number | null;
  running_since: number | null;
  last_scheduled: number | null;
  skipped: number;
  runs: number;
}

export class CronScheduler implements AlarmClient {
  private readonly core: EngineApi;
  private readonly parsed = new Map<string, Cron>();

  constructor(core: EngineApi) {
    this.core = core;
    const { sql } = core.ports;
    // A run of a previous instance died with it; its occurrence stays claimed (never fired twice).
    sql.exec("UPDATE cron_schedule SET running_since = NULL WHERE running_since IS NOT NULL");
  }

  install(): void {
    this.core.addTriggerType({
      id: TRIGGER_TYPES.cron,
      description: "Calls the function on a schedule: cron expression with 6 fields (sec min hour day month weekday), 7 (+ year) or 5; UTC",
      validate: (config) => {
        if (!config || typeof config !== "object" || Array.isArray(config))
          return "config must be {expression, condition_function_id?, timeout_ms?}";
        const c = config as Record<string, unknown>;
        if (typeof c.expression !== "string" || !c.expression.trim()) return "expression is required";
        if (c.expression.length > MAX_EXPRESSION_LENGTH) return `expression longer than ${MAX_EXPRESSION_LENGTH} characters`;
        if (c.condition_function_id !== undefined && typeof c.condition_function_id !== "string")
          return "condition_function_id must be a string";
        if (
          c.timeout_ms !== undefined &&
          (typeof c.timeout_ms !== "number" || !Number.isInteger(c.timeout_ms) || c.timeout_ms < 1 || c.timeout_ms > 15 * 60_000)
        )
          return "timeout_ms must be an integer between 1 and 900000";
        try {
          parseCron(c.expression);
        } catch (e) {
          return `invalid expression: ${e instanceof Error ? e.message : String(e)}`;
        }
        return undefined;
      },
      added: (b) => this.schedule(b),
      removed: (b) => {
        this.parsed.delete(b.id);
        // A job mid-run keeps its row so a quick re-registration (worker reconnect) cannot start an
        // overlapping run; the row goes at its next due time if the binding does not come back.
        this.core.ports.sql.exec("DELETE FROM cron_schedule WHERE trigger_id = ? AND running_since IS NULL", b.id);
      },
    });
    this.core.addAlarmClient(this);
  }

  private cron(id: string, expression: string): Cron | undefined {
    let c = this.parsed.get(id);
    if (c && c.getPattern() === expression.trim()) return c;
    try {
      c = parseCron(expression);
    } catch {
      return undefined;
    }
    this.parsed.set(id, c);
    return c;
  }

  private nextAfter(id: string, expression: string, after: number): number | null {
    // croner's nextRun is strictly after the given instant.
    return this.cron(id, expression)?.nextRun(new Date(after))?.getTime() ?? null;
  }

  /** A binding was stored (or restored on wake): keep its claimed schedule, or start one. */
  private schedule(b: TriggerRecord): void {
    const expression = (b.config as CronConfig).expression.trim();
    const { sql, clock } = this.core.ports;
    const row = sql.exec<ScheduleRow>("SELECT * FROM cron_schedule WHERE trigger_id = ?", b.id)[0];
    if (row && row.expression === expression) return; // restored on wake: nothing to change
    const next = this.nextAfter(b.id, expression, clock.now());
    sql.exec(
      "INSERT INTO cron_schedule (trigger_id, expression, next_at) VALUES (?, ?, ?) ON CONFLICT (trigger_id) DO UPDATE SET expression = excluded.expression, next_at = excluded.next_at",
      b.id,
      expression,
      next,
    );
    this.core.rearmAlarm();
  }

  nextDue(): number | null {
    return this.core.ports.sql.exec<{ t: number | null }>("SELECT MIN(next_at) AS t FROM cron_schedule")[0]?.t ?? null;
  }

  async run(now: number): Promise<void> {
    const { sql } = this.core.ports;
    const due = sql.exec<ScheduleRow>(
      "SELECT * FROM cron_schedule WHERE next_at IS NOT NULL AND next_at <= ? ORDER BY next_at LIMIT ?",
      now,
      MAX_FIRES_PER_ALARM,
    );
    for (const row of due) this.claimAndFire(row.trigger_id, now);
  }

  /** Claim the due occurrence of one job in a transaction, then run it in the background. */
  private claimAndFire(triggerId: string, now: number): void {
    const { sql, log } = this.core.ports;
    const binding = this.core.catalog.triggers.get(triggerId);
    const claim = sql.transaction(() => {
      const row = sql.exec<ScheduleRow>("SELECT * FROM cron_schedule WHERE trigger_id = ?", triggerId)[0];
      if (!row || row.next_at === null || row.next_at > now) return null; // claimed meanwhile
      const scheduled = row.next_at;
      const next = this.nextAfter(triggerId, row.expression, now);
      // Occurrences that passed while the object was away are collapsed into this one.
      let missed = 0;
      for (
        let t = this.nextAfter(triggerId, row.expression, scheduled);
        t !== null && t <= now && missed < 1000;
        t = this.nextAfter(triggerId, row.expression, t)
      )
        missed++;
      if (!binding) {
        sql.exec("DELETE FROM cron_schedule WHERE trigger_id = ?", triggerId);
        return null;
      }
      if (binding.status !== "active") {
        sql.exec("UPDATE cron_schedule SET next_at = ? WHERE trigger_id = ?", next, triggerId);
        return null;
      }
      if (row.running_since !== null) {
        sql.exec("UPDATE cron_schedule SET next_at = ?, skipped = skipped + ? WHERE trigger_id = ?", next, 1 + missed, triggerId);
        log.warn("cron occurrence skipped: previous run still in progress", {
          job_id: triggerId,
          scheduled_time: rfc3339(scheduled, false),
          running_since: rfc3339(row.running_since, true),
        });
        return null;
      }
      sql.exec(
        "UPDATE cron_schedule SET next_at = ?, running_since = ?, last_scheduled = ?, runs = runs + 1, skipped = skipped + ? WHERE trigger_id = ?",
        next,
        now,
        scheduled,
        missed,
        triggerId,
      );
      if (missed > 0) log.warn("cron occurrences missed while the engine was away", { job_id: triggerId, missed });
      return { scheduled, runningSince: now };
    });
    if (!claim || !binding) return;
    const payload = {
      trigger: "cron",
      job_id: triggerId,
      scheduled_time: rfc3339(claim.scheduled, false),
      actual_time: rfc3339(now, true),
    };
    const timeoutMs = (binding.config as CronConfig).timeout_ms ?? CRON_RUN_TIMEOUT_MS;
    // Nothing caused an occurrence but the clock: each run starts a trace of its own (§4.8) — with
    // tracing on, the fire's span is its root (telemetry/hops.ts); off, a fresh traceparent.
    const run = this.core
      .fire(
        binding,
        payload,
        this.core.telemetry.tracing ? { timeoutMs } : { timeoutMs, traceparent: freshTraceparent(this.core.ports.newId) },
      )
      .then((out) => {
        if (out !== "skipped" && !out.ok) log.warn("cron run failed", { job_id: triggerId, ...out.error });
      })
      .finally(() => {
        sql.exec("UPDATE cron_schedule SET running_since = NULL WHERE trigger_id = ? AND running_since = ?", triggerId, claim.runningSince);
      });
    this.core.ports.background(run);
  }

  /** Introspection for tests and `engine::cron::jobs`. */
  jobs(): ScheduleRow[] {
    return this.core.ports.sql.exec<ScheduleRow>("SELECT * FROM cron_schedule ORDER BY trigger_id");
  }
}

export function installCron(core: EngineApi): CronScheduler {
  const s = new CronScheduler(core);
  s.install();
  defineBuiltin(core, "engine::cron::jobs", {
    description: "Cron schedules: next occurrence, last claimed occurrence, runs and skipped occurrences",
    internal: true,
    handler: () => ({
      jobs: s.jobs().map((j) => ({
        job_id: j.trigger_id,
        expression: j.expression,
        next_time: j.next_at === null ? null : rfc3339(j.next_at, false),
        last_scheduled_time: j.last_scheduled === null ? null : rfc3339(j.last_scheduled, false),
        running: j.running_since !== null,
        runs: j.runs,
        skipped: j.skipped,
      })),
    }),
  });
  return s;
}
