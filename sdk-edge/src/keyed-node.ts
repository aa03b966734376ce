// Keyed instances in a Node process (docs/keyed-workers.md): the same semantics as the Durable
// Object host, in-process. Each instance is a node:sqlite database file of its own under a data
// directory, named by a hash of the instance's name: a handler's SQL is its own database as on
// Cloudflare (no table prefix to rewrite into its queries, no key column in its tables), and
// dropping or copying one key is one file. Calls on one key run one at a time (./keyed.ts); alarms
// are rows in the instance's database with a timer in this process, re-armed from every file when
// the process starts.
import { createHash, randomUUID } from "node:crypto";
import { mkdirSync, readdirSync } from "node:fs";
import path from "node:path";
import type { DatabaseSync } from "node:sqlite";
import { IIIError, keyedGroupOf, keyedInstanceNameOf, keyOf } from "@iii-edge/protocol";
import type { InvocationContext } from "./client/types.ts";
import { type AlarmRow, KeyedInstance, type KeyedHandler, type KeyedStore, type SqlValue } from "./keyed.ts";

/** node:sqlite, loaded when a process first hosts a keyed function: on Node 22 importing it prints
 * an experimental-feature warning, which a worker without keyed functions should not print. */
function sqlite(): typeof import("node:sqlite") {
  return process.getBuiltinModule("node:sqlite") as typeof import("node:sqlite");
}

/** Instance databases kept open at once: past it the least recently used idle one is closed (its
 * data stays on disk and its alarm timer keeps running; the next call reopens it). A file handle
 * and SQLite's page cache each: a few hundred bounds memory and descriptors. */
export const MAX_OPEN_INSTANCES = 256;
/** Longest timer Node keeps (setTimeout fires at once past 2^31-1 ms): a later alarm re-arms on waking. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const FILE_SUFFIX = ".sqlite";

export interface NodeKeyedOptions {
  /** Where instance databases live (created if missing). */
  dir: string;
  /** The engine namespace the worker serves (part of every instance's name). */
  namespace: string;
  now?: () => number;
  maxOpen?: number;
  log?: (message: string) => void;
}

interface Identity {
  namespace: string;
  grp: string;
  key: string;
}

interface OpenInstance extends Identity {
  name: string;
  db: DatabaseSync;
  instance: KeyedInstance;
}

interface KeyedFunction {
  field: string;
  handler: KeyedHandler;
  /** The calls-back surface for an alarm's invocation (there is no engine invocation behind it). */
  trigger: InvocationContext["trigger"];
}

export class NodeKeyedInstances {
  readonly dir: string;
  readonly namespace: string;
  readonly #now: () => number;
  readonly #maxOpen: number;
  readonly #log: (message: string) => void;
  /** Open instances, least recently used first. */
  readonly #open = new Map<string, OpenInstance>();
  readonly #timers = new Map<string, ReturnType<typeof setTimeout>>();
  readonly #functions = new Map<string, KeyedFunction>();
  #closed = false;

  constructor(opts: NodeKeyedOptions) {
    this.dir = path.resolve(opts.dir);
    this.namespace = opts.namespace;
    this.#now = opts.now ?? Date.now;
    this.#maxOpen = opts.maxOpen ?? MAX_OPEN_INSTANCES;
    this.#log = opts.log ?? ((m) => console.error(m));
    mkdirSync(this.dir, { recursive: true });
  }

  /** Declare keyed function `id` (key field `field`): returns the handler the client registers. */
  declare(id: string, field: string, handler: KeyedHandler, trigger: InvocationContext["trigger"]) {
    this.#functions.set(id, { field, handler, trigger });
    return (data: unknown, ctx: InvocationContext): Promise<unknown> => {
      const key = keyOf(id, field, data);
      if (key instanceof IIIError) return Promise.reject(key);
      const open = this.#instance({ namespace: this.namespace, grp: keyedGroupOf(id), key });
      return open.instance.run(async () => handler(data, { ...ctx, ...open.instance.scope() }));
    };
  }

  /** Arm the timer of every instance on disk with an alarm pending (call once the functions are
   * declared: an alarm's target must be known to fire it). */
  resume(): void {
    for (const file of readdirSync(this.dir)) {
      if (!file.endsWith(FILE_SUFFIX)) continue;
      let identity: Identity | undefined;
      const db = new (sqlite().DatabaseSync)(path.join(this.dir, file));
      try {
        identity = readIdentity(db);
      } finally {
        db.close();
      }
      if (identity?.namespace !== this.namespace) continue;
      const open = this.#instance(identity);
      this.#arm(open, open.instance.nextAlarm());
    }
  }

  /** Fire the due alarms of one instance now (the timer does this by itself; tests call it to show
   * that a second wake fires nothing). Resolves with how many fired. */
  fire(group: string, key: string): Promise<number> {
    const open = this.#instance({ namespace: this.namespace, grp: group, key });
    return open.instance.fireDue(
      (alarm) => this.#runAlarm(open, alarm),
      (alarm, e) => this.#log(`alarm ${alarm.id} (${alarm.function_id}) of ${group}/${key} failed: ${String(e)}`),
    );
  }

