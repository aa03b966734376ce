// The engine core's Sql and Timers ports in plain Node: SQL over Node's own SQLite (node:sqlite),
// timers kept in a set the suite clears (an "eviction", or the end of a test).
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { DatabaseSync } from "node:sqlite";
import type { D1Like, D1StatementLike } from "@iii-edge/engine-do/core/queues/dead-letters.ts";
import type { EngineFrame } from "@iii-edge/protocol";
import type { Conn, EnginePorts, Sql, SqlValue, Timers } from "@iii-edge/engine-do/core/ports.ts";

/** A BLOB as the object's SqlStorage takes and gives it: an ArrayBuffer. node:sqlite binds only
 * typed arrays and answers a BLOB as a Uint8Array, so both directions are converted here (a
 * channel's binary items are stored so). */
const toBind = (v: SqlValue): unknown => (v instanceof ArrayBuffer ? new Uint8Array(v) : v);
const fromRow = (row: Record<string, unknown>): Record<string, unknown> => {
  for (const k in row) {
    const v = row[k];
    if (v instanceof Uint8Array) row[k] = v.buffer.slice(v.byteOffset, v.byteOffset + v.byteLength);
  }
  return row;
};

export function nodeSql(db: DatabaseSync): Sql {
  return {
    exec: <T>(q: string, ...b: SqlValue[]) =>
      (db.prepare(q).all(...(b.map(toBind) as never[])) as Record<string, unknown>[]).map(fromRow) as T[],
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

/** The engine core's ports over `db`, quiet: a fixed clock, timers that never fire, no alarm, no
 * log. A test that needs time, timers or the alarm passes its own in `over`. */
export function nodePorts(db: DatabaseSync, over: Partial<EnginePorts> = {}): EnginePorts {
  return {
    namespace: "default",
    sql: nodeSql(db),
    clock: { now: () => 1_000 },
    timers: { set: () => 0, clear: () => {} },
    alarm: { request: () => {} },
    log: { info: () => {}, warn: () => {} },
    newId: () => crypto.randomUUID(),
    background: (p) => void p.catch(() => {}),
    edgeHosts: {},
    ...over,
  };
}

/** A worker connection that records every frame the engine sends it (a live socket that never fails). */
export class RecordingConn implements Conn {
  readonly workerId: string;
  readonly frames: EngineFrame[] = [];
  constructor(workerId: string) {
    this.workerId = workerId;
  }
  send(frame: EngineFrame): boolean {
    this.frames.push(frame);
    return true;
  }
  close(): void {}
  /** The first frame of `type` that `pred` accepts. */
  find(type: string, pred: (f: Record<string, unknown>) => boolean = () => true) {
    return this.frames.find((f) => f.type === type && pred(f as Record<string, unknown>)) as Record<string, unknown> | undefined;
  }
  /** The calls of `fn` sent to this connection. */
  calls(fn: string) {
    return this.frames.filter(
      (f): f is Extract<EngineFrame, { type: "invokefunction" }> => f.type === "invokefunction" && f.function_id === fn,
    );
  }
}

const D1_MIGRATIONS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../engine-do/migrations");

/** D1's API over an in-memory node:sqlite, with the repo's D1 migrations applied (as `wrangler d1
 * migrations apply` does). `discardInserts`: INSERTs are handed over but not executed — the engine
 * object's own share of the work when D1 runs elsewhere (deployed, D1's SQLite is not on its thread). */
export function nodeD1(opts: { discardInserts?: boolean } = {}): D1Like {
  const db = new DatabaseSync(":memory:");
  for (const f of readdirSync(D1_MIGRATIONS)
    .filter((f) => f.endsWith(".sql"))
    .sort())
    db.exec(readFileSync(path.join(D1_MIGRATIONS, f), "utf8"));
  const statement = (q: string, binds: unknown[] = []): D1StatementLike => ({
    bind: (...values: unknown[]) => statement(q, values),
    run: async () => (opts.discardInserts && q.startsWith("INSERT") ? undefined : db.prepare(q).run(...(binds as never[]))),
    all: async <T>() => ({ results: db.prepare(q).all(...(binds as never[])) as T[] }),
  });
  return { prepare: (q) => statement(q) };
}
