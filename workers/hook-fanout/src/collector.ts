// The in-process collectors (docs/harness-contracts.md §6.3): one per event being collected, keyed by
// `event_id`. The `stream` trigger on `agent::hook_reply` hands each reply to the collector of its
// group, which wakes the waiting `publish_collect` — no polling. Replies are de-duplicated by item
// id (a subscriber's retry overwrites its item; an `update` replaces the reply, it does not add
// one).
import { HOOK_MAX_REPLIES } from "@iii-edge/protocol/harness";

/** Events whose collection ended that this process still recognises, so that a reply arriving
 * after its collector resolved is deleted rather than left in the stream: a few minutes of hooked
 * calls at any realistic rate; older ones are forgotten (their late replies stay, harmlessly). */
export const FINISHED_EVENTS_REMEMBERED = 1_024;

export type WaitOutcome = "expected" | "quiescence" | "deadline";

export class ReplyCollector {
  /** item id → reply, in arrival order (a Map keeps insertion order; an update keeps its place). */
  readonly replies = new Map<string, unknown>();
  #changed: (() => void) | undefined;

  /** Take one reply; false when the collector is full and it was a new item. */
  add(itemId: string, data: unknown): boolean {
    if (!this.replies.has(itemId) && this.replies.size >= HOOK_MAX_REPLIES) return false;
    const isNew = !this.replies.has(itemId);
    this.replies.set(itemId, data);
    if (isNew) this.#changed?.();
    return true;
  }

  /**
   * Resolves on the first of: `expected` replies collected; `quiescenceMs` since the last new reply
   * (only once there is one); `deadlineMs` from now. With `expected` undefined only the last two apply.
   */
  wait(expected: number | undefined, quiescenceMs: number, deadlineMs: number): Promise<WaitOutcome> {
    return new Promise((resolve) => {
      let quiet: ReturnType<typeof setTimeout> | undefined;
      const deadline = setTimeout(() => done("deadline"), Math.max(0, deadlineMs));
      const done = (outcome: WaitOutcome) => {
        clearTimeout(deadline);
        clearTimeout(quiet);
        this.#changed = undefined;
        resolve(outcome);
      };
      const check = () => {
        if (expected !== undefined && this.replies.size >= expected) return done("expected");
        if (this.replies.size === 0) return;
        clearTimeout(quiet);
        quiet = setTimeout(() => done("quiescence"), quiescenceMs);
      };
      this.#changed = check;
      check();
    });
  }
}

/** The open collectors of this process and the events it recently finished. */
export class Collectors {
  readonly #open = new Map<string, ReplyCollector>();
  readonly #finished = new Set<string>();

  open(eventId: string): ReplyCollector {
    const c = new ReplyCollector();
    this.#open.set(eventId, c);
    return c;
  }

  /** A reply the trigger delivered: "collected" by an open collector, "late" for an event this
   * process finished (the caller deletes it), "unknown" otherwise (another process's, or another
   * isolate's in a Worker: left for that collector's own read). */
  deliver(eventId: string, itemId: string, data: unknown): "collected" | "late" | "unknown" {
    const c = this.#open.get(eventId);
    if (c) {
      c.add(itemId, data);
      return "collected";
    }
    return this.#finished.has(eventId) ? "late" : "unknown";
  }

  close(eventId: string): void {
    this.#open.delete(eventId);
    this.#finished.add(eventId);
    // A Set iterates in insertion order: the first entry is the oldest.
    if (this.#finished.size > FINISHED_EVENTS_REMEMBERED) this.#finished.delete(this.#finished.values().next().value!);
  }

  get openCount(): number {
    return this.#open.size;
  }
}
