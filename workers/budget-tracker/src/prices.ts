// What a model's tokens cost: a user override (`budget::set_prices`, state scope `budget_prices`,
// key `<provider>:<model>`) wins over the models catalog's `pricing` (`models::get`). Both are read
// on every pricing (in parallel), so a price set on one copy of the worker applies on every copy at
// once; nothing is cached.
import { BUDGET_PRICES_SCOPE, type BudgetPrices, type BudgetPricesResponse, type Model, budgetState } from "@iii-edge/protocol/harness";
import { z } from "zod";
import { pricesFromCatalog } from "./money.ts";
import { STATE_TIMEOUT_MS, type Trigger } from "./store.ts";

/** `models::get` answers from the providers worker's table and one state read. */
export const CATALOG_TIMEOUT_MS = 5_000;

export const priceKey = (provider: string, model: string): string => budgetState.prices(provider, model).key;
/** A dated snapshot id (`claude-sonnet-4-5-20250929`, `gpt-4o-2024-08-06`) → its alias, as the
 * catalog resolves it: an override set for the alias prices the snapshots too. */
const undated = (id: string): string => id.replace(/-\d{8}$/, "").replace(/-\d{4}-\d{2}-\d{2}$/, "");

const micros = z.number().int().nonnegative();
const storedPrices = z.object({
  provider: z.string(),
  model: z.string(),
  input_micros_per_1m: micros,
  output_micros_per_1m: micros,
  cache_read_micros_per_1m: micros,
  cache_write_micros_per_1m: micros,
  updated_at: z.number(),
});
export type StoredPrices = z.infer<typeof storedPrices>;

const pricesOnly = (p: StoredPrices): BudgetPrices => ({
  input_micros_per_1m: p.input_micros_per_1m,
  output_micros_per_1m: p.output_micros_per_1m,
  cache_read_micros_per_1m: p.cache_read_micros_per_1m,
  cache_write_micros_per_1m: p.cache_write_micros_per_1m,
});

async function override(trigger: Trigger, provider: string, model: string): Promise<BudgetPrices | undefined> {
  for (const id of model === undated(model) ? [model] : [model, undated(model)]) {
    const row = await trigger({
      function_id: "state::get",
      payload: { scope: BUDGET_PRICES_SCOPE, key: priceKey(provider, id) },
      timeoutMs: STATE_TIMEOUT_MS,
    });
    const r = storedPrices.safeParse(row);
    if (r.success) return pricesOnly(r.data);
  }
  return undefined;
}

/** The catalog's price, or undefined (no providers worker, an unknown model, no `pricing`). A
 * failed lookup is not an error here: without a price the check refuses (`unpriced_model`). */
async function catalog(trigger: Trigger, provider: string, model: string): Promise<BudgetPrices | undefined> {
  try {
    const m = await trigger<unknown, Model | null | undefined>({
      function_id: "models::get",
      payload: { provider, id: model },
      timeoutMs: CATALOG_TIMEOUT_MS,
    });
    return pricesFromCatalog(m);
  } catch (e) {
    console.warn(`budget-tracker: models::get ${provider}/${model} failed (no catalog price): ${String(e)}`);
    return undefined;
  }
}

export async function resolvePrices(trigger: Trigger, provider: string, model: string): Promise<BudgetPricesResponse> {
  const [own, cat] = await Promise.all([override(trigger, provider, model), catalog(trigger, provider, model)]);
  if (own) return { provider, model, source: "override", prices: own };
  if (cat) return { provider, model, source: "catalog", prices: cat };
  return { provider, model, source: "none", prices: null };
}

export async function setPrices(trigger: Trigger, value: StoredPrices): Promise<void> {
  await trigger({
    function_id: "state::set",
    payload: { scope: BUDGET_PRICES_SCOPE, key: priceKey(value.provider, value.model), value },
    timeoutMs: STATE_TIMEOUT_MS,
  });
}

export async function clearPrices(trigger: Trigger, provider: string, model: string): Promise<boolean> {
  const old = await trigger({
    function_id: "state::delete",
    payload: { scope: BUDGET_PRICES_SCOPE, key: priceKey(provider, model) },
    timeoutMs: STATE_TIMEOUT_MS,
  });
  return old !== undefined && old !== null;
}
