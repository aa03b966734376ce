// The transcript lives in session storage (docs/harness-contracts.md §5), reached by function id. Every entry
// the orchestrator writes has a deterministic id, so a replayed step appends nothing twice.
import type { AgentMessage, PathMessage } from "@iii-edge/protocol/harness";
import { callRequired, type Trigger } from "./calls.ts";
import { APPEND_MANY_MAX, TRANSCRIPT_MAX_PAGES, TRANSCRIPT_PAGE_SIZE } from "./constants.ts";

/** An entry as session-storage pages and appends it (its revision left out). */
export type Entry = Pick<PathMessage, "entry_id" | "message">;

/** Create the session in storage if new, recording its owner there too (its listings filter by it). */
export async function ensureSession(trigger: Trigger, sid: string, owner?: string): Promise<void> {
  await callRequired(trigger, "session-tree::ensure", owner === undefined ? { session_id: sid } : { session_id: sid, owner });
}

/** Append in order, chained (one round trip per APPEND_MANY_MAX entries); ids already present
 * append nothing. */
export async function appendMany(trigger: Trigger, sid: string, entries: Entry[]): Promise<void> {
  for (let i = 0; i < entries.length; i += APPEND_MANY_MAX) {
    await callRequired(trigger, "session-tree::append_many", { session_id: sid, entries: entries.slice(i, i + APPEND_MANY_MAX) });
  }
}

/** Append one entry; false when its id was already there (a replay). */
export async function appendOne(trigger: Trigger, sid: string, entry: Entry): Promise<boolean> {
  const r = await callRequired<{ appended?: unknown }>(trigger, "session-tree::append", {
    session_id: sid,
    entry_id: entry.entry_id,
    message: entry.message,
  });
  return r?.appended !== false;
}

export async function updateMessage(trigger: Trigger, sid: string, entry: Entry): Promise<void> {
  await callRequired(trigger, "session-tree::update_message", { session_id: sid, entry_id: entry.entry_id, message: entry.message });
}

/** The active path, oldest first, read page by page. */
export async function readTranscript(trigger: Trigger, sid: string): Promise<Entry[]> {
  const out: Entry[] = [];
  let cursor: unknown;
  for (let page = 0; page < TRANSCRIPT_MAX_PAGES; page++) {
    const payload: Record<string, unknown> = { session_id: sid, limit: TRANSCRIPT_PAGE_SIZE };
    if (cursor !== undefined && cursor !== null) payload.cursor = cursor;
    const r = await callRequired<{ messages?: unknown; next_cursor?: unknown }>(trigger, "session-tree::messages", payload);
    const messages = Array.isArray(r?.messages) ? r.messages : [];
    for (const m of messages) {
      if (m && typeof m === "object" && "message" in m) {
        const e = m as { entry_id?: unknown; message: unknown };
        if (e.message && typeof e.message === "object")
          out.push({ entry_id: String(e.entry_id ?? ""), message: e.message as AgentMessage });
      }
    }
    cursor = r?.next_cursor;
    if (cursor === undefined || cursor === null || cursor === "" || messages.length === 0) return out;
  }
  throw new Error(`transcript of ${sid} is longer than ${TRANSCRIPT_MAX_PAGES} pages of ${TRANSCRIPT_PAGE_SIZE}`);
}
