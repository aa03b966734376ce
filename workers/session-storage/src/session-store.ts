// Sessions as a branching tree (docs/harness-contracts.md §5) and per-session inboxes, over one SqlStore.
// Every operation is one batch: one round trip, atomic, and consistent with concurrent writers.
import { IIIError, MAX_RESULT_BYTES } from "@iii-edge/protocol";
import type { AgentMessage, PathMessage, SessionInfo, SessionSummary } from "@iii-edge/protocol/harness";
import { MAX_APPEND_MANY, MAX_LIST_LIMIT, MAX_PAGE_ENTRIES } from "@iii-edge/protocol/harness";
import { sql, type SqlRow, type SqlStatement, type SqlStore } from "./sql-store.ts";
import { withSchema } from "./schema.ts";

/** Largest message stored (its JSON, UTF-8): a page of one such message still fits one frame with
 * its envelope (MAX_RESULT_BYTES), and D1 holds at most 2 MB in a row. */
export const MAX_MESSAGE_BYTES = 1_000_000;
/** Entries one session may hold: every path walk is bounded by it. A long agent session is a few
 * thousand entries; compaction keeps the active path short. */
export const MAX_SESSION_ENTRIES = 100_000;
/** Default page of `messages` (the largest: MAX_PAGE_ENTRIES). */
export const DEFAULT_PAGE_ENTRIES = 200;
/** Bytes of messages one page carries at most (it always carries at least one): the result has to
 * fit one frame, with room for the entry ids and the cursor. */
export const MAX_PAGE_BYTES = MAX_RESULT_BYTES - 32 * 1024;
/** Default page of `list` (the largest: MAX_LIST_LIMIT). */
export const DEFAULT_LIST_LIMIT = 50;
/** Items one inbox holds: steering messages wait for the next turn boundary, a person does not
 * queue hundreds; past this a push is refused (`inbox_full`). */
export const MAX_INBOX_ITEMS = 256;
/** Largest inbox item (JSON, UTF-8): a pasted message. */
export const MAX_INBOX_ITEM_BYTES = 256 * 1024;
/** Bytes one inbox holds in all: a drain answers the whole inbox, which has to fit one frame. */
export const MAX_INBOX_BYTES = 768 * 1024;
/** Length of `last_message_summary`, in code points: a line in a session list. */
export const SUMMARY_CODE_POINTS = 120;

export type EntryKind = "message" | "custom_message";

export type { PathMessage, SessionInfo, SessionSummary };
export { MAX_APPEND_MANY, MAX_LIST_LIMIT, MAX_PAGE_ENTRIES };

export interface SessionStoreOptions {
  now?: () => number;
  newId?: () => string;
}

const encoder = new TextEncoder();
const byteLength = (s: string): number => encoder.encode(s).byteLength;

export function kindOf(message: AgentMessage): EntryKind {
  return message.role === "custom" ? "custom_message" : "message";
}

/** A one-line summary of a user or assistant message's text, or null (the previous one stays). */
export function summarize(message: AgentMessage): string | null {
  if (message.role !== "user" && message.role !== "assistant") return null;
  const content = message.content as unknown;
  const text =
    typeof content === "string"
      ? content
      : Array.isArray(content)
        ? content
            .filter(
              (b): b is { type: "text"; text: string } =>
                typeof b === "object" && b !== null && b.type === "text" && typeof b.text === "string",
            )
            .map((b) => b.text)
            .join(" ")
        : "";
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat === "") return null;
  const points = Array.from(flat);
  return points.length > SUMMARY_CODE_POINTS ? `${points.slice(0, SUMMARY_CODE_POINTS).join("")}…` : flat;
}

/** Page position in a path: the leaf it belongs to and the depth the next page starts at. Opaque
 * to callers (base64url JSON); a path from a fixed leaf never changes, so a cursor stays valid. */
interface Cursor {
  s: string;
  l: string;
  d: number;
}
function encodeCursor(c: Cursor): string {
  let bin = "";
  for (const b of encoder.encode(JSON.stringify(c))) bin += String.fromCharCode(b);
  return btoa(bin).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}
