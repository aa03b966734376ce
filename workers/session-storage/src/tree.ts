// The session tree's branching side (docs/harness-contracts.md §5.2): fork (a new session from the path up to
// any entry), clone (every branch), the nested tree, the branch tips, switching the active leaf,
// one entry, and export. Over the same SqlStore and tables as src/session-store.ts; every write is
// one atomic batch, so a repeated or concurrent fork makes one copy.
//
// Copied entries get deterministic ids: `<id up to its first "~", at most 200 chars>~<n>`, n = the
// entry's depth in a fork (unique on a path) or its append counter `seq` in a clone (unique in a
// session). The ids are computed inside SQL, so a copy is one INSERT … SELECT whatever its length.
import { IIIError, MAX_RESULT_BYTES } from "@iii-edge/protocol";
import type {
  AgentMessage,
  ExportFormat,
  SessionBranch,
  SessionBranches,
  SessionCopyKind,
  SessionCopyResponse,
  SessionEntryView,
  SessionExport,
  SessionTree,
  SetActiveLeafResponse,
  TreeBranch,
  TreeEntry,
} from "@iii-edge/protocol/harness";
import { CONTENT_TYPES, renderExport, type ExportEntry } from "./export.ts";
import { withSchema } from "./schema.ts";
import { SUMMARY_CODE_POINTS } from "./session-store.ts";
import { sql, type SqlRow, type SqlStore } from "./sql-store.ts";

/** Characters of an entry id its copy keeps (then `~<n>`): stays within MAX_ENTRY_ID_LENGTH (256)
 * with room for n, and a copy of a copy does not grow (the base stops at the first "~"). */
export const COPY_ID_BASE_CHARS = 200;
/** Characters of the source's id a derived fork / clone id starts with (then `~fork-<24 hex>`):
 * readable, and within the 128 a session id may have. */
export const COPY_SESSION_ID_HEAD_CHARS = 64;
/** Hex digits of the request digest in a derived session id (96 bits: no two requests meet). */
const COPY_SESSION_DIGEST_HEX = 24;
/** Longest display name kept (the same bound as session-tree::ensure). */
const MAX_DISPLAY_NAME_CHARS = 200;
/** Entries one `tree` answer describes: a TreeEntry is ~150 bytes, so the answer stays well inside
 * one frame (MAX_RESULT_BYTES); a larger tree is read a subtree at a time (from_entry_id). */
export const MAX_TREE_ENTRIES = 2_000;
/** Branch levels one `tree` answer nests: each is two JSON levels, and the engine refuses frames
 * nested deeper than 128. Deeper branches come back `truncated` (ask again from their last entry). */
export const MAX_TREE_NESTING = 48;
/** Tips one `branches` answer lists (newest first): a UI's branch picker, not a dump. */
export const MAX_BRANCHES = 500;
/** Bytes an answer built here may have: one frame, with room for the envelope. */
export const MAX_TREE_ANSWER_BYTES = MAX_RESULT_BYTES - 64 * 1024;
/** Stored bytes one export reads at most: image data is left out of the rendering, so a path may
 * be larger than its export; past this the read alone is too much for one call. */
export const MAX_EXPORT_SOURCE_BYTES = 8 * 1024 * 1024;
/** Characters SQL hands over for a preview; it is then flattened and cut to SUMMARY_CODE_POINTS. */
const PREVIEW_SOURCE_CHARS = 400;

// ------------------------------------------------------------------ SQL pieces

/** The copy of entry id `id` with counter `n`, as SQL (mirrors copyEntryId). */
const copyIdSql = (id: string, n: string): string =>
  `(substr(CASE WHEN instr(${id}, '~') > 0 THEN substr(${id}, 1, instr(${id}, '~') - 1) ELSE ${id} END, 1, ${COPY_ID_BASE_CHARS}) || '~' || ${n})`;

