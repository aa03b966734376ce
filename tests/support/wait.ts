// Bounded polling for the suites (Node and workerd alike: no runtime-specific import here).

/** Poll until `check` returns a value other than undefined/false; fail with `what` after `ms`. */
export async function eventually<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  ms = 10_000,
  what = "condition",
  step = 10,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, step));
  }
}

/**
 * Poll until `fn` returns something truthy. A throw counts as "not yet" (e.g. function_not_found
 * while a registration is still in flight); the last one is reported if `ms` runs out.
 */
export async function until<T>(fn: () => Promise<T> | T, what: string, ms = 10_000, step = 50): Promise<NonNullable<T>> {
  const deadline = Date.now() + ms;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${lastError ? `: ${String(lastError)}` : ""}`);
    await new Promise((r) => setTimeout(r, step));
  }
}
