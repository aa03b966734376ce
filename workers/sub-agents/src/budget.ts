// A child's share of its parent's budget (optional, isolated here). Without `budget_share` — or
// without a budget-tracker to ask — a child runs on its parent's own `budget_id`, so everything it
// spends is the parent's and the tree can never outspend the parent's ceiling. With a share and the
// budget-tracker present, the child gets a budget of its own: `share` of what the parent has left
// minus what live siblings were already given, so one child cannot eat its siblings' money; when
// the child ends, what it spent is recorded on the parent's budget (once, by record id).
import { IIIError } from "@iii-edge/protocol";
import { BUDGET_TIMEOUT_MS } from "./constants.ts";
import { call, errorCode, errorText, type BudgetLink, type ParentEntry, type Trigger } from "./records.ts";

/** What the parent's budget says now (`budget::get`), or why it cannot be asked. */
export type ParentBudget =
  | { ok: true; budget_id: string; remaining_micros: number; period: string }
  | { ok: false; budget_id: string; reason: string };

const CHILD_BUDGET_PREFIX = "sa-";

/** The child budget's id: derived from the child's session id, so a repeated spawn reuses it
 * (budget ids allow `[A-Za-z0-9._:@-]`, session ids more). */
export async function childBudgetId(childSessionId: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(childSessionId));
  return (
    CHILD_BUDGET_PREFIX +
    [...new Uint8Array(digest)]
      .slice(0, 12)
      .map((b) => b.toString(16).padStart(2, "0"))
      .join("")
  );
}

/** `budget::get` of the parent's budget; a missing budget-tracker or budget is reported, not thrown. */
export async function readParentBudget(trigger: Trigger, budgetId: string): Promise<ParentBudget> {
  try {
    const b = await call<{ remaining_micros?: unknown; period?: unknown }>(
      trigger,
      "budget::get",
      { budget_id: budgetId },
      BUDGET_TIMEOUT_MS,
    );
    if (typeof b?.remaining_micros !== "number" || typeof b.period !== "string")
      return { ok: false, budget_id: budgetId, reason: "budget::get answered without remaining_micros/period" };
    return { ok: true, budget_id: budgetId, remaining_micros: b.remaining_micros, period: b.period };
  } catch (e) {
    const code = errorCode(e);
    if (code === "function_not_found") return { ok: false, budget_id: budgetId, reason: "no budget-tracker is registered (budget::get)" };
    return { ok: false, budget_id: budgetId, reason: `budget::get failed: ${code ?? "error"}: ${errorText(e)}` };
  }
}

/** Money set aside for live siblings (entries of this parent not ended yet). */
export const allottedToLive = (siblings: readonly ParentEntry[]): number =>
  siblings.filter((s) => !s.ended).reduce((n, s) => n + (s.allotted_micros ?? 0), 0);

/** The child's allotment: `share` of the parent's remaining minus live siblings' allotments. No
 * money left → `budget_exhausted` (the model reads it and can do the work itself). */
export function allotment(parent: Extract<ParentBudget, { ok: true }>, share: number, siblings: readonly ParentEntry[]): number {
  const free = parent.remaining_micros - allottedToLive(siblings);
  const micros = Math.floor(share * Math.max(0, free));
  if (micros < 1) {
    throw new IIIError(
      "budget_exhausted",
      `the parent's budget ${parent.budget_id} has nothing left to give a sub-agent (remaining ${parent.remaining_micros} µUSD, ${allottedToLive(siblings)} µUSD already given to running sub-agents); do the task yourself or wait for a sub-agent to finish`,
    );
  }
  return micros;
}

/** Create the child's budget (idempotent: an existing one of the same id is the same spawn's). */
export async function createChildBudget(
  trigger: Trigger,
  parent: Extract<ParentBudget, { ok: true }>,
  childSessionId: string,
  share: number,
  ceilingMicros: number,
): Promise<BudgetLink> {
  const budget_id = await childBudgetId(childSessionId);
  try {
    await call(
      trigger,
      "budget::create",
      {
        budget_id,
        ceiling_micros: ceilingMicros,
        period: parent.period,
        agent_id: childSessionId,
        name: `sub-agent ${childSessionId}`.slice(0, 200),
      },
      BUDGET_TIMEOUT_MS,
    );
  } catch (e) {
    if (errorCode(e) !== "already_exists") throw e;
  }
  return { mode: "share", parent_budget_id: parent.budget_id, budget_id, share, ceiling_micros: ceilingMicros };
}

/** When a child with its own budget ends: what it spent goes onto the parent's budget, once
 * (`record_id` = the child's id). Returns the link with `settled`. */
export async function settleChildBudget(
  trigger: Trigger,
  link: Extract<BudgetLink, { mode: "share" }>,
  childSessionId: string,
): Promise<BudgetLink> {
  if (link.settled) return link;
  const b = await call<{ spent_micros?: unknown }>(trigger, "budget::get", { budget_id: link.budget_id }, BUDGET_TIMEOUT_MS);
  const spent = typeof b?.spent_micros === "number" ? b.spent_micros : 0;
  if (spent > 0) {
    await call(
      trigger,
      "budget::record",
      { budget_id: link.parent_budget_id, cost_micros: spent, record_id: `sub-agent:${childSessionId}`, principal_id: childSessionId },
      BUDGET_TIMEOUT_MS,
    );
  }
  return { ...link, settled: true };
}
