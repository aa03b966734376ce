// What all the sockets of one principal may cost the engine object together, on top of each
// socket's own budget (socket-budget.ts). A socket's budget alone lets a principal flood with N
// sockets at N times the rate; and because a budget refills by the clock of the object handling
// the frames, a burst that queues behind a busy object keeps being admitted as it drains (4 channel
// writers at 1 000 chunks/s each were never over budget and kept the object busy for 15 s).
// * Channel writers share their channels' creator's frame budget (PrincipalBudgets): N writers
//   together get what one gets, already a third of the object (CHANNEL_FRAMES_PER_SECOND).
// * Worker connections share only a budget of refused and ignored frames (PrincipalRefusals): a
//   well-behaved worker sends none, while a principal registering thousands of functions over six
//   sockets, or storing megabytes at once, must not be slowed by a shared frame budget (tests/security
//   bounds). Past it, every frame of that principal is dropped (and its sockets told, then closed)
//   until it refills: junk over N sockets costs what junk over one does.
// The open grant (an engine without auth: every local client holds it) has neither: nobody in
// particular.
import { FRAME_BURST } from "@iii-edge/protocol";
import { REFUSED_FRAME_COST, SocketBudget, refilled, type FrameLimits } from "./socket-budget.ts";

/** Budgets untouched this long are full again, as new ones would be: they are forgotten. */
const IDLE_MS = 10_000;
/** A sweep of idle budgets runs at most once per this many charges. */
const SWEEP_EVERY = 4_096;

/** Forgets what is idle; the entries are budgets by principal. */
class ByPrincipal<T extends { usedAt: number }> {
  readonly entries = new Map<string, T>();
  private charges = 0;
  get(principal: string, now: number, make: () => T): T {
    if (++this.charges % SWEEP_EVERY === 0) {
      for (const [p, e] of this.entries) if (now - e.usedAt > IDLE_MS) this.entries.delete(p);
    }
    let e = this.entries.get(principal);
    if (!e) this.entries.set(principal, (e = make()));
    e.usedAt = now;
    return e;
  }
}

/** Every frame of the principal's sockets spends one shared frame and byte budget. */
export class PrincipalBudgets {
  private readonly limits: FrameLimits;
  private readonly budgets = new ByPrincipal<{ budget: SocketBudget; usedAt: number }>();

  constructor(limits: FrameLimits) {
    this.limits = limits;
  }

  /** Charge one frame of `size` to `principal` (undefined: nobody's, never refused). False when
   * the principal has nothing left: the frame is to be dropped as over its socket's budget. */
  take(principal: string | undefined, size: number, now: number): boolean {
    if (principal === undefined) return true;
    return this.budgets.get(principal, now, () => ({ budget: new SocketBudget(now, this.limits), usedAt: now })).budget.take(size, now);
  }
}

/** Refused and ignored frames one principal's worker connections may send together at once: what
 * one connection may (its FRAME_BURST at REFUSED_FRAME_COST each): room for a buggy client to
 * learn what is wrong, or for a registration quota's refusals. */
export const PRINCIPAL_REFUSAL_BURST = FRAME_BURST / REFUSED_FRAME_COST;
/** And per second after that. Slower than the burst: the budget refills by the object's clock, so
 * a junk burst queued behind a busy object would otherwise be parsed at this rate all the while it
 * drains (measured: 4 × 15 000 junk frames took the object 5 s; at 2 000/s that is 10 000 parses). */
export const PRINCIPAL_REFUSALS_PER_SECOND = 200;

/** Only refused and ignored frames spend it; a principal in debt has every frame dropped. */
export class PrincipalRefusals {
  private readonly budgets = new ByPrincipal<{ left: number; at: number; usedAt: number }>();

  /** May a frame of `principal` be looked at now? (It is not charged: only a refusal is.) */
  admits(principal: string | undefined, now: number): boolean {
    if (principal === undefined) return true;
    const e = this.budgets.entries.get(principal);
    return !e || this.refill(e, now) >= 1;
  }

  /** An admitted frame of `principal` was refused or ignored. */
  refused(principal: string | undefined, now: number): void {
    if (principal === undefined) return;
    const e = this.budgets.get(principal, now, () => ({ left: PRINCIPAL_REFUSAL_BURST, at: now, usedAt: now }));
    this.refill(e, now);
    e.left -= 1;
  }

  private refill(e: { left: number; at: number }, now: number): number {
    e.left = refilled(e.left, now - e.at, PRINCIPAL_REFUSALS_PER_SECOND, PRINCIPAL_REFUSAL_BURST);
    e.at = now;
    return e.left;
  }
}
