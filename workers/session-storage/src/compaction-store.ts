// Compaction entries and pruned outputs (docs/harness-contracts.md §5.2 "Compact", "Prune update"; §6.1
// persist): `session-tree::compact`, `session-tree::compactions`, `session-tree::update_parts`. A
// compaction is an entry of kind `compaction` in the same tree, so `messages` (kind = 'message')
// never returns it and the raw path stays what was said; the model's view (summary + tail) is
// assembled by its readers from `compactions` (protocol `compactionView`). Every function is one or
// two batches.
import { z } from "zod";
import { IIIError, requestFormat, responseFormat } from "@iii-edge/protocol";
import {
  COMPACTION_CUSTOM_TYPE,
  compactionDetailsSchema,
  MAX_COMPACTIONS_LISTED,
  PRUNED_OUTPUT_TEXT,
  sessionCompactionsRequest,
  sessionCompactionsResponse,
  sessionCompactRequest,
  sessionCompactResponse,
  sessionUpdatePartsRequest,
  sessionUpdatePartsResponse,
  type CompactionDetails,
  type CompactionRecord,
  type CustomMessage,
  type SessionUpdatePartsResponse,
} from "@iii-edge/protocol/harness";
import type { WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { withSchema } from "./schema.ts";
import { MAX_MESSAGE_BYTES, MAX_SESSION_ENTRIES } from "./session-store.ts";
import { sql, type SqlRow, type SqlStore } from "./sql-store.ts";

/** The entry kind compaction entries are stored as. */
export const COMPACTION_KIND = "compaction";
/** What a compaction entry shows in a transcript view. */
const COMPACTION_DISPLAY = "Conversation compacted";

const encoder = new TextEncoder();
const num = (v: unknown): number => (typeof v === "number" ? v : Number(v ?? 0));
const str = (v: unknown): string | null => (typeof v === "string" ? v : null);

/** The stored body of a compaction entry: a CustomMessage whose `content` is the record. */
interface CompactionBody extends CustomMessage {
  custom_type: typeof COMPACTION_CUSTOM_TYPE;
  content: { summary: string; tokens_before: number; tail_start_id: string | null; details: CompactionDetails };
}

const bodySchema = z.looseObject({
  content: z.looseObject({
    summary: z.string(),
    tokens_before: z.number(),
    tail_start_id: z.string().nullable().optional(),
    details: compactionDetailsSchema.optional(),
  }),
});

export class CompactionStore {
  private readonly db: SqlStore;
  private readonly now: () => number;
  private readonly newId: () => string;

  constructor(store: SqlStore, options: { now?: () => number; newId?: () => string } = {}) {
    this.db = withSchema(store);
    this.now = options.now ?? Date.now;
    this.newId = options.newId ?? (() => `c_${crypto.randomUUID()}`);
  }

  /** Append a compaction entry under `parent_id` (default: the leaf); it becomes the leaf. */
  async compact(req: z.output<typeof sessionCompactRequest>): Promise<{ entry_id: string; appended: boolean }> {
    const t = this.now();
    const id = req.entry_id ?? this.newId();
    const tail = req.tail_start_id ?? null;
    const body: CompactionBody = {
      role: "custom",
      custom_type: COMPACTION_CUSTOM_TYPE,
      content: { summary: req.summary, tokens_before: req.tokens_before, tail_start_id: tail, details: req.details },
      display: COMPACTION_DISPLAY,
      timestamp: t,
    };
    const text = JSON.stringify(body);
    if (encoder.encode(text).byteLength > MAX_MESSAGE_BYTES)
      throw new IIIError("value_too_large", `the compaction entry is larger than ${MAX_MESSAGE_BYTES} bytes`);
    const parent = req.parent_id ?? null;
    // The path above the new entry (from its parent): the tail must start on it.
    const pathCte = `WITH RECURSIVE path(entry_id, parent_id) AS (
        SELECT entry_id, parent_id FROM harness_session_entries
        WHERE session_id = ? AND entry_id = COALESCE(?, (SELECT leaf_id FROM harness_sessions WHERE session_id = ?))
        UNION ALL
        SELECT e.entry_id, e.parent_id FROM harness_session_entries e JOIN path p ON e.session_id = ? AND e.entry_id = p.parent_id
      )`;
    const tailOnPath = `EXISTS (SELECT 1 FROM path p JOIN harness_session_entries m ON m.session_id = ? AND m.entry_id = p.entry_id WHERE p.entry_id = ? AND m.kind = 'message')`;
    const results = await this.db.batch([
      sql(
        `${pathCte}
         INSERT INTO harness_session_entries (session_id, entry_id, parent_id, kind, seq, depth, timestamp, revision, body)
         SELECT s.session_id, ?, p.entry_id, '${COMPACTION_KIND}', s.seq + 1, COALESCE(p.depth + 1, 0), ?, 0, ?
         FROM harness_sessions s
         LEFT JOIN harness_session_entries p ON p.session_id = s.session_id AND p.entry_id = COALESCE(?, s.leaf_id)
         WHERE s.session_id = ? AND s.entry_count + 1 <= ?
           AND (COALESCE(?, s.leaf_id) IS NULL OR p.entry_id IS NOT NULL)
           AND (? IS NULL OR ${tailOnPath})
         ON CONFLICT (session_id, entry_id) DO NOTHING
         RETURNING entry_id`,
        req.session_id,
        parent,
        req.session_id,
        req.session_id,
        id,
        t,
        text,
        parent,
        req.session_id,
        MAX_SESSION_ENTRIES,
        parent,
        tail,
        req.session_id,
        tail,
      ),
      // As an append: the new entry (past the session's seq) becomes the leaf.
      sql(
        `UPDATE harness_sessions SET
           entry_count = entry_count + 1,
           leaf_id = (SELECT e.entry_id FROM harness_session_entries e WHERE e.session_id = harness_sessions.session_id AND e.seq > harness_sessions.seq ORDER BY e.seq DESC LIMIT 1),
           seq = seq + 1,
           updated_at = ?
         WHERE session_id = ? AND EXISTS (SELECT 1 FROM harness_session_entries e WHERE e.session_id = harness_sessions.session_id AND e.seq > harness_sessions.seq)`,
        t,
        req.session_id,
      ),
      sql(
        `${pathCte}
         SELECT s.entry_count AS entry_count,
                (SELECT COUNT(*) FROM harness_session_entries WHERE session_id = s.session_id AND entry_id = ?) AS id_exists,
                (SELECT COUNT(*) FROM harness_session_entries WHERE session_id = s.session_id AND entry_id = ?) AS parent_exists,
                (CASE WHEN ? IS NULL THEN 1 WHEN ${tailOnPath} THEN 1 ELSE 0 END) AS tail_ok
         FROM harness_sessions s WHERE s.session_id = ?`,
        req.session_id,
        parent,
        req.session_id,
        req.session_id,
        id,
        parent,
        tail,
        req.session_id,
        tail,
        req.session_id,
      ),
    ]);
    if (results[0].length > 0) return { entry_id: id, appended: true };
    const report = results[2][0];
    if (!report) throw new IIIError("not_found", `session ${req.session_id} does not exist (session-tree::ensure creates it)`);
    if (num(report.id_exists) > 0) return { entry_id: id, appended: false }; // a replay of this id
    if (parent !== null && num(report.parent_exists) === 0)
      throw new IIIError("not_found", `parent entry ${parent} is not in session ${req.session_id}`);
    if (num(report.tail_ok) === 0)
      throw new IIIError("invalid_arguments", `tail_start_id ${tail} is not a message on the path of the new compaction entry`);
    if (num(report.entry_count) + 1 > MAX_SESSION_ENTRIES)
      throw new IIIError("session_full", `session ${req.session_id} holds ${MAX_SESSION_ENTRIES} entries, the most one session may`);
    throw new IIIError("invalid_arguments", `session ${req.session_id} has no entries to compact`);
  }

  /** The compaction entries on the path to the leaf (or `branch_leaf`), oldest first (the newest
   * `limit`). One walk of the path's ids and kinds; only compaction bodies are read. */
  async compactions(req: z.output<typeof sessionCompactionsRequest>): Promise<{ compactions: CompactionRecord[] }> {
    const leaf = req.branch_leaf ?? null;
    const [head, rows] = await this.db.batch([
      sql(
        `SELECT COALESCE(?, s.leaf_id) AS leaf_id,
                (SELECT COUNT(*) FROM harness_session_entries WHERE session_id = s.session_id AND entry_id = COALESCE(?, s.leaf_id)) AS leaf_exists
         FROM harness_sessions s WHERE s.session_id = ?`,
        leaf,
        leaf,
        req.session_id,
      ),
      sql(
        `WITH RECURSIVE path(entry_id, parent_id, depth, kind) AS (
           SELECT entry_id, parent_id, depth, kind FROM harness_session_entries
           WHERE session_id = ? AND entry_id = COALESCE(?, (SELECT leaf_id FROM harness_sessions WHERE session_id = ?))
           UNION ALL
           SELECT e.entry_id, e.parent_id, e.depth, e.kind FROM harness_session_entries e JOIN path p ON e.session_id = ? AND e.entry_id = p.parent_id
         )
         SELECT p.entry_id AS entry_id, p.parent_id AS parent_id, p.kind AS kind, p.depth AS depth,
                CASE WHEN p.kind = '${COMPACTION_KIND}' THEN e.body END AS body,
                CASE WHEN p.kind = '${COMPACTION_KIND}' THEN e.timestamp END AS timestamp
         FROM path p JOIN harness_session_entries e ON e.session_id = ? AND e.entry_id = p.entry_id
         WHERE p.kind IN ('message', '${COMPACTION_KIND}')
         ORDER BY p.depth ASC`,
        req.session_id,
        leaf,
        req.session_id,
        req.session_id,
        req.session_id,
      ),
    ]);
    const h = head[0];
    if (!h) throw new IIIError("not_found", `session ${req.session_id} does not exist`);
    if (str(h.leaf_id) === null) return { compactions: [] };
    if (num(h.leaf_exists) === 0) throw new IIIError("not_found", `entry ${String(h.leaf_id)} is not in session ${req.session_id}`);
    const out: CompactionRecord[] = [];
    let lastMessage: string | null = null;
    for (const row of rows) {
      if (row.kind === "message") {
        lastMessage = String(row.entry_id);
        continue;
      }
      const record = parseRecord(row, lastMessage);
      if (record) out.push(record);
    }
    return { compactions: out.slice(-(req.limit ?? MAX_COMPACTIONS_LISTED)) };
  }

  /** Prune function outputs in place (content → one text block, `compacted_at` in details). A
   * write only lands if the entry's revision is the one read (a concurrent update_message wins). */
  async updateParts(req: z.output<typeof sessionUpdatePartsRequest>): Promise<SessionUpdatePartsResponse> {
    const ids = req.parts.map((p) => p.entry_id);
    if (new Set(ids).size !== ids.length) throw new IIIError("invalid_arguments", "entry ids of one update_parts must differ");
    const [session, rows] = await this.db.batch([
      sql("SELECT 1 AS found FROM harness_sessions WHERE session_id = ?", req.session_id),
      sql(
        `SELECT entry_id, kind, revision, body FROM harness_session_entries WHERE session_id = ? AND entry_id IN (${ids.map(() => "?").join(", ")})`,
        req.session_id,
        ...ids,
      ),
    ]);
    if (!session[0]) throw new IIIError("not_found", `session ${req.session_id} does not exist`);
    const byId = new Map(rows.map((r) => [String(r.entry_id), r]));
    const t = this.now();
    const writes: { entry_id: string; revision: number; body: string }[] = [];
    const unchanged: string[] = [];
    for (const part of req.parts) {
      const row = byId.get(part.entry_id);
      if (!row) throw new IIIError("not_found", `entry ${part.entry_id} is not in session ${req.session_id}`);
      const message = JSON.parse(String(row.body)) as Record<string, unknown>;
      if (row.kind !== "message" || message.role !== "function_result")
        throw new IIIError("invalid_arguments", `entry ${part.entry_id} is not a function result`);
      const text = part.text ?? PRUNED_OUTPUT_TEXT;
      const content = [{ type: "text", text }];
      if (JSON.stringify(message.content) === JSON.stringify(content)) {
        unchanged.push(part.entry_id);
        continue;
      }
      const details = message.details;
      const merged =
        details && typeof details === "object" && !Array.isArray(details)
          ? { ...(details as Record<string, unknown>), compacted_at: t }
          : { compacted_at: t };
      writes.push({ entry_id: part.entry_id, revision: num(row.revision), body: JSON.stringify({ ...message, content, details: merged }) });
    }
    if (writes.length === 0) return { updated: [], unchanged, skipped: [] };
    const results = await this.db.batch([
      ...writes.map((w) =>
        sql(
          "UPDATE harness_session_entries SET body = ?, revision = revision + 1 WHERE session_id = ? AND entry_id = ? AND revision = ? RETURNING entry_id, revision",
          w.body,
          req.session_id,
          w.entry_id,
          w.revision,
        ),
      ),
      sql("UPDATE harness_sessions SET updated_at = ? WHERE session_id = ?", t, req.session_id),
    ]);
    const updated: SessionUpdatePartsResponse["updated"] = [];
    const skipped: string[] = [];
    writes.forEach((w, i) => {
      const r = results[i][0];
      if (r) updated.push({ entry_id: w.entry_id, revision: num(r.revision) });
      else skipped.push(w.entry_id);
    });
    return { updated, unchanged, skipped };
  }
}

function parseRecord(row: SqlRow, afterMessage: string | null): CompactionRecord | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(String(row.body));
  } catch {
    return undefined;
  }
  const b = bodySchema.safeParse(parsed);
  if (!b.success) return undefined; // not written by compact (an update_message replaced it)
  const c = b.data.content;
  return {
    entry_id: String(row.entry_id),
    parent_id: str(row.parent_id),
    after_message_id: afterMessage,
    summary: c.summary,
    tokens_before: c.tokens_before,
    tail_start_id: c.tail_start_id ?? null,
    details: c.details ?? { read_files: [], modified_files: [] },
    timestamp: num(row.timestamp),
  };
}