function decodeCursor(text: string, sessionId: string): Cursor {
  try {
    const bin = atob(text.replaceAll("-", "+").replaceAll("_", "/"));
    const c = JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (ch) => ch.charCodeAt(0)))) as Partial<Cursor>;
    if (typeof c.s === "string" && typeof c.l === "string" && Number.isSafeInteger(c.d) && (c.d as number) >= 0) {
      if (c.s !== sessionId) throw new Error("cursor of another session");
      return c as Cursor;
    }
  } catch {
    // fall through
  }
  throw new IIIError("invalid_arguments", "cursor is not one this session's messages returned");
}

const num = (v: unknown): number => (typeof v === "number" ? v : Number(v ?? 0));
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

function sessionSummary(row: SqlRow): SessionSummary {
  const s: SessionSummary = {
    session_id: String(row.session_id),
    created_at: num(row.created_at),
    updated_at: num(row.updated_at),
    entry_count: num(row.entry_count),
  };
  const name = str(row.display_name);
  if (name !== undefined) s.display_name = name;
  const summary = str(row.last_message_summary);
  if (summary !== undefined) s.last_message_summary = summary;
  return s;
}

export interface AppendInput {
  entry_id?: string;
  message: AgentMessage;
}

export class SessionStore {
  private readonly db: SqlStore;
  private readonly now: () => number;
  private readonly newId: () => string;

  constructor(store: SqlStore, options: SessionStoreOptions = {}) {
    this.db = withSchema(store);
    this.now = options.now ?? Date.now;
    this.newId = options.newId ?? (() => `e_${crypto.randomUUID()}`);
  }

  // ---------------------------------------------------------------- sessions

  async ensure(sessionId: string, meta: { display_name?: string; cwd?: string } = {}): Promise<{ session_id: string; created: boolean }> {
    const t = this.now();
    const [rows] = await this.db.batch([
      sql(
        `INSERT INTO harness_sessions (session_id, display_name, cwd, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (session_id) DO NOTHING RETURNING session_id`,
        sessionId,
        meta.display_name ?? null,
        meta.cwd ?? null,
        t,
        t,
      ),
    ]);
    return { session_id: sessionId, created: rows.length > 0 };
  }

  async get(sessionId: string): Promise<SessionInfo | null> {
    const [rows, leaves] = await this.db.batch([
      sql(
        `SELECT s.*, o.kind AS origin_kind, o.source_session_id AS origin_source, o.from_entry_id AS origin_entry
         FROM harness_sessions s LEFT JOIN harness_session_origins o ON o.session_id = s.session_id WHERE s.session_id = ?`,
        sessionId,
      ),
      sql(
        `SELECT COUNT(*) AS n FROM harness_session_entries e WHERE e.session_id = ?
         AND NOT EXISTS (SELECT 1 FROM harness_session_entries c WHERE c.session_id = e.session_id AND c.parent_id = e.entry_id)`,
        sessionId,
      ),
    ]);
    const row = rows[0];
    if (!row) return null;
    const info: SessionInfo = { ...sessionSummary(row), branch_count: num(leaves[0]?.n), leaf_id: str(row.leaf_id) ?? null };
    const cwd = str(row.cwd);
    if (cwd !== undefined) info.cwd = cwd;
    const originKind = str(row.origin_kind);
    if ((originKind === "fork" || originKind === "clone") && typeof row.origin_source === "string") {
      info.origin = { kind: originKind, source_session_id: row.origin_source, from_entry_id: str(row.origin_entry) ?? null };
    }
    return info;
  }

  /** Sessions by last update; with `owner`, only the ones it owns (and `total` counts those). */
  async list(opts: {
    limit?: number;
    offset?: number;
    order?: "asc" | "desc";
    owner?: string;
  }): Promise<{ sessions: SessionSummary[]; total: number }> {
    const dir = opts.order === "asc" ? "ASC" : "DESC";
    const ownerArg: string[] = opts.owner !== undefined ? [opts.owner] : [];
    const where = ownerArg.length ? "WHERE session_id IN (SELECT session_id FROM harness_session_owners WHERE owner = ?)" : "";
    const [count, rows] = await this.db.batch([
      sql(`SELECT COUNT(*) AS n FROM harness_sessions ${where}`, ...ownerArg),
      sql(
        `SELECT session_id, display_name, created_at, updated_at, entry_count, last_message_summary FROM harness_sessions ${where}
         ORDER BY updated_at ${dir}, session_id ${dir} LIMIT ? OFFSET ?`,
        ...ownerArg,
        opts.limit ?? DEFAULT_LIST_LIMIT,
        opts.offset ?? 0,
      ),
    ]);
    return { sessions: rows.map(sessionSummary), total: num(count[0]?.n) };
  }

