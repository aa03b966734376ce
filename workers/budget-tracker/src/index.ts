// The budget-tracker worker (docs/harness-contracts.md §1.9, §6.2; `llm-budget`): LLM spend per budget in
// integer micro-USD, UTC day/week/month windows with rollover to a spend log, ceilings, alerts,
// exemptions, holds for calls in flight, and a forecast. Every mutation is a compare-and-set on
// engine state (scope `budgets`), so copies of it may run side by side. Runs in workerd and in Node
// (Web APIs only).
import type { WorkerModule, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { registerBudgetFunctions, type BudgetConfig } from "./functions.ts";

export type { BudgetConfig } from "./functions.ts";
export { costMicros, microsFromUsd, pricesFromCatalog, pricesFromUsd, usdFromMicros } from "./money.ts";
export { periodKey, windowAt } from "./periods.ts";

export const worker: WorkerModule<BudgetConfig> = {
  name: "budget-tracker",
  kernel: true,
  configFrom: () => ({}),
  register(iii: WorkerSurface, config: BudgetConfig) {
    registerBudgetFunctions(iii, config);
  },
};
export default worker;
