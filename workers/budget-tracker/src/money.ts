// Money as integers: micro-USD (µUSD) amounts, prices in µUSD per 1M tokens, and a call's cost
// computed exactly (BigInt) and rounded up once per call. Floating point only appears where a
// caller hands in dollars (converted here, once) and in the `_usd` display fields.
import { MICROS_PER_USD, TOKENS_PER_PRICE_UNIT, type BudgetPrices, type Model } from "@iii-edge/protocol/harness";

/** How far a dollar amount times 1e6 may sit from an integer and still be that integer: binary
 * floating point cannot hold most decimals (0.0015 × 1e6 = 1500.0000000000002), and a caller who
 * wrote 0.0015 USD meant 1500 µUSD, not 1501. Far below one µUSD, far above the float noise. */
const DECIMAL_NOISE = 1e-6;

/** Dollars → µUSD. `up` (costs: a partial micro-dollar is charged) or `nearest` (ceilings and
 * prices: the decimal the caller typed). */
export function microsFromUsd(usd: number, rounding: "up" | "nearest"): number {
  const scaled = usd * MICROS_PER_USD;
  const nearest = Math.round(scaled);
  if (Math.abs(scaled - nearest) < DECIMAL_NOISE) return nearest;
  return rounding === "up" ? Math.ceil(scaled) : nearest;
}

/** µUSD → dollars, for display only (never summed back). */
export const usdFromMicros = (micros: number): number => micros / MICROS_PER_USD;

/** Prices of a catalog model (`pricing`, USD per 1M), cache prices defaulting to the input price
 * as the providers do; undefined when the catalog has no price. */
export function pricesFromCatalog(model: Pick<Model, "pricing"> | null | undefined): BudgetPrices | undefined {
  const p = model?.pricing;
  if (!p) return undefined;
  return pricesFromUsd(p.input_per_1m, p.output_per_1m, p.cache_read_per_1m, p.cache_write_per_1m);
}

export function pricesFromUsd(input: number, output: number, cacheRead?: number, cacheWrite?: number): BudgetPrices {
  const inMicros = microsFromUsd(input, "nearest");
  return {
    input_micros_per_1m: inMicros,
    output_micros_per_1m: microsFromUsd(output, "nearest"),
    cache_read_micros_per_1m: cacheRead === undefined ? inMicros : microsFromUsd(cacheRead, "nearest"),
    cache_write_micros_per_1m: cacheWrite === undefined ? inMicros : microsFromUsd(cacheWrite, "nearest"),
  };
}

export interface TokenCounts {
  input?: number;
  output?: number;
  cache_read?: number;
  cache_write?: number;
}

const PRICE_UNIT = BigInt(TOKENS_PER_PRICE_UNIT);

/**
 * A call's cost in µUSD: Σ tokens × µUSD-per-1M, exact in BigInt, then divided by 1M **rounding
 * up** — once per call, so a call never costs less than it did and many small calls cannot drift
 * below their true total (each is off by less than 1 µUSD, always upward). `input` is the
 * uncached input (the providers report cache reads and writes apart from it); reasoning tokens are
 * part of `output`.
 */
export function costMicros(usage: TokenCounts, prices: BudgetPrices): number {
  const n = (v: number | undefined) => BigInt(Math.max(0, Math.trunc(v ?? 0)));
  const total =
    n(usage.input) * BigInt(prices.input_micros_per_1m) +
    n(usage.output) * BigInt(prices.output_micros_per_1m) +
    n(usage.cache_read) * BigInt(prices.cache_read_micros_per_1m) +
    n(usage.cache_write) * BigInt(prices.cache_write_micros_per_1m);
  return Number((total + PRICE_UNIT - 1n) / PRICE_UNIT);
}

/** `a × b ≥ c × d` for non-negative integers, exactly (thresholds against ceilings). */
export const productAtLeast = (a: number, b: number, c: number, d: number): boolean => BigInt(a) * BigInt(b) >= BigInt(c) * BigInt(d);
