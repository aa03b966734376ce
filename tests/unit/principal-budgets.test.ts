// What one principal's sockets may cost together (engine-do/src/core/principal-budgets.ts), on a
// hand-driven clock: channel writers share one frame budget; worker connections share only a budget
// of refused frames, which bulk work never touches; the open grant's clients share nothing.
import { describe, expect, it } from "vitest";
import {
  PRINCIPAL_REFUSAL_BURST,
  PRINCIPAL_REFUSALS_PER_SECOND,
  PrincipalBudgets,
  PrincipalRefusals,
} from "@iii-edge/engine-do/core/principal-budgets.ts";
import { CHANNEL_FRAMES } from "@iii-edge/engine-do/core/socket-budget.ts";

describe("PrincipalBudgets (channel writers of one creator)", () => {
  it("N writers together get one writer's burst; another principal and nobody's frames are unaffected", () => {
    const shared = new PrincipalBudgets(CHANNEL_FRAMES);
    let admitted = 0;
    // Four writers interleaved, all at t = 0: the burst is theirs together.
    for (let i = 0; i < 4 * CHANNEL_FRAMES.burst; i++) if (shared.take("alice", 10, 0)) admitted++;
    expect(admitted).toBe(CHANNEL_FRAMES.burst);
    expect(shared.take("bob", 10, 0)).toBe(true);
    expect(shared.take(undefined, 10, 0)).toBe(true);
    // It refills at one writer's rate.
    expect(shared.take("alice", 10, 1_000)).toBe(true);
    let more = 1;
    while (shared.take("alice", 10, 1_000)) more++;
    expect(more).toBe(CHANNEL_FRAMES.perSecond);
  });
});

describe("PrincipalRefusals (worker connections of one principal)", () => {
  it("frames are admitted until the principal's refusals exceed the burst, then none until it refills", () => {
    const r = new PrincipalRefusals();
    for (let i = 0; i < PRINCIPAL_REFUSAL_BURST; i++) {
      expect(r.admits("mallory", 0)).toBe(true);
      r.refused("mallory", 0);
    }
    expect(r.admits("mallory", 0)).toBe(false);
    expect(r.admits("mallory", 500)).toBe(true); // 100 refusals' worth back after 0.5 s
    for (let i = 0; i < PRINCIPAL_REFUSALS_PER_SECOND / 2; i++) r.refused("mallory", 500);
    expect(r.admits("mallory", 500)).toBe(false);
    // Others are not touched, nor are the open grant's clients (no principal).
    expect(r.admits("alice", 500)).toBe(true);
    expect(r.admits(undefined, 500)).toBe(true);
  });

  it("a principal that is never refused is never held back, however much it sends", () => {
    const r = new PrincipalRefusals();
    let held = 0;
    for (let i = 0; i < 100_000; i++) if (!r.admits("bulk", i / 100)) held++;
    expect(held).toBe(0);
  });

  it("refusals of nobody in particular (the open grant) are not counted", () => {
    const r = new PrincipalRefusals();
    for (let i = 0; i < 2 * PRINCIPAL_REFUSAL_BURST; i++) r.refused(undefined, 0);
    expect(r.admits(undefined, 0)).toBe(true);
  });
});
