// One frame and byte budget per principal, shared by every socket of one kind that principal holds,
// on top of each socket's own (socket-budget.ts). A socket's budget alone lets a principal flood
// with N sockets at N times the rate; and because a budget refills by the clock of the object
// handling the frames, a burst that queues behind a slow object keeps being admitted as it drains
// (4 channel writers at 1 000 chunks/s each were never over budget, and took the object 15 s).
// Shared, the principal's N sockets together get what one socket gets. A well-behaved principal is
// far below it: one socket's budget is already more than the object can handle (tests/bench).
// The open grant (an engine without auth: every local client is it) has none: nobody in particular.
import { SocketBudget, type FrameLimits } from "./socket-budget.ts";

/** Budgets untouched this long are full again, as a new one would be: they are forgotten. */
const IDLE_MS = 10_000;
/** A sweep of idle budgets runs at most once per this many charges. */
const SWEEP_EVERY = 4_096;

export class PrincipalBudgets {
  private readonly limits: FrameLimits;
  private readonly budgets = new Map<string, { budget: SocketBudget; usedAt: number }>();
  private charges = 0;

  constructor(limits: FrameLimits) {
    this.limits = limits;
  }

  /** Charge one frame of `size` to `principal` (undefined: nobody's, never refused). False when
   * the principal has nothing left: the frame is to be dropped as over its socket's budget. */
  take(principal: string | undefined, size: number, now: number): boolean {
    if (principal === undefined) return true;
    if (++this.charges % SWEEP_EVERY === 0) this.sweep(now);
    let e = this.budgets.get(principal);
    if (!e) this.budgets.set(principal, (e = { budget: new SocketBudget(now, this.limits), usedAt: now }));
    e.usedAt = now;
    return e.budget.take(size, now);
  }

  /** An admitted frame was refused or ignored: the principal pays its full cost too. */
  refused(principal: string | undefined): void {
    if (principal !== undefined) this.budgets.get(principal)?.budget.refused();
  }

  private sweep(now: number): void {
    for (const [p, e] of this.budgets) if (now - e.usedAt > IDLE_MS) this.budgets.delete(p);
  }
}