/** The copy of entry id `id` with counter `n` (what the SQL above computes). */
export function copyEntryId(id: string, n: number): string {
  const cut = id.indexOf("~");
  return `${Array.from(cut >= 0 ? id.slice(0, cut) : id)
    .slice(0, COPY_ID_BASE_CHARS)
    .join("")}~${n}`;
}

/** A compaction's `tail_start_id` (its first kept entry, src/compaction-store.ts keeps it in
 * `content`) names an entry of the same path: the copy names that entry's copy. `n` is the SQL
 * counter of the target row `t`. Other bodies are copied as they are. */
const tailCopySql = (path: string, n: string): string =>
  `json_set(e.body, '${path}', (SELECT ${copyIdSql("t.entry_id", n)} FROM harness_session_entries t WHERE t.session_id = ?1 AND t.entry_id = json_extract(e.body, '${path}')))`;
const bodyCopySql = (n: string): string => `CASE WHEN e.kind <> 'compaction' OR NOT json_valid(e.body) THEN e.body
  WHEN json_type(e.body, '$.content.tail_start_id') = 'text' THEN ${tailCopySql("$.content.tail_start_id", n)}
  WHEN json_type(e.body, '$.tail_start_id') = 'text' THEN ${tailCopySql("$.tail_start_id", n)}
  ELSE e.body END`;

/** Preview columns of entry row `e`: role, first text (or a summary), first call, function id —
 * extracted in SQL so no whole body leaves the database. */
const PREVIEW_COLUMNS = `
  CASE WHEN json_valid(e.body) THEN json_extract(e.body, '$.role') END AS role,
  CASE WHEN NOT json_valid(e.body) THEN NULL
       WHEN json_type(e.body, '$.content') = 'text' THEN substr(json_extract(e.body, '$.content'), 1, ${PREVIEW_SOURCE_CHARS})
       WHEN json_type(e.body, '$.content') = 'array' THEN (SELECT substr(json_extract(j.value, '$.text'), 1, ${PREVIEW_SOURCE_CHARS}) FROM json_each(e.body, '$.content') j
            WHERE json_extract(j.value, '$.type') = 'text' AND json_type(j.value, '$.text') = 'text' LIMIT 1)
       WHEN json_type(e.body, '$.display') = 'text' THEN substr(json_extract(e.body, '$.display'), 1, ${PREVIEW_SOURCE_CHARS})
       WHEN json_type(e.body, '$.summary') = 'text' THEN substr(json_extract(e.body, '$.summary'), 1, ${PREVIEW_SOURCE_CHARS})
  END AS preview,
  CASE WHEN json_valid(e.body) AND json_type(e.body, '$.content') = 'array' THEN (SELECT COALESCE(json_extract(j.value, '$.arguments.function'), json_extract(j.value, '$.function_id'))
            FROM json_each(e.body, '$.content') j WHERE json_extract(j.value, '$.type') = 'function_call' LIMIT 1) END AS call,
  CASE WHEN json_valid(e.body) AND json_extract(e.body, '$.role') = 'function_result' THEN json_extract(e.body, '$.function_id') END AS function_id`;

/** The path from entry `leafExpr` to its root, as a CTE named `path` (?1 = session id). */
const pathCte = (leafExpr: string): string => `WITH RECURSIVE path(entry_id, parent_id) AS (
    SELECT entry_id, parent_id FROM harness_session_entries WHERE session_id = ?1 AND entry_id = ${leafExpr}
    UNION ALL
    SELECT e.entry_id, e.parent_id FROM harness_session_entries e JOIN path p ON e.session_id = ?1 AND e.entry_id = p.parent_id
  )`;

// ------------------------------------------------------------------ helpers

const num = (v: unknown): number => (typeof v === "number" ? v : Number(v ?? 0));
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const nullableStr = (v: unknown): string | null => (typeof v === "string" ? v : null);
const utf8 = new TextEncoder();
const byteLength = (s: string): number => utf8.encode(s).byteLength;