  /** Record who owns a session (the first owner stays). */
  async setOwner(sessionId: string, owner: string): Promise<void> {
    await this.db.batch([
      sql("INSERT INTO harness_session_owners (session_id, owner) VALUES (?, ?) ON CONFLICT (session_id) DO NOTHING", sessionId, owner),
    ]);
  }

  // ---------------------------------------------------------------- the tree

  /** Append `entries` chained to each other under `parentId` (default: the active leaf); the last one
   * becomes the leaf. An entry whose id exists is left as it is (`appended` counts the new ones). */
  async appendMany(
    sessionId: string,
    entries: readonly AppendInput[],
    parentId?: string,
  ): Promise<{ entry_ids: string[]; appended: number; inserted: boolean[] }> {
    if (entries.length === 0) {
      const [rows] = await this.db.batch([sql("SELECT 1 AS found FROM harness_sessions WHERE session_id = ?", sessionId)]);
      if (!rows[0]) throw new IIIError("not_found", `session ${sessionId} does not exist (session-tree::ensure creates it)`);
      return { entry_ids: [], appended: 0, inserted: [] };
    }
    if (entries.length > MAX_APPEND_MANY) throw new IIIError("invalid_arguments", `at most ${MAX_APPEND_MANY} entries per append`);
    const t = this.now();
    const ids = entries.map((e) => e.entry_id ?? this.newId());
    if (new Set(ids).size !== ids.length) throw new IIIError("invalid_arguments", "entry ids of one append must differ");
    const bodies = entries.map((e, i) => {
      const body = JSON.stringify(e.message);
      if (byteLength(body) > MAX_MESSAGE_BYTES)
        throw new IIIError("value_too_large", `entries[${i}].message is larger than ${MAX_MESSAGE_BYTES} bytes`);
      return body;
    });
    let summary: string | null = null;
    for (const e of entries) summary = summarize(e.message) ?? summary;

    const statements: SqlStatement[] = entries.map((e, i) => {
      // The first entry hangs under the given parent or the leaf; each next one under the one before.
      const parentExpr = i === 0 ? "COALESCE(?, s.leaf_id)" : "?";
      const parentParam = i === 0 ? (parentId ?? null) : ids[i - 1];
      return sql(
        `INSERT INTO harness_session_entries (session_id, entry_id, parent_id, kind, seq, depth, timestamp, revision, body)
         SELECT s.session_id, ?, p.entry_id, ?, s.seq + ?, COALESCE(p.depth + 1, 0), ?, 0, ?
         FROM harness_sessions s
         LEFT JOIN harness_session_entries p ON p.session_id = s.session_id AND p.entry_id = ${parentExpr}
         WHERE s.session_id = ? AND s.entry_count + ? <= ? AND (${parentExpr} IS NULL OR p.entry_id IS NOT NULL)
         ON CONFLICT (session_id, entry_id) DO NOTHING
         RETURNING entry_id`,
        ids[i],
        kindOf(e.message),
        i + 1,
        t,
        bodies[i],
        parentParam,
        sessionId,
        entries.length,
        MAX_SESSION_ENTRIES,
        parentParam,
      );
    });
    // Entries this batch added are the ones past the session's `seq`: count them, and the last one
    // becomes the leaf. Nothing added (a replay) → the session row is left alone.
    const added =
      "SELECT 1 FROM harness_session_entries e WHERE e.session_id = harness_sessions.session_id AND e.seq > harness_sessions.seq";
    statements.push(
      sql(
        `UPDATE harness_sessions SET
           entry_count = entry_count + (SELECT COUNT(*) FROM harness_session_entries e WHERE e.session_id = harness_sessions.session_id AND e.seq > harness_sessions.seq),
           leaf_id = (SELECT e.entry_id FROM harness_session_entries e WHERE e.session_id = harness_sessions.session_id AND e.seq > harness_sessions.seq ORDER BY e.seq DESC LIMIT 1),
           seq = seq + ?,
           updated_at = ?,
           last_message_summary = COALESCE(?, last_message_summary)
         WHERE session_id = ? AND EXISTS (${added})`,
        entries.length,
        t,
        summary,
        sessionId,
      ),
      sql(
        "SELECT (SELECT COUNT(*) FROM harness_session_entries WHERE session_id = s.session_id AND entry_id = ?) AS parent_exists FROM harness_sessions s WHERE s.session_id = ?",
        parentId ?? null,
        sessionId,
      ),
      sql(
        `SELECT entry_id FROM harness_session_entries WHERE session_id = ? AND entry_id IN (${ids.map(() => "?").join(", ")})`,
        sessionId,
        ...ids,
      ),
    );
    const results = await this.db.batch(statements);
    const inserted = entries.map((_, i) => results[i].length > 0);
    const report = results[entries.length + 1][0];
    const present = new Set(results[entries.length + 2].map((r) => String(r.entry_id)));
    if (!report) throw new IIIError("not_found", `session ${sessionId} does not exist (session-tree::ensure creates it)`);
    if (!ids.every((id) => present.has(id))) {
      if (parentId !== undefined && num(report.parent_exists) === 0)
        throw new IIIError("not_found", `parent entry ${parentId} is not in session ${sessionId}`);
      throw new IIIError("session_full", `session ${sessionId} holds ${MAX_SESSION_ENTRIES} entries, the most one session may`);
    }
    return { entry_ids: ids, appended: inserted.filter(Boolean).length, inserted };
  }

