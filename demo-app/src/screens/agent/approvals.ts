// The agent screen's approvals panel, as rules: how long a call has waited and how long it has
// left, in words a person reads at a glance (docs/harness.md "Permission modes").
import type { PendingApprovalRecord, PermissionMode } from "@iii-edge/protocol/harness";

/** A span of time in the largest unit that fits: "40 s", "3 min", "2 h". */
export function span(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  return `${Math.floor(m / 60)} h`;
}

/** "waiting 3 min, expires in 27 min" — or "expired" once past its deadline (the sweep denies it). */
export function pendingAge(rec: Pick<PendingApprovalRecord, "pending_at" | "expires_at">, now: number): string {
  const waited = `waiting ${span(now - rec.pending_at)}`;
  return rec.expires_at <= now ? `${waited}, expired` : `${waited}, expires in ${span(rec.expires_at - now)}`;
}

/** What each mode means, shown beside the selector. */
export const MODE_HELP: Record<PermissionMode, string> = {
  manual: "The policy decides; anything it does not allow waits for you.",
  auto: "Like manual, plus the functions you trust below run without asking.",
  full: "Every call runs without asking, except the harness's own functions.",
};
