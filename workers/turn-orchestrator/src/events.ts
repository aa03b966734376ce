// `agent::events` (docs/harness-contracts.md §4.1): one stream group per session, item ids `<sid>-<seq>` from
// a persisted counter (unique and ordered across restarts). A step reserves a block of sequence
// numbers with one counter write and numbers its events from it; ids may skip numbers between
// steps — readers page by id (`stream::list_items`), never by counting. Emission is best effort — a
// lost event is recoverable (UIs re-read state), a wedged FSM is not.
//
// Writes go out one batch at a time, so live followers see them in id order: whatever was emitted
// while nothing was being written goes at once (a quiet stream of deltas, one by one, as soon as
// each comes), and whatever is emitted while a write is in flight waits for the next one — so a
// step's events after its save cost one `stream::set_many`, not one engine call each.
import { MAX_FRAME_BYTES, MAX_STREAM_SET_MANY_ITEMS } from "@iii-edge/protocol";
import { AGENT_EVENTS_STREAM, TURN_END_STREAM, type AgentEvent } from "@iii-edge/protocol/harness";
import { errorCode, errorText, type Trigger } from "./calls.ts";
import { EVENT_ID_BLOCK, SCOPE_EVENT_COUNTER, STORAGE_TIMEOUT_MS } from "./constants.ts";
import { eventItemId } from "./record.ts";

/** Event JSON one batch carries: half a frame leaves room for the call's envelope, and a batch of
 * streamed updates (each carries the partial message) is cut well before the frame bound. An event
 * bigger than this goes alone. */
export const EVENT_BATCH_BYTES = MAX_FRAME_BYTES / 2;

/** After an engine answered that it has no `stream::set_many`, how long this process writes events
 * one `stream::set` each before it asks again: a process talks to one engine, which only gains the
 * function by a restart, and a step's first batch would otherwise pay a refused call every time. */
export const SET_MANY_RECHECK_MS = 60_000;
/** Until when `stream::set_many` is known to be missing (Date.now() ms; 0: not known). */
let setManyMissingUntil = 0;

/** An event's JSON length; one that cannot be serialised counts as a batch of its own (its write
 * fails alone, as it would have by itself). */
function jsonLength(event: AgentEvent): number {
  try {
    return JSON.stringify(event).length;
  } catch {
    return EVENT_BATCH_BYTES;
  }
}

interface Item {
  item_id: string;
  data: AgentEvent;
}

export class EventLog {
  private readonly trigger: Trigger;
  private readonly sid: string;
  /** Emitted, not yet taken into a write. */
  private pending: AgentEvent[] = [];
  /** How many of `pending` the next batch may take at most (cut()), if bounded. */
  private cutAt: number | undefined;
  /** The writes of what is pending, while any are going on. */
  private draining: Promise<void> | undefined;
  /** The next sequence number of the reserved block, and the block's last one. */
  private next = 1;
  private last = 0;
  /** The counter write reserving the next block, while one is in flight. */
  private reserving: Promise<void> | undefined;

  constructor(trigger: Trigger, sessionId: string) {
    this.trigger = trigger;
    this.sid = sessionId;
  }

  /** Queue `event` (written in order, in the background); `flush` waits for the queue. */
  emit(event: AgentEvent): void {
    this.pending.push(event);
    this.draining ??= this.drain();
  }

  /**
   * End the next batch after what is pending now: what is emitted next waits for the write after.
   * For the answer's first frame, which should reach the UI as soon as it can even when the rest of
   * the answer came with it (a provider writing a chunk's events as one item): alone, its write is
   * small and quick.
   */
  cut(): void {
    this.cutAt = this.pending.length || undefined;
  }

  flush(): Promise<void> {
    return this.draining ?? Promise.resolve();
  }

  private async drain(): Promise<void> {
    // One microtask first: the events a step emits in a row after its save are all pending by then.
    await Promise.resolve();
    try {
      while (this.pending.length > 0) await this.write(this.take());
    } finally {
      this.draining = undefined;
    }
  }