function oneLine(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat === "") return undefined;
  const points = Array.from(flat);
  return points.length > SUMMARY_CODE_POINTS ? `${points.slice(0, SUMMARY_CODE_POINTS).join("")}…` : flat;
}
const cutName = (name: string): string => Array.from(name).slice(0, MAX_DISPLAY_NAME_CHARS).join("");

function parseBody(text: unknown): unknown {
  try {
    return JSON.parse(String(text)) as unknown;
  } catch {
    return String(text);
  }
}

/** The described part of an entry row that has the PREVIEW_COLUMNS. */
function describe(row: SqlRow): Pick<TreeEntry, "entry_id" | "kind" | "depth" | "timestamp" | "role" | "preview" | "call" | "function_id"> {
  const d: ReturnType<typeof describe> = {
    entry_id: String(row.entry_id),
    kind: String(row.kind),
    depth: num(row.depth),
    timestamp: num(row.timestamp),
  };
  const role = str(row.role);
  if (role !== undefined) d.role = role;
  const preview = oneLine(str(row.preview));
  if (preview !== undefined) d.preview = preview;
  const call = str(row.call);
  if (call !== undefined) d.call = call;
  const fid = str(row.function_id);
  if (fid !== undefined) d.function_id = fid;
  return d;
}

/** A session id for a copy nobody named: the same request always derives the same id. */
export async function derivedSessionId(
  kind: SessionCopyKind,
  source: string,
  fromEntry: string | null,
  requestKey: string | undefined,
): Promise<string> {
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", utf8.encode(JSON.stringify([kind, source, fromEntry, requestKey ?? null]))),
  );
  const hex = Array.from(digest, (b) => b.toString(16).padStart(2, "0"))
    .join("")
    .slice(0, COPY_SESSION_DIGEST_HEX);
  return `${Array.from(source).slice(0, COPY_SESSION_ID_HEAD_CHARS).join("")}~${kind}-${hex}`;
}

export interface CopyOptions {
  new_session_id?: string;
  request_key?: string;
  display_name?: string;
}

export class SessionTreeStore {
  private readonly db: SqlStore;
  private readonly now: () => number;

  constructor(store: SqlStore, options: { now?: () => number } = {}) {
    this.db = withSchema(store);
    this.now = options.now ?? Date.now;
  }

  // ---------------------------------------------------------------- fork and clone

