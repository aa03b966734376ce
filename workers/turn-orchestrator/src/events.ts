// `agent::events` (docs/harness-contracts.md §4.1): one stream group per session, item ids `<sid>-<seq>` from
// a persisted counter (unique and ordered across restarts). A step reserves a block of sequence
// numbers with one counter write and numbers its events from it, so an event costs one engine call
// (its `stream::set`), not two; ids may skip numbers between steps — readers page by id
// (`stream::list_items`), never by counting. Emission is best effort — a lost event is recoverable
// (UIs re-read state), a wedged FSM is not — and writes go out one after another so live followers
// see them in id order.
import { AGENT_EVENTS_STREAM, TURN_END_STREAM, type AgentEvent } from "@iii-edge/protocol/harness";
import { errorText, type Trigger } from "./calls.ts";
import { EVENT_ID_BLOCK, SCOPE_EVENT_COUNTER, STORAGE_TIMEOUT_MS } from "./constants.ts";
import { eventItemId } from "./record.ts";

export class EventLog {
  private readonly trigger: Trigger;
  private readonly sid: string;
  private chain: Promise<void> = Promise.resolve();
  /** The next sequence number of the reserved block, and the block's last one. */
  private next = 1;
  private last = 0;

  constructor(trigger: Trigger, sessionId: string) {
    this.trigger = trigger;
    this.sid = sessionId;
  }

  /** Queue `event` (written in order, in the background); `flush` waits for the queue. */
  emit(event: AgentEvent): void {
    this.chain = this.chain.then(() => this.write(event));
  }

  flush(): Promise<void> {
    return this.chain;
  }

  /** The next sequence number, reserving a new block when this one is used up. */
  private async seq(): Promise<number> {
    if (this.next > this.last) {
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
    return this.next++;
  }

  private async write(event: AgentEvent): Promise<void> {
    try {
      const seq = await this.seq();
      const item_id = eventItemId(this.sid, seq);
      await this.trigger({
        function_id: "stream::set",
        payload: { stream_name: AGENT_EVENTS_STREAM, group_id: this.sid, item_id, data: event },
        timeoutMs: STORAGE_TIMEOUT_MS,
      });
      // Compaction wakes once per round from this second stream (§7 item 3), same item id.
      if (event.type === "turn_end") {
        await this.trigger({
          function_id: "stream::set",
          payload: { stream_name: TURN_END_STREAM, group_id: this.sid, item_id, data: event },
          timeoutMs: STORAGE_TIMEOUT_MS,
        });
      }
    } catch (e) {
      console.warn(`turn-orchestrator: event ${event.type} of ${this.sid} not written: ${errorText(e)}`);
    }
  }
}
