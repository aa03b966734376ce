// The figures every bench prints: percentiles of a sample (nearest rank) and a fixed-width number.

/** The p-th percentile (0–100) of `xs` by nearest rank; NaN for an empty sample. */
export const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};
export const median = (xs: number[]): number => pct(xs, 50);
/** `n` with `d` decimals, or "—" for a figure that could not be measured. */
export const fmt = (n: number, d = 1): string => (Number.isFinite(n) ? n.toFixed(d) : "—");
