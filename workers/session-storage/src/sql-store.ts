// The one storage port the session store is written against, and its D1 implementation. The Node
// implementation (node:sqlite) is in ./sqlite-store.ts so this file stays importable in workerd.

export type SqlValue = string | number | null;
export type SqlRow = Record<string, SqlValue>;
export interface SqlStatement {
  sql: string;
  params: readonly SqlValue[];
}

/** SQL over SQLite (D1, or a node:sqlite file). */
export interface SqlStore {
  /** Runs the statements in order as one atomic unit (all of them or none) in one round trip, and
   * answers each statement's rows (its SELECT or RETURNING rows; [] for the others). */
  batch(statements: readonly SqlStatement[]): Promise<SqlRow[][]>;
}

export const sql = (text: string, ...params: SqlValue[]): SqlStatement => ({ sql: text, params });

/** The part of a D1Database binding used here (structural, so the worker needs no Workers types). */
export interface D1Like {
  prepare(query: string): D1StatementLike;
  batch(statements: D1StatementLike[]): Promise<{ results?: unknown[] }[]>;
}
export interface D1StatementLike {
  bind(...values: unknown[]): D1StatementLike;
}

export function isD1(v: unknown): v is D1Like {
  return typeof v === "object" && v !== null && typeof (v as D1Like).prepare === "function" && typeof (v as D1Like).batch === "function";
}

/** D1: `batch` is its own transaction (a failing statement rolls the whole batch back) and one
 * round trip to the database. */
export function d1Store(db: D1Like): SqlStore {
  return {
    async batch(statements) {
      if (statements.length === 0) return [];
      const results = await db.batch(statements.map((s) => db.prepare(s.sql).bind(...s.params)));
      return results.map((r) => (r.results ?? []) as SqlRow[]);
    },
  };
}
