// How the console names an agent session wherever one shows up (the agent screen's list, state
// scopes and keys, dead letters): its title or first text and a short id, never a bare uuid.
import type { SessionSummary as StoredSessionSummary } from "@iii-edge/protocol/harness";
import type { BrowserClient } from "@iii-edge/sdk-browser";
import { useEffect, useState } from "preact/hooks";

/** A `session-tree::list` line, with the text of its first message (read separately: the listing
 * has only the last one). */
export type SessionSummary = StoredSessionSummary & { first_text?: string };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Enough of an id to tell sessions apart: a uuid's first block, or the end of a longer id (the
 * console's own ids end in their time and a random part). */
export function shortId(id: string): string {
  if (UUID.test(id)) return id.slice(0, 8);
  return id.length > 14 ? `…${id.slice(-10)}` : id;
}

/** The session's title, else its first text, else its last message, else "session <short id>". */
export function sessionTitle(
  s: Pick<SessionSummary, "display_name" | "first_text" | "last_message_summary"> | undefined,
  id: string,
): string {
  const text = s?.display_name ?? s?.first_text ?? s?.last_message_summary;
  if (text) return text.length > 40 ? `${text.slice(0, 39)}…` : text;
  return `session ${shortId(id)}`;
}

/** Sessions read for naming (one page, most recently updated first). */
export const NAMED_SESSIONS = 30;

/** A session's first text never changes: read once per session and page load. */
const firstTexts = new Map<string, Promise<string | undefined>>();

function firstText(iii: BrowserClient, session_id: string): Promise<string | undefined> {
  let p = firstTexts.get(session_id);
  if (!p) {
    p = iii
      .trigger<unknown, { messages: { message: { role: string; content: unknown } }[] } | undefined>({
        function_id: "session-tree::messages",
        payload: { session_id, limit: 1 },
      })
      .then((r) => {
        const m = r?.messages[0]?.message;
        if (m?.role !== "user") return undefined;
        const c = m.content;
        const text =
          typeof c === "string"
            ? c
            : Array.isArray(c)
              ? c.map((b: { type?: string; text?: string }) => (b?.type === "text" ? (b.text ?? "") : "")).join("")
              : "";
        return text.trim() || undefined;
      })
      .catch(() => {
        firstTexts.delete(session_id); // read again next time
        return undefined;
      });
    firstTexts.set(session_id, p);
  }
  return p;
}

/** Each listed session with its first text. */
export async function withFirstTexts(iii: BrowserClient, sessions: SessionSummary[]): Promise<SessionSummary[]> {
  const texts = await Promise.all(sessions.map((s) => (s.display_name ? undefined : firstText(iii, s.session_id))));
  return sessions.map((s, i) => (texts[i] ? { ...s, first_text: texts[i] } : s));
}

/** Session id → summary, for the screens that only need names; re-read when `tick` changes. */
export function useSessionNames(iii: BrowserClient, online: boolean, tick: unknown = 0): Map<string, SessionSummary> {
  const [names, setNames] = useState<Map<string, SessionSummary>>(new Map());
  useEffect(() => {
    if (!online) return;
    let alive = true;
    iii
      .trigger<unknown, { sessions: SessionSummary[] }>({ function_id: "session-tree::list", payload: { limit: NAMED_SESSIONS } })
      .then((r) => withFirstTexts(iii, r?.sessions ?? []))
      .then(
        (r) => alive && setNames(new Map(r.map((s) => [s.session_id, s]))),
        // No session storage on this engine: ids are shown as they are.
        () => undefined,
      );
    return () => {
      alive = false;
    };
  }, [iii, online, tick]);
  return names;
}
