// One timer for every call deadline. workerd caps the active timers of an isolate (10,000 open
// calls with a timer each hit `QuotaExceededError: max active timeouts`, after which no timer of
// anyone's could be set), so deadlines live in a min-heap and a single timer is armed for the
// earliest. Adding, settling and expiring a deadline are O(log n); cancelled entries are dropped
// lazily when they reach the top.
import type { Clock, Timers } from "./ports.ts";

interface Entry {
  at: number;
  id: string;
  seq: number;
}

export class Deadlines {
  private readonly heap: Entry[] = [];
  /** id → the live entry's sequence number and what to run when it expires. */
  private readonly live = new Map<string, { seq: number; fire: () => void }>();
  private readonly timers: Timers;
  private readonly clock: Clock;
  private timer: unknown = null;
  private armedAt = Infinity;
  private seq = 0;

  constructor(timers: Timers, clock: Clock) {
    this.timers = timers;
    this.clock = clock;
  }

  get size(): number {
    return this.live.size;
  }

  /** Run `fire` at `at` (ms since epoch) unless `cancel(id)` comes first. Replaces an earlier one. */
  add(id: string, at: number, fire: () => void): void {
    const seq = ++this.seq;
    this.live.set(id, { seq, fire });
    this.push({ at, id, seq });
    if (at < this.armedAt) this.arm(at);
  }

  cancel(id: string): void {
    this.live.delete(id);
    // The heap entry stays until it reaches the top; with nothing live, stop the timer at once.
    if (this.live.size === 0) {
      this.heap.length = 0;
      this.disarm();
    }
  }

  private arm(at: number): void {
    this.disarm();
    this.armedAt = at;
    this.timer = this.timers.set(() => this.expire(), Math.max(0, at - this.clock.now()));
  }

  private disarm(): void {
    if (this.timer !== null) this.timers.clear(this.timer);
    this.timer = null;
    this.armedAt = Infinity;
  }

  private expire(): void {
    this.timer = null;
    this.armedAt = Infinity;
    const now = this.clock.now();
    while (this.heap.length > 0) {
      const top = this.heap[0]!;
      const entry = this.live.get(top.id);
      if (!entry || entry.seq !== top.seq) {
        this.pop();
        continue;
      }
      if (top.at > now) break;
      this.pop();
      this.live.delete(top.id);
      entry.fire();
    }
    const next = this.heap[0];
    if (next) this.arm(next.at);
  }

  private push(e: Entry): void {
    const h = this.heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (h[parent]!.at <= e.at) break;
      h[i] = h[parent]!;
      i = parent;
    }
    h[i] = e;
  }

  private pop(): void {
    const h = this.heap;
    const last = h.pop()!;
    if (h.length === 0) return;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= h.length) break;
      const r = l + 1;
      const child = r < h.length && h[r]!.at < h[l]!.at ? r : l;
      if (h[child]!.at >= last.at) break;
      h[i] = h[child]!;
      i = child;
    }
    h[i] = last;
  }
}
