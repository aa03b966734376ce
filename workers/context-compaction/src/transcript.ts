// The session as the model reads it, from session storage: the active path (paged) and the latest
// compaction on it, assembled with protocol's compactionView (the orchestrator assembles the same).
import { compactionView, type AgentMessage, type CompactionRecord, type PathMessage } from "@iii-edge/protocol/harness";
import { call, type Trigger } from "./calls.ts";

/** Page size and the most pages one read takes (50 000 messages: far past any window). */
export const TRANSCRIPT_PAGE_SIZE = 500;
export const TRANSCRIPT_MAX_PAGES = 100;

/** A message of the path as `session-tree::messages` pages it (its revision left out). */
export type PathEntry = Pick<PathMessage, "entry_id" | "message">;

export async function readPath(trigger: Trigger, sid: string): Promise<PathEntry[]> {
  const out: PathEntry[] = [];
  let cursor: unknown;
  for (let page = 0; page < TRANSCRIPT_MAX_PAGES; page++) {
    const payload: Record<string, unknown> = { session_id: sid, limit: TRANSCRIPT_PAGE_SIZE };
    if (typeof cursor === "string" && cursor !== "") payload.cursor = cursor;
    const r = await call<{ messages?: unknown; next_cursor?: unknown }>(trigger, "session-tree::messages", payload);
    const messages = Array.isArray(r?.messages) ? r.messages : [];
    for (const m of messages) {
      const e = m as { entry_id?: unknown; message?: unknown };
      if (e && typeof e.entry_id === "string" && e.message && typeof e.message === "object")
        out.push({ entry_id: e.entry_id, message: e.message as AgentMessage });
    }
    cursor = r?.next_cursor;
    if (typeof cursor !== "string" || cursor === "" || messages.length === 0) return out;
  }
  throw new Error(`the transcript of ${sid} is longer than ${TRANSCRIPT_MAX_PAGES} pages of ${TRANSCRIPT_PAGE_SIZE}`);
}

export async function latestCompaction(trigger: Trigger, sid: string): Promise<CompactionRecord | null> {
  const r = await call<{ compactions?: CompactionRecord[] }>(trigger, "session-tree::compactions", { session_id: sid, limit: 1 });
  return r?.compactions?.at(-1) ?? null;
}

export interface SessionView {
  latest: CompactionRecord | null;
  /** The messages after the summary (what the tail is chosen from and pruning scans). */
  messages: PathEntry[];
  summary: PathEntry | null;
}

export async function readView(trigger: Trigger, sid: string): Promise<SessionView> {
  const [path, latest] = await Promise.all([readPath(trigger, sid), latestCompaction(trigger, sid)]);
  const v = compactionView(path, latest);
  return { latest, messages: v.messages, summary: v.summary };
}
