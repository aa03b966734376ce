// The engine core's Sql and Timers ports in plain Node: SQL over Node's own SQLite (node:sqlite),
// timers kept in a set the suite clears (an "eviction", or the end of a test).
import type { DatabaseSync } from "node:sqlite";
import type { Sql, SqlValue, Timers } from "@iii-edge/engine-do/core/ports.ts";

export function nodeSql(db: DatabaseSync): Sql {
  return {
    exec: <T>(q: string, ...b: SqlValue[]) => db.prepare(q).all(...(b as never[])) as T[],
    transaction: <T>(fn: () => T): T => {
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

/** Timers recorded in `handles` while pending; `beforeSet` may throw to play a runtime refusing one. */
export function trackedTimers(handles: Set<ReturnType<typeof setTimeout>>, beforeSet?: () => void): Timers {
  return {
    set: (fn, ms) => {
      beforeSet?.();
      const h = setTimeout(() => {
        handles.delete(h);
        fn();
      }, ms);
      handles.add(h);
      return h;
    },
    clear: (h) => {
      clearTimeout(h as ReturnType<typeof setTimeout>);
      handles.delete(h as ReturnType<typeof setTimeout>);
    },
  };
}
