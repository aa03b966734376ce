// The session store's tables: one schema for D1 and node:sqlite. The worker creates them itself
// (CREATE … IF NOT EXISTS, once per store instance), so it needs no migration of the engine's.
// Names are prefixed: in the Worker they live in the engine's D1 database, beside its own tables.
import { sql, type SqlStatement, type SqlStore } from "./sql-store.ts";

export const SCHEMA: readonly SqlStatement[] = [
  // One row per session. `seq` numbers its entries in append order (the tie-breaker clocks cannot
  // be); `leaf_id` is the active leaf, moved in the same batch as every append.
  sql(`CREATE TABLE IF NOT EXISTS harness_sessions (
    session_id TEXT PRIMARY KEY NOT NULL,
    display_name TEXT,
    cwd TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    entry_count INTEGER NOT NULL DEFAULT 0,
    seq INTEGER NOT NULL DEFAULT 0,
    leaf_id TEXT,
    last_message_summary TEXT
  )`),
  sql("CREATE INDEX IF NOT EXISTS harness_sessions_by_update ON harness_sessions (updated_at, session_id)"),
  // The tree: `depth` is the distance from the root (root 0), so one page of a path is a depth range.
  // `kind`: message | custom_message | compaction | branch_summary. `body`: JSON.
  // `seq` is unique within a session (every writer takes the session's counter): fork and clone
  // derive the ids of copied entries from it (src/tree.ts).
  sql(`CREATE TABLE IF NOT EXISTS harness_session_entries (
    session_id TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    parent_id TEXT,
    kind TEXT NOT NULL,
    seq INTEGER NOT NULL,
    depth INTEGER NOT NULL,
    timestamp INTEGER NOT NULL,
    revision INTEGER NOT NULL DEFAULT 0,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, entry_id)
  ) WITHOUT ROWID`),
  sql("CREATE INDEX IF NOT EXISTS harness_session_entries_by_parent ON harness_session_entries (session_id, parent_id)"),
  // Per-session named queues (steering, followup): `id` orders each queue.
  sql(`CREATE TABLE IF NOT EXISTS harness_session_inbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    name TEXT NOT NULL,
    item TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    created_at INTEGER NOT NULL
  )`),
  sql("CREATE INDEX IF NOT EXISTS harness_session_inbox_by_queue ON harness_session_inbox (session_id, name, id)"),
  // Where a session made by `fork` / `clone` came from (src/tree.ts): a repeat of the same request
  // finds its copy here, and a resumed copy finds the run settings of its source. A table of its
  // own (not columns of harness_sessions) so databases made before it need no ALTER.
  sql(`CREATE TABLE IF NOT EXISTS harness_session_origins (
    session_id TEXT PRIMARY KEY NOT NULL,
    kind TEXT NOT NULL,
    source_session_id TEXT NOT NULL,
    from_entry_id TEXT,
    request_key TEXT,
    created_at INTEGER NOT NULL
  )`),
  // Who owns each session (the principal that started it), for listings filtered to the caller's
  // own; the engine's `session_owner` state is what access checks read. A table of its own, as above.
  sql(`CREATE TABLE IF NOT EXISTS harness_session_owners (
    session_id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL
  )`),
  sql("CREATE INDEX IF NOT EXISTS harness_session_owners_by_owner ON harness_session_owners (owner, session_id)"),
];

/** `store` with the schema created before its first statement (once; retried if it failed). */
export function withSchema(store: SqlStore): SqlStore {
  let ready: Promise<unknown> | undefined;
  const ensure = (): Promise<unknown> => {
    ready ??= store.batch(SCHEMA).catch((e: unknown) => {
      ready = undefined;
      throw e;
    });
    return ready;
  };
  return {
    async batch(statements) {
      await ensure();
      return store.batch(statements);
    },
  };
}