  /** A new session whose path is the source's path up to `fromEntryId` (any entry), copied whole. */
  async fork(sourceId: string, fromEntryId: string, opts: CopyOptions = {}): Promise<SessionCopyResponse> {
    const newId = opts.new_session_id ?? (await derivedSessionId("fork", sourceId, fromEntryId, opts.request_key));
    if (newId === sourceId) throw new IIIError("invalid_arguments", "new_session_id must differ from source_session_id");
    const [src, from, last] = await this.db.batch([
      sql("SELECT display_name FROM harness_sessions WHERE session_id = ?", sourceId),
      sql("SELECT depth FROM harness_session_entries WHERE session_id = ? AND entry_id = ?", sourceId, fromEntryId),
      // The copy's list summary: the newest user / assistant text on the copied path.
      sql(
        `${pathCte("?2")} SELECT ${PREVIEW_COLUMNS} FROM path p JOIN harness_session_entries e ON e.session_id = ?1 AND e.entry_id = p.entry_id
         WHERE e.kind = 'message' AND json_valid(e.body) AND json_extract(e.body, '$.role') IN ('user', 'assistant') ORDER BY e.depth DESC LIMIT 8`,
        sourceId,
        fromEntryId,
      ),
    ]);
    if (!src[0]) throw new IIIError("not_found", `session ${sourceId} does not exist`);
    if (!from[0]) throw new IIIError("not_found", `entry ${fromEntryId} is not in session ${sourceId}`);
    const summary = last.map((r) => oneLine(str(r.preview))).find((s) => s !== undefined) ?? null;
    const sourceName = str(src[0].display_name);
    const name = opts.display_name ?? (sourceName !== undefined ? cutName(`${sourceName} (fork)`) : null);
    const t = this.now();
    // ?1 source, ?2 from entry, ?3 new session, ?4 now. Each write happens only while the new
    // session does not exist yet (checked inside the batch, before its row is inserted last).
    const absent = "NOT EXISTS (SELECT 1 FROM harness_sessions WHERE session_id = ?3)";
    const results = await this.db.batch([
      sql(
        `${pathCte("?2")}
         INSERT INTO harness_session_entries (session_id, entry_id, parent_id, kind, seq, depth, timestamp, revision, body)
         SELECT ?3, ${copyIdSql("e.entry_id", "e.depth")}, CASE WHEN e.parent_id IS NULL THEN NULL ELSE ${copyIdSql("e.parent_id", "(e.depth - 1)")} END,
                e.kind, e.depth + 1, e.depth, e.timestamp, 0, ${bodyCopySql("t.depth")}
         FROM path p JOIN harness_session_entries e ON e.session_id = ?1 AND e.entry_id = p.entry_id
         WHERE ${absent}
         ON CONFLICT (session_id, entry_id) DO NOTHING`,
        sourceId,
        fromEntryId,
        newId,
      ),
      sql(
        `INSERT INTO harness_session_origins (session_id, kind, source_session_id, from_entry_id, request_key, created_at)
         SELECT ?3, 'fork', ?1, ?2, ?5, ?4 WHERE ${absent}
         ON CONFLICT (session_id) DO NOTHING`,
        sourceId,
        fromEntryId,
        newId,
        t,
        opts.request_key ?? null,
      ),
      sql(
        `INSERT INTO harness_sessions (session_id, display_name, cwd, created_at, updated_at, entry_count, seq, leaf_id, last_message_summary)
         SELECT ?3, ?5, s.cwd, ?4, ?4,
                (SELECT COUNT(*) FROM harness_session_entries WHERE session_id = ?3),
                (SELECT COALESCE(MAX(seq), 0) FROM harness_session_entries WHERE session_id = ?3),
                (SELECT ${copyIdSql("f.entry_id", "f.depth")} FROM harness_session_entries f WHERE f.session_id = ?1 AND f.entry_id = ?2),
                ?6
         FROM harness_sessions s WHERE s.session_id = ?1
         ON CONFLICT (session_id) DO NOTHING RETURNING session_id`,
        sourceId,
        fromEntryId,
        newId,
        t,
        name,
        summary,
      ),
      this.copyReport(newId),
    ]);
    return this.copyAnswer("fork", newId, sourceId, fromEntryId, results[2].length > 0, results[3][0]);
  }

