// A clock that moves only when told, and timers that fire as it passes them: the engine's clock and
// timers ports (engine-do/src/core/ports.ts) for tests that must not wait for real time.
import type { Timers } from "@iii-edge/engine-do/core/ports.ts";

export class FakeTime {
  now = 1_000_000;
  private seq = 0;
  private readonly pending = new Map<number, { at: number; fn: () => void }>();
  readonly clock = { now: () => this.now };
  readonly timers: Timers = {
    set: (fn, ms) => {
      const h = ++this.seq;
      this.pending.set(h, { at: this.now + ms, fn });
      return h;
    },
    clear: (h) => void this.pending.delete(h as number),
  };
  /** Timers set and not yet fired or cleared. */
  get active(): number {
    return this.pending.size;
  }
  /** Moves the clock `ms` on, firing each timer due on the way at its own time. */
  advance(ms: number): void {
    const end = this.now + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const e of this.pending) if (e[1].at <= end && (!next || e[1].at < next[1].at)) next = e;
      if (!next) break;
      this.pending.delete(next[0]);
      this.now = Math.max(this.now, next[1].at);
      next[1].fn();
    }
    this.now = end;
  }
}
