// budget::* through the engine core served in-process (tests/support/node-engine.ts), the worker run
// in Node (what `npm run worker -- budget-tracker` runs) with an injected clock, so windows roll
// over when the test says. The real providers worker, run beside it, answers `models::get`. A caller
// triggers the functions as the orchestrator and an operator would.
import type { BudgetCheckResponse, BudgetRecordResponse, BudgetSpendLogEntry, BudgetView } from "@iii-edge/protocol/harness";
import type { WorkerModule } from "@iii-edge/sdk-edge/worker";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import { until } from "@iii-edge/test-support/wait";
import { DAY_MS } from "../src/periods.ts";
import { worker } from "../src/node.ts";
import { worker as providers } from "@iii-edge/worker-providers";

let engine: NodeEngine;
let budgets: RunningWorkers;
/** The real providers worker: `models::get`, the catalog budgets price by. */
let models: RunningWorkers;
let caller: RunningWorkers;
/** The worker's clock. */
let now = Date.UTC(2026, 10, 30, 12); // Monday 30 November 2026, noon UTC
const alerts: Record<string, unknown>[] = [];

const call = <T>(function_id: string, payload: unknown) => caller.client.trigger<unknown, T>({ function_id, payload });
const refused = async (p: Promise<unknown>): Promise<{ code?: string; message: string }> => {
  try {
    await p;
  } catch (e) {
    return e as { code?: string; message: string };
  }
  throw new Error("expected the call to be refused");
};
let seq = 0;
const create = (extra: Record<string, unknown>) =>
  call<{ budget_id: string; budget: BudgetView }>("budget::create", { budget_id: `t${++seq}-${Date.now()}`, period: "day", ...extra });

beforeAll(async () => {
  engine = await startNodeEngine();
  budgets = runWorkers(engine.wsUrl, [worker as WorkerModule<never>], { config: { "budget-tracker": { now: () => now } } });
  models = runWorkers(engine.wsUrl, [providers as WorkerModule<never>], { workerName: "providers" });
  caller = runWorkers(engine.wsUrl, [], { workerName: "budget-test-caller" });
  caller.surface.registerFunction("test::budget_alert", async ({ _caller_worker_id: _, ...data }: Record<string, unknown>) => {
    alerts.push(data);
    return { ok: true };
  });
  await until(
    async () => {
      const r = await call<{ functions: { function_id: string }[] }>("engine::functions::list", {});
      const ids = r.functions.map((f) => f.function_id);
      return ["budget::record", "budget::get_prices", "models::get", "test::budget_alert"].every((id) => ids.includes(id));
    },
    "budget-tracker, the providers and the alert callback registered",
    30_000,
  );
});

afterAll(async () => {
  await caller?.shutdown();
  await budgets?.shutdown();
  await models?.shutdown();
  await engine?.stop();
});