  /** A new session with every entry of every branch of the source. */
  async clone(sourceId: string, opts: CopyOptions = {}): Promise<SessionCopyResponse> {
    const newId = opts.new_session_id ?? (await derivedSessionId("clone", sourceId, null, opts.request_key));
    if (newId === sourceId) throw new IIIError("invalid_arguments", "new_session_id must differ from source_session_id");
    const [src] = await this.db.batch([sql("SELECT display_name FROM harness_sessions WHERE session_id = ?", sourceId)]);
    if (!src[0]) throw new IIIError("not_found", `session ${sourceId} does not exist`);
    const sourceName = str(src[0].display_name);
    const name = opts.display_name ?? (sourceName !== undefined ? cutName(`${sourceName} (copy)`) : null);
    const t = this.now();
    // ?1 source, ?2 new session, ?3 now, ?4 request key / display name. As in fork, every write
    // happens only while the new session does not exist yet.
    const absent = "NOT EXISTS (SELECT 1 FROM harness_sessions WHERE session_id = ?2)";
    const results = await this.db.batch([
      sql(
        `INSERT INTO harness_session_entries (session_id, entry_id, parent_id, kind, seq, depth, timestamp, revision, body)
         SELECT ?2, ${copyIdSql("e.entry_id", "e.seq")}, CASE WHEN p.entry_id IS NULL THEN NULL ELSE ${copyIdSql("p.entry_id", "p.seq")} END,
                e.kind, e.seq, e.depth, e.timestamp, 0, ${bodyCopySql("t.seq")}
         FROM harness_session_entries e LEFT JOIN harness_session_entries p ON p.session_id = ?1 AND p.entry_id = e.parent_id
         WHERE e.session_id = ?1 AND ${absent}
         ON CONFLICT (session_id, entry_id) DO NOTHING`,
        sourceId,
        newId,
      ),
      sql(
        `INSERT INTO harness_session_origins (session_id, kind, source_session_id, from_entry_id, request_key, created_at)
         SELECT ?2, 'clone', ?1, NULL, ?4, ?3 WHERE ${absent}
         ON CONFLICT (session_id) DO NOTHING`,
        sourceId,
        newId,
        t,
        opts.request_key ?? null,
      ),
      sql(
        `INSERT INTO harness_sessions (session_id, display_name, cwd, created_at, updated_at, entry_count, seq, leaf_id, last_message_summary)
         SELECT ?2, ?4, s.cwd, ?3, ?3,
                (SELECT COUNT(*) FROM harness_session_entries WHERE session_id = ?2), s.seq,
                (SELECT ${copyIdSql("l.entry_id", "l.seq")} FROM harness_session_entries l WHERE l.session_id = ?1 AND l.entry_id = s.leaf_id),
                s.last_message_summary
         FROM harness_sessions s WHERE s.session_id = ?1
         ON CONFLICT (session_id) DO NOTHING RETURNING session_id`,
        sourceId,
        newId,
        t,
        name,
      ),
      this.copyReport(newId),
    ]);
    return this.copyAnswer("clone", newId, sourceId, null, results[2].length > 0, results[3][0]);
  }

  private copyReport(newId: string) {
    return sql(
      `SELECT s.leaf_id, s.entry_count, o.kind, o.source_session_id, o.from_entry_id
       FROM harness_sessions s LEFT JOIN harness_session_origins o ON o.session_id = s.session_id WHERE s.session_id = ?`,
      newId,
    );
  }

  /** The answer of a copy; a session of that id that is not this request's copy is refused. */
  private copyAnswer(
    kind: SessionCopyKind,
    newId: string,
    sourceId: string,
    fromEntryId: string | null,
    created: boolean,
    row: SqlRow | undefined,
  ): SessionCopyResponse {
    if (!row) throw new IIIError("not_found", `session ${sourceId} does not exist`); // it went away between the reads
    if (!created && (row.kind !== kind || row.source_session_id !== sourceId || nullableStr(row.from_entry_id) !== fromEntryId)) {
      throw new IIIError(
        "session_exists",
        `session ${newId} exists and is not a ${kind} of ${sourceId}${fromEntryId === null ? "" : ` at ${fromEntryId}`}: choose another new_session_id`,
      );
    }
    return {
      session_id: newId,
      kind,
      source_session_id: sourceId,
      from_entry_id: fromEntryId,
      leaf_id: nullableStr(row.leaf_id),
      entry_count: num(row.entry_count),
      created,
    };
  }

  // ---------------------------------------------------------------- reading the tree