  /** Close every database and stop every timer (the data stays). */
  close(): void {
    this.#closed = true;
    for (const t of this.#timers.values()) clearTimeout(t);
    this.#timers.clear();
    for (const o of this.#open.values()) o.db.close();
    this.#open.clear();
  }

  /** Drop every instance from memory, as an eviction would (their files and timers stay). */
  evictAll(): void {
    for (const [name, o] of this.#open) {
      if (o.instance.busy) continue;
      o.db.close();
      this.#open.delete(name);
    }
  }

  #runAlarm(open: OpenInstance, alarm: AlarmRow): Promise<unknown> {
    const fn = this.#functions.get(alarm.function_id);
    if (!fn) throw new IIIError("function_not_found", `${alarm.function_id} is no keyed function here`);
    const data = { ...(JSON.parse(alarm.payload) as Record<string, unknown>), [fn.field]: open.key };
    const ctx: InvocationContext = {
      function_id: alarm.function_id,
      invocation_id: `alarm-${alarm.id}`,
      metadata: undefined,
      trigger: fn.trigger,
    };
    return Promise.resolve(fn.handler(data, { ...ctx, ...open.instance.scope() }));
  }

  #instance(identity: Identity): OpenInstance {
    if (this.#closed) throw new IIIError("not_connected", "the keyed instances of this process are closed");
    const name = keyedInstanceNameOf(identity.namespace, identity.grp, identity.key);
    const had = this.#open.get(name);
    if (had) {
      this.#open.delete(name);
      this.#open.set(name, had);
      return had;
    }
    const db = new (sqlite().DatabaseSync)(path.join(this.dir, createHash("sha256").update(name).digest("hex").slice(0, 40) + FILE_SUFFIX));
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("CREATE TABLE IF NOT EXISTS _iii_instance (id INTEGER PRIMARY KEY CHECK (id = 1), namespace TEXT, grp TEXT, key TEXT)");
    db.prepare("INSERT OR IGNORE INTO _iii_instance (id, namespace, grp, key) VALUES (1, ?, ?, ?)").run(
      identity.namespace,
      identity.grp,
      identity.key,
    );
    const open = { ...identity, name, db } as OpenInstance;
    open.instance = new KeyedInstance(identity.key, {
      store: sqliteStore(db),
      wake: (at) => this.#arm(open, at),
      now: this.#now,
      newId: randomUUID,
      alarmTarget: (id) => this.#functions.has(id) && keyedGroupOf(id) === identity.grp,
    });
    this.#open.set(name, open);
    this.#evictIdle();
    return open;
  }

  #evictIdle(): void {
    for (const [name, o] of this.#open) {
      if (this.#open.size <= this.#maxOpen) return;
      if (o.instance.busy) continue;
      o.db.close();
      this.#open.delete(name);
    }
  }

  #arm(open: OpenInstance, at: number | undefined): void {
    const had = this.#timers.get(open.name);
    if (had) clearTimeout(had);
    this.#timers.delete(open.name);
    if (at === undefined || this.#closed) return;
    const identity = { grp: open.grp, key: open.key };
    const timer = setTimeout(
      () => {
        this.#timers.delete(open.name);
        // A wake before the alarm's time (a clamped timer) fires nothing and re-arms.
        void this.fire(identity.grp, identity.key).catch((e: unknown) =>
          this.#log(`alarms of ${identity.grp}/${identity.key}: ${String(e)}`),
        );
      },
      Math.min(Math.max(0, at - this.#now()), MAX_TIMER_MS),
    );
    // Alarms do not keep a process alive on their own (its connection does).
    timer.unref?.();
    this.#timers.set(open.name, timer);
  }
}

function readIdentity(db: DatabaseSync): Identity | undefined {
  try {
    const row = db.prepare("SELECT namespace, grp, key FROM _iii_instance").get() as Record<string, unknown> | undefined;
    if (!row || typeof row.namespace !== "string" || typeof row.grp !== "string" || typeof row.key !== "string") return undefined;
    return { namespace: row.namespace, grp: row.grp, key: row.key };
  } catch {
    return undefined; // not an instance database
  }
}

/** node:sqlite as an instance's store. Transactions nest as savepoints, as the object's do. */
function sqliteStore(db: DatabaseSync): KeyedStore {
  let depth = 0;
  return {
    // Plain objects, as the object's SQLite answers (node:sqlite's rows have no prototype).
    exec: <Row extends Record<string, unknown>>(query: string, ...bindings: SqlValue[]) =>
      db
        .prepare(query)
        .all(...bindings)
        .map((r) => ({ ...r }) as Row),
    transaction<T>(fn: () => T): T {
      const sp = `iii_tx_${depth++}`;
      db.exec(`SAVEPOINT ${sp}`);
      try {
        const out = fn();
        db.exec(`RELEASE ${sp}`);
        return out;
      } catch (e) {
        db.exec(`ROLLBACK TO ${sp}`);
        db.exec(`RELEASE ${sp}`);
        throw e;
      } finally {
        depth--;
      }
    },
  };
}