  /** The next batch: pending events in order, up to the engine's item bound and EVENT_BATCH_BYTES. */
  private take(): AgentEvent[] {
    let n = 0;
    let bytes = 0;
    const most = Math.min(this.pending.length, MAX_STREAM_SET_MANY_ITEMS, this.cutAt ?? Number.POSITIVE_INFINITY);
    while (n < most) {
      bytes += jsonLength(this.pending[n]);
      if (n > 0 && bytes > EVENT_BATCH_BYTES) break;
      n++;
    }
    if (this.cutAt !== undefined) this.cutAt = this.cutAt > n ? this.cutAt - n : undefined;
    return this.pending.splice(0, n);
  }

  /**
   * Reserve the next block of ids now, in the background, unless one is left: a step about to
   * stream calls this beside its reads, so its first delta does not wait for the counter write. A
   * failure here is the first write's to report (it asks again).
   */
  reserve(): void {
    if (this.next > this.last) this.block().catch(() => {});
  }

  /** The reservation in flight, or a new one: one at a time, so blocks are taken in order. */
  private block(): Promise<void> {
    this.reserving ??= this.reserveBlock().finally(() => {
      this.reserving = undefined;
    });
    return this.reserving;
  }

  /** The next sequence number, reserving a new block when this one is used up. */
  private async seq(): Promise<number> {
    if (this.next > this.last) await this.block();
    return this.next++;
  }

  private async reserveBlock(): Promise<void> {
    const counter = await this.trigger<unknown, { new_value?: { seq?: unknown } }>({
      function_id: "state::update",
      payload: { scope: SCOPE_EVENT_COUNTER, key: this.sid, ops: [{ type: "increment", path: "seq", by: EVENT_ID_BLOCK }] },
      timeoutMs: STORAGE_TIMEOUT_MS,
    });
    const end = counter?.new_value?.seq;
    if (typeof end !== "number" || !Number.isInteger(end) || end < EVENT_ID_BLOCK)
      throw new Error(`event counter answered ${JSON.stringify(counter?.new_value)}`);
    this.next = end - EVENT_ID_BLOCK + 1;
    this.last = end;
  }

  private async write(batch: AgentEvent[]): Promise<void> {
    try {
      const items: Item[] = [];
      for (const data of batch) items.push({ item_id: eventItemId(this.sid, await this.seq()), data });
      // Compaction wakes once per round from this second stream (§7 item 3), same item ids.
      const ends = items.filter((i) => i.data.type === "turn_end");
      if (Date.now() >= setManyMissingUntil) {
        try {
          await this.setMany(AGENT_EVENTS_STREAM, items);
          if (ends.length > 0) await this.setMany(TURN_END_STREAM, ends);
          return;
        } catch (e) {
          if (errorCode(e) !== "function_not_found") throw e;
          // An engine without `stream::set_many` (another iii engine): per event for a while.
          setManyMissingUntil = Date.now() + SET_MANY_RECHECK_MS;
        }
      }
      for (const item of items) await this.writeOne(item);
    } catch (e) {
      const types = batch.map((e) => e.type).join(", ");
      console.warn(`turn-orchestrator: events of ${this.sid} not written (${types}): ${errorText(e)}`);
    }
  }

  private setMany(stream_name: string, items: Item[]): Promise<unknown> {
    return this.trigger({
      function_id: "stream::set_many",
      payload: { stream_name, group_id: this.sid, items },
      timeoutMs: STORAGE_TIMEOUT_MS,
    });
  }

  /** One event as before `stream::set_many`: its own calls, its failure its own. */
  private async writeOne({ item_id, data }: Item): Promise<void> {
    try {
      await this.trigger({
        function_id: "stream::set",
        payload: { stream_name: AGENT_EVENTS_STREAM, group_id: this.sid, item_id, data },
        timeoutMs: STORAGE_TIMEOUT_MS,
      });
      if (data.type === "turn_end")
        await this.trigger({
          function_id: "stream::set",
          payload: { stream_name: TURN_END_STREAM, group_id: this.sid, item_id, data },
          timeoutMs: STORAGE_TIMEOUT_MS,
        });
    } catch (e) {
      console.warn(`turn-orchestrator: event ${data.type} of ${this.sid} not written: ${errorText(e)}`);
    }
  }
}
