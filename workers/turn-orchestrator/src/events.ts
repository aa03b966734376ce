// `agent::events` (spec §4.1): one stream group per session, item ids `<sid>-<seq>` from a
// persisted counter (unique and ordered across restarts). Emission is best effort — a lost event
// is recoverable (UIs re-read state), a wedged FSM is not — and writes go out one after another so
// the ids follow the order the events were emitted in.
import { AGENT_EVENTS_STREAM, TURN_END_STREAM, type AgentEvent } from "@iii-edge/protocol/harness";
import { errorText, type Trigger } from "./calls.ts";
import { SCOPE_EVENT_COUNTER, STORAGE_TIMEOUT_MS } from "./constants.ts";
import { eventItemId } from "./record.ts";

export class EventLog {
  private readonly trigger: Trigger;
  private readonly sid: string;
  private chain: Promise<void> = Promise.resolve();

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

  private async write(event: AgentEvent): Promise<void> {
    try {
      const counter = await this.trigger<unknown, { new_value?: { seq?: unknown } }>({
        function_id: "state::update",
        payload: { scope: SCOPE_EVENT_COUNTER, key: this.sid, ops: [{ type: "increment", path: "seq", by: 1 }] },
        timeoutMs: STORAGE_TIMEOUT_MS,
      });
      const seq = counter?.new_value?.seq;
      if (typeof seq !== "number" || !Number.isInteger(seq) || seq < 1) throw new Error(`event counter answered ${JSON.stringify(counter?.new_value)}`);
      const item_id = eventItemId(this.sid, seq);
      await this.trigger({ function_id: "stream::set", payload: { stream_name: AGENT_EVENTS_STREAM, group_id: this.sid, item_id, data: event }, timeoutMs: STORAGE_TIMEOUT_MS });
      // Compaction wakes once per round from this second stream (§7 item 3), same item id.
      if (event.type === "turn_end") {
        await this.trigger({ function_id: "stream::set", payload: { stream_name: TURN_END_STREAM, group_id: this.sid, item_id, data: event }, timeoutMs: STORAGE_TIMEOUT_MS });
      }
    } catch (e) {
      console.warn(`turn-orchestrator: event ${event.type} of ${this.sid} not written: ${errorText(e)}`);
    }
  }
}
