// Keyed instances, the plain part (docs/keyed-workers.md): one instance per key runs its calls one
// at a time against its own SQLite, with alarms kept in that same database. Both hosts use it: the
// Durable Object shell in ./worker-edge.ts (the object's SQLite and its one platform alarm) and the
// Node host in ./keyed-node.ts (a node:sqlite file per key and a timer). No `cloudflare:*` import.
import { IIIError, MAX_KEYED_WAITING } from "@iii-edge/protocol";
import type { InvocationContext } from "./client/types.ts";

/** What a statement binds and a row holds, in both SQLites (blobs come back as bytes). */
export type SqlValue = string | number | null;

/** The instance's SQLite: one statement per `exec`, rows as objects. Synchronous in both hosts,
 * so a handler's reads and writes between two `await`s see nothing of another call. */
export interface KeyedSql {
  exec<Row extends Record<string, unknown> = Record<string, SqlValue>>(query: string, ...bindings: SqlValue[]): Row[];
}

/** The store a host gives an instance: its SQLite and an all-or-nothing transaction over it. */
export interface KeyedStore extends KeyedSql {
  transaction<T>(fn: () => T): T;
}

export interface AlarmOptions {
  /** Stable id: setting an alarm with the id of a pending one moves it (default: a fresh id). */
  id?: string;
}

/** What a keyed handler gets beside the invocation: its key, its storage and its alarms. */
export interface KeyedScope {
  /** The key this instance is named by (the value of the function's key field). */
  readonly key: string;
  /** This instance's own SQLite. Tables named `_iii_*` are the host's. */
  readonly sql: KeyedSql;
  /** Run `fn` as one transaction: all of its writes or none (nothing inside may await). */
  transaction<T>(fn: () => T): T;
  /** At `at` (epoch ms), call keyed function `functionId` of this worker on this same instance with
   * `payload` (its key field is filled in). Kept in the instance's storage: it survives restarts
   * and evictions, and fires once. Returns the alarm's id. */
  setAlarm(at: number, functionId: string, payload?: Record<string, unknown>, options?: AlarmOptions): string;
  /** Drop a pending alarm; false when there was none with that id. */
  cancelAlarm(id: string): boolean;
}

/** What a keyed handler gets: the invocation (with `trigger`, the typed call surface) and its instance. */
export interface KeyedContext extends InvocationContext, KeyedScope {}

/** A keyed function's handler (wrap it in worker.ts `keyed` to register it). */
// biome-ignore lint/suspicious/noExplicitAny: a handler typed with its own input must be assignable here
export type KeyedHandler<I = any, O = unknown> = (data: I, ctx: KeyedContext) => O | Promise<O>;

/** Alarms one instance may hold: each is a row and a wake-up; more than this is a loop gone wrong. */
export const MAX_ALARMS_PER_INSTANCE = 1_000;
/** Longest alarm id (an id the caller picks is stored and compared per alarm). */
export const MAX_ALARM_ID_LENGTH = 128;

/** A pending alarm as stored. */
export interface AlarmRow {
  id: string;
  at: number;
  function_id: string;
  payload: string;
}

/** The host's side of an instance: when to wake it next (undefined: no alarm pending). */
export interface InstancePorts {
  store: KeyedStore;
  wake(at: number | undefined): void;
  now(): number;
  newId(): string;
  /** May `functionId` be an alarm's target here (a keyed function of the same group)? */
  alarmTarget(functionId: string): boolean;
}

export class KeyedInstance {
  readonly key: string;
  readonly #ports: InstancePorts;
  /** The end of the line of calls: each waits for the one before it, whatever that one did. */
  #tail: Promise<unknown> = Promise.resolve();
  #waiting = 0;
  #running = false;

  constructor(key: string, ports: InstancePorts) {
    this.key = key;
    this.#ports = ports;
    ports.store.exec(
      "CREATE TABLE IF NOT EXISTS _iii_alarms (id TEXT PRIMARY KEY, at INTEGER NOT NULL, function_id TEXT NOT NULL, payload TEXT NOT NULL)",
    );
  }

  /** Calls waiting for their turn or running. */
  get busy(): boolean {
    return this.#running || this.#waiting > 0;
  }