  /** The tree as nested branches (or the subtree under `fromEntryId`). */
  async tree(sessionId: string, fromEntryId?: string): Promise<SessionTree> {
    const select = `SELECT e.entry_id, e.parent_id, e.kind, e.seq, e.depth, e.timestamp, ${PREVIEW_COLUMNS}`;
    const rowsSql =
      fromEntryId === undefined
        ? sql(`${select} FROM harness_session_entries e WHERE e.session_id = ?1 ORDER BY e.seq LIMIT ?2`, sessionId, MAX_TREE_ENTRIES + 1)
        : sql(
            `WITH RECURSIVE sub(entry_id) AS (
               SELECT entry_id FROM harness_session_entries WHERE session_id = ?1 AND entry_id = ?3
               UNION ALL
               SELECT c.entry_id FROM harness_session_entries c JOIN sub ON c.session_id = ?1 AND c.parent_id = sub.entry_id
             )
             ${select} FROM sub JOIN harness_session_entries e ON e.session_id = ?1 AND e.entry_id = sub.entry_id ORDER BY e.seq LIMIT ?2`,
            sessionId,
            MAX_TREE_ENTRIES + 1,
            fromEntryId,
          );
    const [head, rows] = await this.db.batch([
      sql("SELECT leaf_id, entry_count FROM harness_sessions WHERE session_id = ?", sessionId),
      rowsSql,
    ]);
    if (!head[0]) throw new IIIError("not_found", `session ${sessionId} does not exist`);
    if (fromEntryId !== undefined && rows.length === 0)
      throw new IIIError("not_found", `entry ${fromEntryId} is not in session ${sessionId}`);
    if (rows.length > MAX_TREE_ENTRIES) {
      throw new IIIError(
        "value_too_large",
        `the tree of ${sessionId} has more than ${MAX_TREE_ENTRIES} entries: read it a subtree at a time (from_entry_id), or its branches`,
      );
    }
    const leafId = nullableStr(head[0].leaf_id);
    const byId = new Map<string, SqlRow>(rows.map((r) => [String(r.entry_id), r]));
    const children = new Map<string, string[]>();
    const roots: string[] = [];
    for (const r of rows) {
      const id = String(r.entry_id);
      const parent = nullableStr(r.parent_id);
      if (parent !== null && byId.has(parent) && id !== fromEntryId) {
        const list = children.get(parent) ?? [];
        list.push(id); // rows come in seq order: children in the order they were appended
        children.set(parent, list);
      } else roots.push(id);
    }
    const active = new Set<string>();
    for (let id = leafId; id !== null && byId.has(id); id = nullableStr(byId.get(id)!.parent_id)) active.add(id);

    const view = (id: string): TreeEntry => {
      const e: TreeEntry = { ...describe(byId.get(id)!), child_count: children.get(id)?.length ?? 0 };
      if (active.has(id)) e.active = true;
      return e;
    };
    const branch = (start: string, nesting: number): TreeBranch => {
      const entries: TreeEntry[] = [];
      for (let id = start; ; ) {
        entries.push(view(id));
        const kids = children.get(id) ?? [];
        if (kids.length === 1) {
          id = kids[0]!;
          continue;
        }
        if (kids.length === 0) return { entries, children: [] };
        if (nesting >= MAX_TREE_NESTING) return { entries, children: [], truncated: true };
        return { entries, children: kids.map((k) => branch(k, nesting + 1)) };
      }
    };
    const tree: SessionTree = {
      session_id: sessionId,
      leaf_id: leafId,
      entry_count: num(head[0].entry_count),
      roots: roots.map((r) => branch(r, 1)),
    };
    if (byteLength(JSON.stringify(tree)) > MAX_TREE_ANSWER_BYTES) {
      throw new IIIError(
        "value_too_large",
        `the tree of ${sessionId} is larger than ${MAX_TREE_ANSWER_BYTES} bytes: read it a subtree at a time (from_entry_id)`,
      );
    }
    return tree;
  }

