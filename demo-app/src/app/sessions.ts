// How the console names an agent session wherever one shows up (the agent screen's list, state
// scopes and keys, dead letters): its title or first text and a short id, never a bare uuid.
import type { BrowserClient } from "@iii-edge/sdk-browser";
import { useEffect, useState } from "preact/hooks";

export interface SessionSummary {
  session_id: string;
  created_at: number;
  updated_at: number;
  entry_count: number;
  display_name?: string;
  last_message_summary?: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Enough of an id to tell sessions apart: a uuid's first block, or the end of a longer id (the
 * console's own ids end in their time and a random part). */
export function shortId(id: string): string {
  if (UUID.test(id)) return id.slice(0, 8);
  return id.length > 14 ? `…${id.slice(-10)}` : id;
}

/** The session's title, else its first words, else "session <short id>". */
export function sessionTitle(s: Pick<SessionSummary, "session_id" | "display_name" | "last_message_summary"> | undefined, id: string): string {
  const text = s?.display_name ?? s?.last_message_summary;
  if (text) return text.length > 40 ? `${text.slice(0, 39)}…` : text;
  return `session ${shortId(id)}`;
}

/** Sessions read for naming (one page, most recently updated first). */
export const NAMED_SESSIONS = 100;

/** Session id → summary, for the screens that only need names; re-read when `tick` changes. */
export function useSessionNames(iii: BrowserClient, online: boolean, tick: unknown = 0): Map<string, SessionSummary> {
  const [names, setNames] = useState<Map<string, SessionSummary>>(new Map());
  useEffect(() => {
    if (!online) return;
    let alive = true;
    iii.trigger<unknown, { sessions: SessionSummary[] }>({ function_id: "session-tree::list", payload: { limit: NAMED_SESSIONS } }).then(
      (r) => alive && setNames(new Map((r?.sessions ?? []).map((s) => [s.session_id, s]))),
      // No session storage on this engine: ids are shown as they are.
      () => undefined,
    );
    return () => {
      alive = false;
    };
  }, [iii, online, tick]);
  return names;
}
