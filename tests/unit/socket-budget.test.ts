// The per-socket budget (engine-do/src/core/socket-budget.ts) on a hand-driven clock: frames and
// bytes per second with a burst, one warning a second, closed after FLOOD_GRACE_MS of ignoring it,
// a clean slate after backing off, bounded error notices and log lines.
import { describe, expect, it } from "vitest";
import { BYTE_BURST, BYTES_PER_SECOND, FLOOD_GRACE_MS, FRAME_BURST, FRAMES_PER_SECOND, MAX_FRAME_BYTES } from "@iii-edge/protocol";
import {
  ABUSE_LOG_INTERVAL_MS,
  ERROR_NOTICE_BURST,
  ERROR_NOTICES_PER_SECOND,
  CHANNEL_FRAMES,
  FLOOD_CLOSE_REASON,
  REFUSED_FRAME_COST,
  STREAM_SOCKET_FRAMES,
  SocketBudget,
  floodCloseReason,
  type Admission,
} from "@iii-edge/engine-do/core/socket-budget.ts";

const count = (vs: string[]) => vs.reduce<Record<string, number>>((m, v) => ((m[v] = (m[v] ?? 0) + 1), m), {});

describe("SocketBudget", () => {
  it("admits a burst of FRAME_BURST frames at one instant, then drops, warning once", () => {
    const b = new SocketBudget(0);
    const got = Array.from({ length: FRAME_BURST + 500 }, () => b.admit(10, 0));
    expect(count(got)).toEqual({ admit: FRAME_BURST, warn: 1, drop: 499 });
    expect(b.dropped).toBe(500);
    expect(b.closed).toBe(false);
  });

  it("refills at FRAMES_PER_SECOND", () => {
    const b = new SocketBudget(0);
    for (let i = 0; i < FRAME_BURST; i++) b.admit(10, 0);
    expect(b.admit(10, 0)).toBe("warn");
    // 100 ms later a tenth of a second's worth is back.
    const got = Array.from({ length: FRAMES_PER_SECOND / 10 + 1 }, () => b.admit(10, 100));
    expect(count(got)).toEqual({ admit: FRAMES_PER_SECOND / 10, drop: 1 });
  });

  it("warns once a second and closes a socket still over budget FLOOD_GRACE_MS after the first warning", () => {
    const b = new SocketBudget(0);
    for (let i = 0; i < FRAME_BURST; i++) b.admit(10, 0);
    const seen: [number, Admission][] = [];
    // Twice the sustained rate, in 10 ms steps: over budget the whole time.
    for (let t = 0; t <= FLOOD_GRACE_MS + 100 && !b.closed; t += 10) {
      for (let i = 0; i < (2 * FRAMES_PER_SECOND) / 100; i++) {
        const v = b.admit(10, t);
        if (v === "warn" || v === "close") seen.push([t, v]);
      }
    }
    expect(seen).toEqual([
      [0, "warn"],
      [1000, "warn"],
      [FLOOD_GRACE_MS, "close"],
    ]);
    // Closed: everything after is dropped, quietly.
    expect(b.admit(10, FLOOD_GRACE_MS + 10_000)).toBe("drop");
  });

  it("a client that backs off for a second starts a new episode (no close for two separate bursts)", () => {
    const b = new SocketBudget(0);
    for (let i = 0; i < FRAME_BURST + 10; i++) b.admit(10, 0);
    // Quiet for 1.5 s (refilled), then a second burst 1.5 s after the first warning.
    const got = Array.from({ length: FRAME_BURST + 10 }, () => b.admit(10, 1_500));
    expect(count(got)).toEqual({ admit: FRAME_BURST, warn: 1, drop: 9 });
    // 2.5 s after the first warning, but only 1 s into this episode: not closed.
    expect(b.admit(10, 2_500)).not.toBe("close");
    expect(b.closed).toBe(false);
  });

  it("charges bytes: BYTE_BURST at once, then BYTES_PER_SECOND; one large frame puts the socket in debt", () => {
    const b = new SocketBudget(0);
    const n = BYTE_BURST / MAX_FRAME_BYTES;
    const got = Array.from({ length: n + 1 }, () => b.admit(MAX_FRAME_BYTES, 0));
    expect(count(got)).toEqual({ admit: n, warn: 1 });
    // A second later, BYTES_PER_SECOND is back.
    const later = Array.from({ length: BYTES_PER_SECOND / MAX_FRAME_BYTES + 1 }, () => b.admit(MAX_FRAME_BYTES, 1_000));
    expect(later.filter((v) => v === "admit")).toHaveLength(BYTES_PER_SECOND / MAX_FRAME_BYTES);

    // A 32 MiB frame (the largest workerd delivers) is admitted (and refused by size elsewhere),
    // then small frames wait until the debt is paid.
    const big = new SocketBudget(0);
    expect(big.admit(32 * 1024 * 1024, 0)).toBe("admit");
    expect(big.admit(10, 0)).toBe("warn");
    const paidAt = ((32 * 1024 * 1024 - BYTE_BURST) / BYTES_PER_SECOND) * 1000;
    expect(big.admit(10, paidAt + 1)).toBe("admit");
  });

  it("error notices: ERROR_NOTICE_BURST, then ERROR_NOTICES_PER_SECOND, with one warning a second in between", () => {
    const b = new SocketBudget(0);
    const burst = Array.from({ length: ERROR_NOTICE_BURST + 5 }, () => b.notice(0));
    expect(count(burst)).toEqual({ answer: ERROR_NOTICE_BURST, warn: 1, quiet: 4 });
    const later = Array.from({ length: 2 * ERROR_NOTICES_PER_SECOND }, () => b.notice(1_000));
    expect(count(later)).toEqual({ answer: ERROR_NOTICES_PER_SECOND, warn: 1, quiet: ERROR_NOTICES_PER_SECOND - 1 });
  });

  it("one log line per ABUSE_LOG_INTERVAL_MS, the next one counting what was left out", () => {
    const b = new SocketBudget(0);
    expect(b.log(0)).toBe(0);
    for (let t = 1; t < 1_000; t++) expect(b.log(t)).toBeUndefined();
    expect(b.log(ABUSE_LOG_INTERVAL_MS)).toBe(999);
    expect(b.log(ABUSE_LOG_INTERVAL_MS + 1)).toBeUndefined();
  });

  it(`a refused frame costs REFUSED_FRAME_COST (${REFUSED_FRAME_COST}) frames of budget`, () => {
    const b = new SocketBudget(0);
    const junk = FRAME_BURST / REFUSED_FRAME_COST;
    for (let i = 0; i < junk; i++) {
      expect(b.admit(10, 0)).toBe("admit");
      b.refused();
    }
    expect(b.admit(10, 0)).toBe("warn");
  });

  it("channel ends and stream sockets have budgets of their own", () => {
    for (const limits of [CHANNEL_FRAMES, STREAM_SOCKET_FRAMES]) {
      const b = new SocketBudget(0, limits);
      const got = Array.from({ length: limits.burst + 1 }, () => b.admit(10, 0));
      expect(count(got)).toEqual({ admit: limits.burst, warn: 1 });
      expect(floodCloseReason(limits)).toContain(`${limits.perSecond} frames/s`);
    }
  });

  it("the close reasons fit a WebSocket close frame (123 bytes)", () => {
    for (const r of [FLOOD_CLOSE_REASON, floodCloseReason(CHANNEL_FRAMES), floodCloseReason(STREAM_SOCKET_FRAMES)])
      expect(new TextEncoder().encode(r).byteLength).toBeLessThanOrEqual(123);
  });
});