  async append(sessionId: string, entry: AppendInput, parentId?: string): Promise<{ entry_id: string; appended: boolean }> {
    const r = await this.appendMany(sessionId, [entry], parentId);
    return { entry_id: r.entry_ids[0], appended: r.inserted[0] };
  }

  /** One page of the active path (or the path to `branchLeaf`), oldest first. */
  async messages(
    sessionId: string,
    opts: { branch_leaf?: string; limit?: number; cursor?: string; include_custom?: boolean } = {},
  ): Promise<{ messages: PathMessage[]; next_cursor: string | null }> {
    const cursor = opts.cursor === undefined ? undefined : decodeCursor(opts.cursor, sessionId);
    if (cursor && opts.branch_leaf !== undefined && opts.branch_leaf !== cursor.l)
      throw new IIIError("invalid_arguments", "cursor belongs to another branch_leaf");
    const leafParam = cursor?.l ?? opts.branch_leaf ?? null;
    const from = cursor?.d ?? 0;
    const limit = opts.limit ?? DEFAULT_PAGE_ENTRIES;
    const [head, rows] = await this.db.batch([
      sql(
        `SELECT COALESCE(?, s.leaf_id) AS leaf_id,
                (SELECT depth FROM harness_session_entries WHERE session_id = s.session_id AND entry_id = COALESCE(?, s.leaf_id)) AS leaf_depth
         FROM harness_sessions s WHERE s.session_id = ?`,
        leafParam,
        leafParam,
        sessionId,
      ),
      sql(
        `WITH RECURSIVE path(entry_id, parent_id, depth) AS (
           SELECT entry_id, parent_id, depth FROM harness_session_entries
           WHERE session_id = ? AND entry_id = COALESCE(?, (SELECT leaf_id FROM harness_sessions WHERE session_id = ?))
           UNION ALL
           SELECT e.entry_id, e.parent_id, e.depth FROM harness_session_entries e JOIN path p ON e.session_id = ? AND e.entry_id = p.parent_id
           WHERE e.depth >= ?
         )
         SELECT e.entry_id AS entry_id, e.depth AS depth, e.revision AS revision, e.body AS body
         FROM path p JOIN harness_session_entries e ON e.session_id = ? AND e.entry_id = p.entry_id
         WHERE p.depth >= ? AND (? = 1 OR e.kind = 'message')
         ORDER BY p.depth ASC LIMIT ?`,
        sessionId,
        leafParam,
        sessionId,
        sessionId,
        from,
        sessionId,
        from,
        opts.include_custom ? 1 : 0,
        limit + 1,
      ),
    ]);
    const h = head[0];
    if (!h) throw new IIIError("not_found", `session ${sessionId} does not exist`);
    const leaf = str(h.leaf_id);
    if (leaf === undefined) return { messages: [], next_cursor: null }; // no entries yet
    if (h.leaf_depth === null) throw new IIIError("not_found", `entry ${leaf} is not in session ${sessionId}`);
    const messages: PathMessage[] = [];
    let bytes = 0;
    let lastDepth = -1;
    for (const row of rows.slice(0, limit)) {
      const body = String(row.body);
      bytes += byteLength(body);
      if (messages.length > 0 && bytes > MAX_PAGE_BYTES) break;
      messages.push({ entry_id: String(row.entry_id), message: JSON.parse(body) as AgentMessage, revision: num(row.revision) });
      lastDepth = num(row.depth);
    }
    const more = rows.length > messages.length;
    return { messages, next_cursor: more ? encodeCursor({ s: sessionId, l: leaf, d: lastDepth + 1 }) : null };
  }