  /** The tips of the tree, newest first, each with the entry its branch left another at. */
  async branches(sessionId: string): Promise<SessionBranches> {
    const leafCond = "NOT EXISTS (SELECT 1 FROM harness_session_entries c WHERE c.session_id = e.session_id AND c.parent_id = e.entry_id)";
    const [head, count, rows] = await this.db.batch([
      sql("SELECT leaf_id FROM harness_sessions WHERE session_id = ?", sessionId),
      sql(`SELECT COUNT(*) AS n FROM harness_session_entries e WHERE e.session_id = ? AND ${leafCond}`, sessionId),
      // Walk up from every tip while the parent has this one child; where the walk stops, the
      // parent (with more children) is the fork point, or there is none (the root was reached).
      sql(
        `WITH RECURSIVE up(leaf, pid, n) AS (
           SELECT e.entry_id, e.parent_id, 0 FROM harness_session_entries e WHERE e.session_id = ?1 AND ${leafCond}
           UNION ALL
           SELECT up.leaf, p.parent_id, up.n + 1 FROM up JOIN harness_session_entries p ON p.session_id = ?1 AND p.entry_id = up.pid
           WHERE (SELECT COUNT(*) FROM harness_session_entries c WHERE c.session_id = ?1 AND c.parent_id = p.entry_id) = 1
         ),
         forks(leaf, fork_point, n) AS (SELECT leaf, pid, MAX(n) FROM up GROUP BY leaf)
         SELECT e.entry_id, e.kind, e.seq, e.depth, e.timestamp, f.fork_point, ${PREVIEW_COLUMNS}
         FROM forks f JOIN harness_session_entries e ON e.session_id = ?1 AND e.entry_id = f.leaf
         ORDER BY e.seq DESC LIMIT ?2`,
        sessionId,
        MAX_BRANCHES,
      ),
    ]);
    if (!head[0]) throw new IIIError("not_found", `session ${sessionId} does not exist`);
    const leafId = nullableStr(head[0].leaf_id);
    const branches: SessionBranch[] = rows.map((r) => ({
      ...describe(r),
      leaf_id: String(r.entry_id),
      fork_point_id: nullableStr(r.fork_point),
      active: String(r.entry_id) === leafId,
    }));
    return { session_id: sessionId, leaf_id: leafId, total: num(count[0]?.n), branches };
  }

  /** One entry, or null when the session or the entry does not exist. */
  async entry(sessionId: string, entryId: string): Promise<SessionEntryView | null> {
    const [rows] = await this.db.batch([
      sql(
        `SELECT e.entry_id, e.parent_id, e.kind, e.depth, e.timestamp, e.revision, e.body,
                (SELECT COUNT(*) FROM harness_session_entries c WHERE c.session_id = e.session_id AND c.parent_id = e.entry_id) AS child_count
         FROM harness_session_entries e WHERE e.session_id = ? AND e.entry_id = ?`,
        sessionId,
        entryId,
      ),
    ]);
    const r = rows[0];
    if (!r) return null;
    const v: SessionEntryView = {
      entry_id: String(r.entry_id),
      parent_id: nullableStr(r.parent_id),
      kind: String(r.kind),
      depth: num(r.depth),
      timestamp: num(r.timestamp),
      revision: num(r.revision),
      child_count: num(r.child_count),
    };
    const body = parseBody(r.body);
    if (v.kind === "message" || v.kind === "custom_message") v.message = body as AgentMessage;
    else v.data = body;
    return v;
  }

  // ---------------------------------------------------------------- switching branch

  /**
   * Make `entryId` the active leaf (any entry: the next append hangs under it, starting a branch
   * if it has children), or none (`null`: the next append is a new root). With `expected` given,
   * only while the leaf is still that (`leaf_conflict` otherwise).
   */
  async setActiveLeaf(sessionId: string, entryId: string | null, expected?: string | null): Promise<SetActiveLeafResponse> {
    const check = expected === undefined ? 0 : 1;
    const [before, updated] = await this.db.batch([
      sql(
        `SELECT s.leaf_id, (SELECT COUNT(*) FROM harness_session_entries WHERE session_id = s.session_id AND entry_id = ?2) AS found
         FROM harness_sessions s WHERE s.session_id = ?1`,
        sessionId,
        entryId,
      ),
      sql(
        `UPDATE harness_sessions SET leaf_id = ?2, updated_at = ?5
         WHERE session_id = ?1 AND (?2 IS NULL OR EXISTS (SELECT 1 FROM harness_session_entries WHERE session_id = ?1 AND entry_id = ?2))
           AND (?3 = 0 OR leaf_id IS ?4) AND leaf_id IS NOT ?2
         RETURNING leaf_id`,
        sessionId,
        entryId,
        check,
        expected ?? null,
        this.now(),
      ),
    ]);
    const b = before[0];
    if (!b) throw new IIIError("not_found", `session ${sessionId} does not exist`);
    if (entryId !== null && num(b.found) === 0) throw new IIIError("not_found", `entry ${entryId} is not in session ${sessionId}`);
    const previous = nullableStr(b.leaf_id);
    if (check === 1 && previous !== (expected ?? null)) {
      throw new IIIError(
        "leaf_conflict",
        `the active leaf of ${sessionId} is ${previous ?? "none"}, not ${expected ?? "none"}: it moved meanwhile`,
      );
    }
    return { session_id: sessionId, leaf_id: entryId, previous_leaf_id: previous, changed: updated.length > 0 };
  }