  /** Run `task` after every call queued before it has finished: one at a time per instance. An
   * input gate is not enough on Cloudflare (it opens at every `await` of a handler), so the line
   * is kept here. Past MAX_KEYED_WAITING waiting calls the caller is refused at once. */
  run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#waiting >= MAX_KEYED_WAITING) {
      return Promise.reject(
        new IIIError("too_many_calls", `instance ${this.key} has ${MAX_KEYED_WAITING} calls waiting for their turn; try again later`),
      );
    }
    this.#waiting++;
    const turn = this.#tail.then(async () => {
      this.#waiting--;
      this.#running = true;
      try {
        return await task();
      } finally {
        this.#running = false;
      }
    });
    this.#tail = turn.catch(() => undefined);
    return turn;
  }

  /** The key, storage and alarms a handler of this instance gets. */
  scope(): KeyedScope {
    const store = this.#ports.store;
    return {
      key: this.key,
      sql: { exec: (query, ...bindings) => store.exec(query, ...bindings) },
      transaction: (fn) => store.transaction(fn),
      setAlarm: (at, functionId, payload, options) => this.setAlarm(at, functionId, payload, options),
      cancelAlarm: (id) => this.cancelAlarm(id),
    };
  }

  setAlarm(at: number, functionId: string, payload: Record<string, unknown> = {}, options: AlarmOptions = {}): string {
    if (!Number.isFinite(at)) throw new IIIError("invalid_arguments", "setAlarm: `at` must be a time in epoch milliseconds");
    if (!this.#ports.alarmTarget(functionId)) {
      throw new IIIError("invalid_arguments", `setAlarm: ${functionId} is not a keyed function of this instance's worker`);
    }
    if (typeof payload !== "object" || payload === null || Array.isArray(payload)) {
      throw new IIIError("invalid_arguments", "setAlarm: the payload must be an object");
    }
    const id = options.id ?? this.#ports.newId();
    if (typeof id !== "string" || id.length === 0 || id.length > MAX_ALARM_ID_LENGTH) {
      throw new IIIError("invalid_arguments", `setAlarm: an alarm id is 1-${MAX_ALARM_ID_LENGTH} characters`);
    }
    const store = this.#ports.store;
    const [{ n }] = store.exec<{ n: number }>("SELECT COUNT(*) AS n FROM _iii_alarms WHERE id <> ?", id);
    if (n >= MAX_ALARMS_PER_INSTANCE) {
      throw new IIIError("quota_exceeded", `setAlarm: instance ${this.key} already has ${MAX_ALARMS_PER_INSTANCE} alarms pending`);
    }
    store.exec(
      "INSERT OR REPLACE INTO _iii_alarms (id, at, function_id, payload) VALUES (?, ?, ?, ?)",
      id,
      Math.floor(at),
      functionId,
      JSON.stringify(payload),
    );
    this.#rearm();
    return id;
  }

  cancelAlarm(id: string): boolean {
    const had = this.#ports.store.exec("SELECT id FROM _iii_alarms WHERE id = ?", id).length > 0;
    if (had) {
      this.#ports.store.exec("DELETE FROM _iii_alarms WHERE id = ?", id);
      this.#rearm();
    }
    return had;
  }

  /** When the next alarm is due (undefined: none pending). */
  nextAlarm(): number | undefined {
    const [row] = this.#ports.store.exec<{ at: number | null }>("SELECT MIN(at) AS at FROM _iii_alarms");
    return row?.at ?? undefined;
  }

  /** Fire every alarm that is due, each in its own turn in the line of calls. An alarm is claimed
   * (its row deleted) in the same turn, before its function runs: a repeated platform alarm, or a
   * wake after a restart, finds it gone, so it fires once. A failing function is reported to
   * `failed` and not retried: an alarm that must survive its handler's failure sets its successor first. */
  async fireDue(
    invoke: (alarm: AlarmRow) => Promise<unknown>,
    failed: (alarm: AlarmRow, error: unknown) => void = () => undefined,
  ): Promise<number> {
    const store = this.#ports.store;
    let fired = 0;
    const due = store.exec<{ id: string } & Record<string, SqlValue>>(
      "SELECT id FROM _iii_alarms WHERE at <= ? ORDER BY at, id",
      this.#ports.now(),
    );
    for (const { id } of due) {
      await this.run(async () => {
        const [row] = store.exec<AlarmRow & Record<string, SqlValue>>(
          "SELECT id, at, function_id, payload FROM _iii_alarms WHERE id = ? AND at <= ?",
          id,
          this.#ports.now(),
        );
        // Cancelled or moved by a call that ran before this turn.
        if (!row) return;
        store.exec("DELETE FROM _iii_alarms WHERE id = ?", id);
        fired++;
        try {
          await invoke(row);
        } catch (e) {
          failed(row, e);
        }
      });
    }
    this.#rearm();
    return fired;
  }

  #rearm(): void {
    this.#ports.wake(this.nextAlarm());
  }
}