describe("budgets through the engine", () => {
  it("create, get, update (a whitelist), list by tag, delete; bad input changes nothing", async () => {
    const { budget_id, budget } = await create({ ceiling_usd: 2.5, workspace_id: "ws-crud", name: "team" });
    expect(budget).toMatchObject({
      budget_id,
      ceiling_micros: 2_500_000,
      ceiling_usd: 2.5,
      spent_micros: 0,
      period: "day",
      enforced: true,
      paused: false,
      workspace_id: "ws-crud",
    });
    expect(budget.period_start_at).toBe(Date.UTC(2026, 10, 30));
    expect(await refused(create({ budget_id, ceiling_usd: 1 }))).toMatchObject({ code: "already_exists" });
    expect(await refused(call("budget::update", { budget_id, spent_micros: 0 }))).toMatchObject({ code: "invalid_input" });
    expect(await refused(call("budget::create", { period: "fortnight", ceiling_usd: 1 }))).toMatchObject({ code: "invalid_input" });
    expect(await call<BudgetView>("budget::get", { budget_id })).toMatchObject({ ceiling_micros: 2_500_000, name: "team" });

    const updated = await call<BudgetView>("budget::update", { budget_id, ceiling_micros: 3_000_000, name: null, agent_id: "agent-7" });
    expect(updated).toMatchObject({ ceiling_micros: 3_000_000, agent_id: "agent-7" });
    expect(updated).not.toHaveProperty("name");

    const other = await create({ ceiling_usd: 1, workspace_id: "ws-other" });
    const listed = await call<{ budgets: BudgetView[]; next_offset: number | null }>("budget::list", { workspace_id: "ws-crud" });
    expect(listed.budgets.map((b) => b.budget_id)).toEqual([budget_id]);
    expect((await call<{ budgets: BudgetView[] }>("budget::list", { agent_id: "agent-7" })).budgets.map((b) => b.budget_id)).toEqual([
      budget_id,
    ]);

    expect(await call("budget::delete", { budget_id })).toEqual({ budget_id, deleted: true });
    expect(await refused(call("budget::get", { budget_id }))).toMatchObject({ code: "not_found" });
    expect(await refused(call("budget::record", { budget_id, cost_micros: 1 }))).toMatchObject({ code: "not_found" });
    expect((await call<BudgetView>("budget::get", { budget_id: other.budget_id })).budget_id).toBe(other.budget_id);
  });

  it("50 parallel records on one budget sum exactly, and 50 repeats of their ids add nothing", async () => {
    const { budget_id } = await create({ ceiling_usd: 1_000, period: "month" });
    const costs = Array.from({ length: 50 }, (_, i) => 1_000 + i * 37);
    const t0 = performance.now();
    const results = await Promise.all(
      costs.map((cost_micros, i) => call<BudgetRecordResponse>("budget::record", { budget_id, cost_micros, record_id: `race:${i}` })),
    );
    const ms = performance.now() - t0;
    expect(results.every((r) => r.recorded)).toBe(true);
    const total = costs.reduce((a, b) => a + b, 0);
    // Some writer saw the final sum; none saw more.
    expect(Math.max(...results.map((r) => r.spent_micros))).toBe(total);
    const repeats = await Promise.all(
      costs.map((cost_micros, i) => call<BudgetRecordResponse>("budget::record", { budget_id, cost_micros, record_id: `race:${i}` })),
    );
    expect(repeats.every((r) => !r.recorded && r.cost_micros === 0)).toBe(true);
    expect(await call<BudgetView>("budget::get", { budget_id })).toMatchObject({ spent_micros: total, records_count: 50 });
    console.log(`50 concurrent budget::record on one budget: ${ms.toFixed(0)} ms`);
  });

  it("20 parallel checks holding 100 µUSD each on 1 000 left: exactly 10 pass; records settle the holds", async () => {
    const { budget_id } = await create({ ceiling_micros: 1_000 });
    const checks = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        call<BudgetCheckResponse>("budget::check", { budget_id, estimated_cost_micros: 100, hold_id: `h:${i}` }),
      ),
    );
    const passed = checks.map((c, i) => (c.allowed ? i : -1)).filter((i) => i >= 0);
    expect(passed).toHaveLength(10);
    expect(checks.filter((c) => !c.allowed).every((c) => c.reason === "ceiling_exceeded")).toBe(true);
    expect(await call<BudgetView>("budget::get", { budget_id })).toMatchObject({
      spent_micros: 0,
      held_micros: 1_000,
      remaining_micros: 0,
    });
    // Each call cost 60: settling the holds frees the rest.
    await Promise.all(passed.map((i) => call("budget::record", { budget_id, cost_micros: 60, record_id: `h:${i}` })));
    expect(await call<BudgetView>("budget::get", { budget_id })).toMatchObject({
      spent_micros: 600,
      held_micros: 0,
      remaining_micros: 400,
    });
    expect(await call<BudgetCheckResponse>("budget::check", { budget_id, estimated_cost_micros: 400 })).toMatchObject({
      allowed: true,
      held: false,
    });
    expect(await call<BudgetCheckResponse>("budget::check", { budget_id, estimated_cost_micros: 401 })).toMatchObject({
      allowed: false,
      reason: "ceiling_exceeded",
      remaining_micros: 400,
    });
  });

  it("windows roll over with the clock: reads show the new window at once, the closed one is archived to the spend log", async () => {
    now = Date.UTC(2026, 11, 2, 9); // Wednesday 2 December
    const { budget_id } = await create({ ceiling_micros: 10_000, period: "day" });
    await call("budget::record", { budget_id, cost_micros: 700, record_id: "d2:1" });
    await call("budget::record", { budget_id, cost_micros: 300, record_id: "d2:2" });
    now = Date.UTC(2026, 11, 3, 0, 0, 1);
    expect(await call<BudgetView>("budget::get", { budget_id })).toMatchObject({
      spent_micros: 0,
      period_start_at: Date.UTC(2026, 11, 3),
      period_resets_at: Date.UTC(2026, 11, 4),
    });
    // Not written yet (reads never write), but usage already shows the closed window.
    const usage1 = await call<{ spent_micros: number; by_period: BudgetSpendLogEntry[] }>("budget::usage", { budget_id, window: "all" });
    expect(usage1.by_period.map((e) => [e.log_key, e.spent_micros])).toEqual([
      ["day:2026-12-02", 1_000],
      ["current", 0],
    ]);
    expect(usage1.spent_micros).toBe(1_000);
    await call("budget::record", { budget_id, cost_micros: 5, record_id: "d3:1" });
    now = Date.UTC(2026, 11, 5, 13); // two days later: 4 December had no spend and is skipped
    await call("budget::record", { budget_id, cost_micros: 9, record_id: "d5:1" });
    const log = await call<{ entries: BudgetSpendLogEntry[] }>("budget::log", { budget_id });
    expect(log.entries.map((e) => [e.log_key, e.kind, e.spent_micros, e.records_count])).toEqual([
      ["day:2026-12-02", "rollover", 1_000, 2],
      ["day:2026-12-03", "rollover", 5, 1],
    ]);
    const usage = await call<{ spent_micros: number; records_count: number }>("budget::usage", { budget_id, window: "all" });
    expect(usage).toMatchObject({ spent_micros: 1_014, records_count: 4 });
    expect(await call("budget::usage", { budget_id, window: "day" })).toMatchObject({ spent_micros: 9 });
    expect(await refused(call("budget::usage", { budget_id, window: "month" }))).toMatchObject({ code: "invalid_input" });

    const reset = await call<BudgetView>("budget::reset", { budget_id });
    expect(reset).toMatchObject({ spent_micros: 0, period_start_at: now });
    const after = await call<{ entries: BudgetSpendLogEntry[] }>("budget::log", { budget_id });
    expect(after.entries.at(-1)).toMatchObject({ log_key: `day:2026-12-05:reset-${now}`, kind: "reset", spent_micros: 9 });
  });

  it("an alert fires once per window, its callback triggered with the spend", async () => {
    now = Date.UTC(2026, 11, 7, 10);
    const { budget_id } = await create({ ceiling_micros: 1_000_000, period: "week" });
    const { alert_id } = await call<{ alert_id: string }>("budget::alert_set", {
      budget_id,
      threshold_pct: 0.5,
      callback_function_id: "test::budget_alert",
      callback_payload: { channel: "#spend" },
    });
    await call("budget::alert_set", { budget_id, alert_id: "ninety", threshold_pct: 0.9, callback_function_id: "test::budget_alert" });
    const mine = () => alerts.filter((a) => a.budget_id === budget_id);
    const first = await call<BudgetRecordResponse>("budget::record", { budget_id, cost_micros: 600_000, record_id: "w1" });
    expect(first.alerts_fired).toEqual([alert_id]);
    await until(() => mine().length === 1, "the 50 % alert");
    expect(mine()[0]).toEqual({
      channel: "#spend",
      alert_id,
      budget_id,
      threshold_pct: 0.5,
      spent_micros: 600_000,
      ceiling_micros: 1_000_000,
      spent_usd: 0.6,
      ceiling_usd: 1,
      period_start_at: Date.UTC(2026, 11, 7),
    });
    expect((await call<BudgetRecordResponse>("budget::record", { budget_id, cost_micros: 100_000, record_id: "w2" })).alerts_fired).toEqual(
      [],
    );
    expect((await call<BudgetRecordResponse>("budget::record", { budget_id, cost_micros: 250_000, record_id: "w3" })).alerts_fired).toEqual(
      ["ninety"],
    );
    await until(() => mine().length === 2, "the 90 % alert");
    expect(mine().map((a) => a.alert_id)).toEqual([alert_id, "ninety"]);
    // Next week the 50 % alert fires again.
    now = Date.UTC(2026, 11, 14, 1);
    expect((await call<BudgetRecordResponse>("budget::record", { budget_id, cost_micros: 500_000, record_id: "w4" })).alerts_fired).toEqual(
      [alert_id],
    );
    await until(() => mine().length === 3, "the next week's 50 % alert");
    expect(mine()[2]).toMatchObject({ alert_id, spent_micros: 500_000, period_start_at: Date.UTC(2026, 11, 14) });
  });

  it("check order: paused, not enforced, a 24 h exemption, then the ceiling", async () => {
    const { budget_id } = await create({ ceiling_micros: 100 });
    await call("budget::record", { budget_id, cost_micros: 100 });
    const check = (principal_id?: string) =>
      call<BudgetCheckResponse>("budget::check", { budget_id, estimated_cost_usd: 0.00001, principal_id });
    expect(await check("sess-1")).toMatchObject({
      allowed: false,
      reason: "ceiling_exceeded",
      estimated_cost_micros: 10,
      remaining_micros: 0,
    });
    const { expires_at } = await call<{ expires_at: number }>("budget::exempt", {
      budget_id,
      principal_id: "sess-1",
      reason: "incident 42",
    });
    expect(expires_at).toBe(now + DAY_MS);
    expect(await check("sess-1")).toMatchObject({ allowed: true, reason: "exempt" });
    expect(await check("sess-2")).toMatchObject({ allowed: false });
    await call("budget::enforce", { budget_id, enforced: false });
    expect(await check()).toMatchObject({ allowed: true, reason: "not_enforced" });
    await call("budget::pause", { budget_id });
    expect(await check()).toMatchObject({ allowed: true, reason: "paused" });
    await call("budget::pause", { budget_id, paused: false });
    await call("budget::enforce", { budget_id, enforced: true });
    now += DAY_MS;
    // A day later the window is new (spend 0) — and the exemption has expired.
    expect(await check("sess-1")).toMatchObject({ allowed: true });
    await call("budget::record", { budget_id, cost_micros: 100 });
    expect(await check("sess-1")).toMatchObject({ allowed: false, reason: "ceiling_exceeded" });
  });

  it("prices: the catalog's, a user override, unpriced models refused; usage charged at tokens × price exactly", async () => {
    const catalog = await call<{ source: string; prices: Record<string, number> }>("budget::get_prices", {
      provider: "openai",
      model: "gpt-4o",
    });
    expect(catalog).toMatchObject({
      source: "catalog",
      prices: { input_micros_per_1m: 2_500_000, output_micros_per_1m: 10_000_000, cache_read_micros_per_1m: 1_250_000 },
    });
    const { budget_id } = await create({ ceiling_usd: 10 });
    // 1 234 input × 2.5 + 567 output × 10 + 100 cached × 1.25 = 3085 + 5670 + 125 µUSD.
    const r1 = await call<BudgetRecordResponse>("budget::record", {
      budget_id,
      record_id: "p1",
      provider: "openai",
      model: "gpt-4o",
      usage: { input: 1_234, output: 567, cache_read: 100 },
    });
    expect(r1).toMatchObject({ recorded: true, priced: true, cost_micros: 8_880, spent_micros: 8_880 });

    await call("budget::set_prices", { provider: "openai", model: "gpt-4o", input_per_1m: 1, output_per_1m: 3 });
    expect(await call("budget::get_prices", { provider: "openai", model: "gpt-4o-2024-08-06" })).toMatchObject({
      source: "override",
      prices: { input_micros_per_1m: 1_000_000, output_micros_per_1m: 3_000_000, cache_read_micros_per_1m: 1_000_000 },
    });
    const r2 = await call<BudgetRecordResponse>("budget::record", {
      budget_id,
      record_id: "p2",
      provider: "openai",
      model: "gpt-4o",
      usage: { input: 1_000, output: 333 },
    });
    expect(r2.cost_micros).toBe(1_999);
    await call("budget::set_prices", { provider: "openai", model: "gpt-4o", clear: true });
    expect(await call("budget::get_prices", { provider: "openai", model: "gpt-4o" })).toMatchObject({ source: "catalog" });

    // A model nobody prices: a token estimate cannot be checked; its usage records 0 (or its cost_usd).
    expect(
      await call("budget::check", { budget_id, estimate: { provider: "openai", model: "my-finetune", input_tokens: 10 } }),
    ).toMatchObject({ allowed: false, reason: "unpriced_model" });
    expect(await call("budget::record", { budget_id, provider: "openai", model: "my-finetune", usage: { input: 10 } })).toMatchObject({
      priced: false,
      cost_micros: 0,
    });
    expect(
      await call("budget::record", { budget_id, provider: "openai", model: "my-finetune", usage: { input: 10, cost_usd: 0.0000101 } }),
    ).toMatchObject({ priced: true, cost_micros: 11 });
    expect(
      await call<BudgetCheckResponse>("budget::check", {
        budget_id,
        estimate: { provider: "openai", model: "gpt-4o", input_tokens: 1_000, output_tokens: 100 },
      }),
    ).toMatchObject({ allowed: true, estimated_cost_micros: 3_500 });
    expect(await refused(call("budget::set_prices", { provider: "openai", model: "gpt-4o", input_per_1m: 1 }))).toMatchObject({
      code: "invalid_input",
    });
  });

  it("forecast: a linear rate since the window started", async () => {
    now = Date.UTC(2027, 0, 11, 0); // 10 days into January
    const { budget_id } = await create({ ceiling_usd: 25, period: "month" });
    await call("budget::record", { budget_id, cost_usd: 10 });
    // 1 USD a day: 30 in a 30-day month, 31 by the end of January — past 25, reached in 15 days.
    const f = await call<{
      projected_month_usd: number;
      projected_period_usd: number;
      on_track: boolean;
      days_until_breach: number | null;
    }>("budget::forecast", { budget_id });
    expect(f).toMatchObject({ projected_month_usd: 30, projected_period_usd: 31, on_track: false });
    expect(f.days_until_breach).toBeCloseTo(15, 6);
  });
});