  // ---------------------------------------------------------------- export

  /** The active path (or the path to `branchLeaf`) rendered whole. */
  async export(sessionId: string, format: ExportFormat, branchLeaf?: string): Promise<SessionExport> {
    const leafExpr = "COALESCE(?2, (SELECT leaf_id FROM harness_sessions WHERE session_id = ?1))";
    const [head, size] = await this.db.batch([
      sql("SELECT display_name, cwd, leaf_id FROM harness_sessions WHERE session_id = ?", sessionId),
      sql(
        `${pathCte(leafExpr)} SELECT COUNT(*) AS n, COALESCE(SUM(length(CAST(e.body AS BLOB))), 0) AS bytes
         FROM path p JOIN harness_session_entries e ON e.session_id = ?1 AND e.entry_id = p.entry_id`,
        sessionId,
        branchLeaf ?? null,
      ),
    ]);
    const h = head[0];
    if (!h) throw new IIIError("not_found", `session ${sessionId} does not exist`);
    if (branchLeaf !== undefined && num(size[0]?.n) === 0)
      throw new IIIError("not_found", `entry ${branchLeaf} is not in session ${sessionId}`);
    if (num(size[0]?.bytes) > MAX_EXPORT_SOURCE_BYTES) {
      throw new IIIError(
        "value_too_large",
        `the path to export holds ${num(size[0]?.bytes)} bytes, more than ${MAX_EXPORT_SOURCE_BYTES}: export a shorter branch (branch_leaf)`,
      );
    }
    const leafId = branchLeaf ?? nullableStr(h.leaf_id);
    const [rows] = await this.db.batch([
      sql(
        `${pathCte("?2")} SELECT e.entry_id, e.parent_id, e.kind, e.timestamp, e.body
         FROM path p JOIN harness_session_entries e ON e.session_id = ?1 AND e.entry_id = p.entry_id ORDER BY e.depth`,
        sessionId,
        leafId,
      ),
    ]);
    const entries: ExportEntry[] = rows.map((r) => ({
      entry_id: String(r.entry_id),
      parent_id: nullableStr(r.parent_id),
      kind: String(r.kind),
      timestamp: num(r.timestamp),
      body: parseBody(r.body),
    }));
    const doc = {
      session_id: sessionId,
      leaf_id: leafId,
      entries,
      ...(str(h.display_name) !== undefined ? { display_name: str(h.display_name) } : {}),
      ...(str(h.cwd) !== undefined ? { cwd: str(h.cwd) } : {}),
    };
    const content = renderExport(doc, format);
    if (byteLength(content) > MAX_TREE_ANSWER_BYTES) {
      throw new IIIError(
        "value_too_large",
        `the ${format} export of ${sessionId} is larger than ${MAX_TREE_ANSWER_BYTES} bytes: export a shorter branch (branch_leaf)`,
      );
    }
    return { session_id: sessionId, format, content_type: CONTENT_TYPES[format], leaf_id: leafId, entry_count: entries.length, content };
  }
}
