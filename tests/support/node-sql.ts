// The engine core's Sql port over Node's own SQLite (node:sqlite), for suites and measurements
// that run the core in plain Node.
import type { DatabaseSync } from "node:sqlite";
import type { Sql, SqlValue } from "@iii-edge/engine-do/core/ports.ts";

export function nodeSql(db: DatabaseSync): Sql {
  return {
    exec: <T,>(q: string, ...b: SqlValue[]) => db.prepare(q).all(...(b as never[])) as T[],
    transaction: <T,>(fn: () => T): T => {
      db.exec("BEGIN");
      try {
        const r = fn();
        db.exec("COMMIT");
        return r;
      } catch (e) {
        db.exec("ROLLBACK");
        throw e;
      }
    },
  };
}