const descriptions = {
  "session-tree::compact":
    "Append a compaction entry {summary, tokens_before, details, tail_start_id?} under parent_id (default: the active leaf; it becomes the leaf): the model then reads the summary and the path from tail_start_id on.",
  "session-tree::compactions":
    "The compaction entries on the active path (or the path to branch_leaf), oldest first, each with after_message_id.",
  "session-tree::update_parts":
    "Prune function outputs in place: each entry's content becomes one text block ([output pruned] by default), compacted_at is merged into its details.",
} as const;

function parse<T extends z.ZodType>(id: string, schema: T, data: unknown): z.output<T> {
  const r = schema.safeParse(data);
  if (!r.success) throw new IIIError("invalid_arguments", `${id}: ${z.prettifyError(r.error)}`);
  return r.data;
}

/** Register the three functions on the session-storage worker's surface. */
export function registerCompactionFunctions(
  iii: WorkerSurface,
  store: SqlStore,
  options: { now?: () => number; newId?: () => string } = {},
): CompactionStore {
  const s = new CompactionStore(store, options);
  const reg = <T extends z.ZodType>(
    id: keyof typeof descriptions,
    schema: T,
    response: z.ZodType,
    handler: (r: z.output<T>) => Promise<unknown>,
  ) =>
    iii.registerFunction(id, (data: unknown) => handler(parse(id, schema, data)), {
      description: descriptions[id],
      request_format: requestFormat(schema),
      response_format: responseFormat(response),
    });
  reg("session-tree::compact", sessionCompactRequest, sessionCompactResponse, (r) => s.compact(r));
  reg("session-tree::compactions", sessionCompactionsRequest, sessionCompactionsResponse, (r) => s.compactions(r));
  reg("session-tree::update_parts", sessionUpdatePartsRequest, sessionUpdatePartsResponse, (r) => s.updateParts(r));
  return s;
}
