// The agent screen's approvals panel rules (src/screens/agent/approvals.ts): how a waiting call's
// age and deadline read.
import { describe, expect, it } from "vitest";
import { MODE_HELP, pendingAge, span } from "../src/screens/agent/approvals.ts";

describe("a waiting call's age", () => {
  const at = 1_000_000_000;
  it("reads in the largest unit that fits", () => {
    expect(span(0)).toBe("0 s");
    expect(span(59_999)).toBe("59 s");
    expect(span(60_000)).toBe("1 min");
    expect(span(3_599_000)).toBe("59 min");
    expect(span(7_200_000)).toBe("2 h");
    expect(span(-5)).toBe("0 s");
  });

  it("says how long it waited and how long it has left, then that it expired", () => {
    const rec = { pending_at: at, expires_at: at + 1_800_000 };
    expect(pendingAge(rec, at + 180_000)).toBe("waiting 3 min, expires in 27 min");
    expect(pendingAge(rec, at + 1_800_000)).toBe("waiting 30 min, expired");
  });

  it("every mode has its explanation, and full says the harness's own functions stay closed", () => {
    expect(Object.keys(MODE_HELP).sort()).toEqual(["auto", "full", "manual"]);
    expect(MODE_HELP.full).toMatch(/except the harness's own functions/);
  });
});
