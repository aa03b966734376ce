// The per-provider circuit breaker on a clock of its own: when it opens, how long it stays open,
// the one trial it lets through once the cool-down has passed, and what closes it again.
import { describe, expect, it } from "vitest";
import { BREAKER_COOL_DOWN_MS, BREAKER_FAILURE_THRESHOLD, CircuitBreaker, DEFAULT_BREAKER } from "../src/breaker.ts";

function breaker() {
  const clock = { t: 1_000_000 };
  const b = new CircuitBreaker(DEFAULT_BREAKER, () => clock.t);
  const failTimes = (n: number) => {
    for (let i = 0; i < n; i++) {
      expect(b.admit().ok).toBe(true);
      b.failed();
    }
  };
  return { b, clock, failTimes };
}

describe("circuit breaker", () => {
  it("stays closed below the threshold, and a success clears the count", () => {
    const { b, failTimes } = breaker();
    failTimes(BREAKER_FAILURE_THRESHOLD - 1);
    expect(b.state).toBe("closed");
    expect(b.admit()).toEqual({ ok: true, trial: false });
    b.succeeded();
    failTimes(BREAKER_FAILURE_THRESHOLD - 1);
    expect(b.state).toBe("closed");
  });

  it("opens after the threshold of failures in a row and refuses until the cool-down has passed", () => {
    const { b, clock, failTimes } = breaker();
    failTimes(BREAKER_FAILURE_THRESHOLD);
    const openedAt = clock.t;
    expect(b.state).toBe("open");
    expect(b.admit()).toEqual({ ok: false, retry_at: openedAt + BREAKER_COOL_DOWN_MS, failures: BREAKER_FAILURE_THRESHOLD });
    clock.t = openedAt + BREAKER_COOL_DOWN_MS - 1;
    expect(b.admit().ok).toBe(false);
    clock.t = openedAt + BREAKER_COOL_DOWN_MS;
    expect(b.state).toBe("half_open");
  });

  it("half-open lets one trial through; its success closes the breaker", () => {
    const { b, clock, failTimes } = breaker();
    failTimes(BREAKER_FAILURE_THRESHOLD);
    clock.t += BREAKER_COOL_DOWN_MS;
    expect(b.admit()).toEqual({ ok: true, trial: true });
    // A second stream while the trial is out fails fast.
    expect(b.admit().ok).toBe(false);
    b.succeeded();
    expect(b.state).toBe("closed");
    expect(b.admit()).toEqual({ ok: true, trial: false });
  });

  it("a failed trial opens it again for a whole cool-down", () => {
    const { b, clock, failTimes } = breaker();
    failTimes(BREAKER_FAILURE_THRESHOLD);
    clock.t += BREAKER_COOL_DOWN_MS;
    expect(b.admit().ok).toBe(true);
    b.failed();
    const reopenedAt = clock.t;
    expect(b.state).toBe("open");
    expect(b.admit()).toMatchObject({ ok: false, retry_at: reopenedAt + BREAKER_COOL_DOWN_MS });
    clock.t = reopenedAt + BREAKER_COOL_DOWN_MS;
    expect(b.admit()).toEqual({ ok: true, trial: true });
  });

  it("a trial that told nothing about the provider hands its slot back", () => {
    const { b, clock, failTimes } = breaker();
    failTimes(BREAKER_FAILURE_THRESHOLD);
    clock.t += BREAKER_COOL_DOWN_MS;
    expect(b.admit().ok).toBe(true);
    b.released();
    expect(b.state).toBe("half_open");
    expect(b.admit()).toEqual({ ok: true, trial: true });
  });
});
