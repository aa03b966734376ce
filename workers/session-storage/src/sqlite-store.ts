// The SqlStore over a node:sqlite file, for the worker run alone in Node. Node only.
import { mkdirSync } from "node:fs";
import path from "node:path";
import { DatabaseSync, type StatementSync } from "node:sqlite";
import type { SqlRow, SqlStore, SqlValue } from "./sql-store.ts";

/** Prepared statements kept per database: the store issues a few dozen distinct texts (the IN
 * lists of append_many vary with its length); past this the cache starts over. */
const STATEMENT_CACHE_SIZE = 256;
/** How long a write waits for another connection's lock (a second process on the same file). */
const BUSY_TIMEOUT_MS = 5_000;

export function sqliteStore(db: DatabaseSync): SqlStore {
  const cache = new Map<string, StatementSync>();
  const prepare = (text: string): StatementSync => {
    let s = cache.get(text);
    if (!s) {
      if (cache.size >= STATEMENT_CACHE_SIZE) cache.clear();
      s = db.prepare(text);
      cache.set(text, s);
    }
    return s;
  };
  return {
    // Synchronous inside one JavaScript turn: nothing else on this thread interleaves, and
    // BEGIN IMMEDIATE keeps other processes out until COMMIT.
    async batch(statements) {
      if (statements.length === 0) return [];
      db.exec("BEGIN IMMEDIATE");
      try {
        const out = statements.map((s) =>
          prepare(s.sql)
            .all(...(s.params as SqlValue[]))
            .map((row) => ({ ...row }) as SqlRow),
        );
        db.exec("COMMIT");
        return out;
      } catch (e) {
        db.exec("ROLLBACK");
        throw e;
      }
    },
  };
}

/** Open (creating it and its directory if needed) the sessions database file. */
export function openSqliteStore(file: string): { store: SqlStore; close(): void } {
  if (file !== ":memory:") mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const db = new DatabaseSync(file);
  db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  if (file !== ":memory:") db.exec("PRAGMA journal_mode = WAL");
  return { store: sqliteStore(db), close: () => db.close() };
}