  /** Replace an entry's message in place; its revision goes up by one. */
  async updateMessage(sessionId: string, entryId: string, message: AgentMessage): Promise<{ ok: true; revision: number }> {
    const body = JSON.stringify(message);
    if (byteLength(body) > MAX_MESSAGE_BYTES) throw new IIIError("value_too_large", `message is larger than ${MAX_MESSAGE_BYTES} bytes`);
    const t = this.now();
    const [rows] = await this.db.batch([
      sql(
        "UPDATE harness_session_entries SET body = ?, kind = ?, revision = revision + 1 WHERE session_id = ? AND entry_id = ? RETURNING revision",
        body,
        kindOf(message),
        sessionId,
        entryId,
      ),
      sql(
        "UPDATE harness_sessions SET updated_at = ? WHERE session_id = ? AND EXISTS (SELECT 1 FROM harness_session_entries WHERE session_id = ? AND entry_id = ?)",
        t,
        sessionId,
        sessionId,
        entryId,
      ),
    ]);
    if (!rows[0]) throw new IIIError("not_found", `entry ${entryId} is not in session ${sessionId}`);
    return { ok: true, revision: num(rows[0].revision) };
  }

  // ---------------------------------------------------------------- inboxes

  async push(sessionId: string, name: string, item: unknown): Promise<{ ok: boolean; size: number; error?: "inbox_full" }> {
    const text = JSON.stringify(item);
    const bytes = byteLength(text);
    if (bytes > MAX_INBOX_ITEM_BYTES) throw new IIIError("value_too_large", `inbox item is larger than ${MAX_INBOX_ITEM_BYTES} bytes`);
    const [inserted, size] = await this.db.batch([
      sql(
        `INSERT INTO harness_session_inbox (session_id, name, item, bytes, created_at)
         SELECT ?, ?, ?, ?, ?
         WHERE (SELECT COUNT(*) FROM harness_session_inbox WHERE session_id = ? AND name = ?) < ?
           AND (SELECT COALESCE(SUM(bytes), 0) FROM harness_session_inbox WHERE session_id = ? AND name = ?) + ? <= ?
         RETURNING id`,
        sessionId,
        name,
        text,
        bytes,
        this.now(),
        sessionId,
        name,
        MAX_INBOX_ITEMS,
        sessionId,
        name,
        bytes,
        MAX_INBOX_BYTES,
      ),
      sql("SELECT COUNT(*) AS n FROM harness_session_inbox WHERE session_id = ? AND name = ?", sessionId, name),
    ]);
    const n = num(size[0]?.n);
    return inserted.length > 0 ? { ok: true, size: n } : { ok: false, size: n, error: "inbox_full" };
  }

  async peek(sessionId: string, name: string): Promise<{ items: unknown[] }> {
    const [rows] = await this.db.batch([
      sql("SELECT item FROM harness_session_inbox WHERE session_id = ? AND name = ? ORDER BY id LIMIT ?", sessionId, name, MAX_INBOX_ITEMS),
    ]);
    return { items: rows.map((r) => JSON.parse(String(r.item)) as unknown) };
  }

  /** Read and empty the inbox in one statement: two concurrent drains never return the same item,
   * and an item pushed meanwhile is either in this answer or still queued. */
  async drain(sessionId: string, name: string): Promise<{ items: unknown[] }> {
    const [rows] = await this.db.batch([
      sql("DELETE FROM harness_session_inbox WHERE session_id = ? AND name = ? RETURNING id, item", sessionId, name),
    ]);
    // RETURNING rows come in no promised order: put them back in push order.
    return { items: rows.sort((a, b) => num(a.id) - num(b.id)).map((r) => JSON.parse(String(r.item)) as unknown) };
  }
}
