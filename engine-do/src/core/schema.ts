// The object's SQLite schema, in one place: an ordered list of migrations and the version an object
// has reached, applied once when the engine starts, all in one transaction. The features keep their
// own queries; none of them creates a table. No `cloudflare:*` import: the same code runs over
// node:sqlite in the unit tests (docs/engineering.md Style §1).
import type { Sql } from "./ports.ts";

export interface Migration {
  /** 1, 2, 3, …: the version an object has once this migration ran. */
  readonly version: number;
  readonly description: string;
  up(sql: Sql): void;
}

/** Where an object keeps the version its schema has reached. A table, not `PRAGMA user_version`:
 * Durable Object SQLite only lets a few pragmas through. One row, so a read is one lookup. */
const VERSION_TABLE = "schema_version";

/** The columns `table` has now (empty when it does not exist). */
function columnsOf(sql: Sql, table: string): Set<string> {
  return new Set(sql.exec<{ name: string }>(`SELECT name FROM pragma_table_info('${table}')`).map((c) => c.name));
}

/** Add each `name TYPE` column `table` lacks: a table made by older code gets what it was missing. */
function addMissingColumns(sql: Sql, table: string, columns: readonly string[]): void {
  const has = columnsOf(sql, table);
  for (const column of columns) if (!has.has(column.split(" ")[0]!)) sql.exec(`ALTER TABLE ${table} ADD COLUMN ${column}`);
}

/**
 * Version 1 is the schema as it stood when each feature still created its own tables on wake. It is
 * written so that it also completes an object made by any of that code: every table and index is
 * `IF NOT EXISTS`, and the columns added over that time are added where missing. A fresh object gets
 * the very tables that code made, columns in the same order (positional inserts rely on it).
 */
function baseline(sql: Sql): void {
  // The catalog (catalog.ts): workers, functions, trigger types and bindings.
  sql.exec(
    "CREATE TABLE IF NOT EXISTS workers (worker_id TEXT PRIMARY KEY, token TEXT NOT NULL, connected_at INTEGER NOT NULL, info TEXT NOT NULL DEFAULT '{}')",
  );
  sql.exec(
    "CREATE TABLE IF NOT EXISTS functions (id TEXT PRIMARY KEY, kind TEXT NOT NULL, owner TEXT NOT NULL, description TEXT, request_format TEXT, response_format TEXT, metadata TEXT, invocation TEXT)",
  );
  sql.exec(
    "CREATE TABLE IF NOT EXISTS trigger_types (id TEXT PRIMARY KEY, owner TEXT NOT NULL, description TEXT, trigger_request_format TEXT, call_request_format TEXT)",
  );
  sql.exec(
    "CREATE TABLE IF NOT EXISTS triggers (id TEXT PRIMARY KEY, trigger_type TEXT NOT NULL, function_id TEXT NOT NULL, config TEXT, metadata TEXT, owner TEXT, status TEXT NOT NULL)",
  );
  sql.exec("CREATE INDEX IF NOT EXISTS triggers_by_type ON triggers (trigger_type)");
  // A worker's grant (absent: a row from before auth, which ran open) and address; a binding's maker
  // and whether it outlives the maker's connections.
  addMissingColumns(sql, "workers", ["grant_json TEXT", "ip TEXT"]);
  addMissingColumns(sql, "triggers", ["principal TEXT", "durable INTEGER"]);

  // Routed calls persisted past PERSIST_AFTER_MS, so an eviction does not lose them (invocations.ts).
  sql.exec(
    "CREATE TABLE IF NOT EXISTS routed_calls (id TEXT PRIMARY KEY, function_id TEXT NOT NULL, target TEXT NOT NULL, caller TEXT NOT NULL, deadline INTEGER NOT NULL, traceparent TEXT, baggage TEXT)",
  );

  // iii's RBAC listener: each connection's session and the ids its functions were registered under (rbac.ts).
  sql.exec("CREATE TABLE IF NOT EXISTS rbac_sessions (worker_id TEXT PRIMARY KEY, session TEXT NOT NULL)");
  sql.exec("CREATE TABLE IF NOT EXISTS rbac_names (function_id TEXT PRIMARY KEY, worker_id TEXT NOT NULL, local_id TEXT NOT NULL)");

  // The durable queue backend (queues/durable-queue.ts).
  sql.exec(
    "CREATE TABLE IF NOT EXISTS queue_messages (id TEXT PRIMARY KEY, queue TEXT NOT NULL, function_id TEXT NOT NULL, data TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, next_at INTEGER NOT NULL, leased INTEGER NOT NULL DEFAULT 0, group_key TEXT, enqueued_at INTEGER NOT NULL, seq INTEGER NOT NULL, traceparent TEXT, baggage TEXT, last_error TEXT, max_retries INTEGER, backoff_ms INTEGER)",
  );
  // Per-message retry overrides, and the binding of a state trigger's fire.
  addMissingColumns(sql, "queue_messages", ["max_retries INTEGER", "backoff_ms INTEGER", "trigger_id TEXT"]);
  sql.exec("CREATE INDEX IF NOT EXISTS queue_messages_seq ON queue_messages (queue, group_key, seq)");
  // What the pump and nextDue ask, each answered from an index whatever the depth (a flood of
  // thousands of rows must not make every delivery scan them all): the due, unleased rows of a
  // queue in enqueue order, and the earliest due time / lease end of a queue.
  sql.exec("CREATE INDEX IF NOT EXISTS queue_messages_ready ON queue_messages (queue, leased, seq)");
  sql.exec("CREATE INDEX IF NOT EXISTS queue_messages_next ON queue_messages (queue, leased, next_at)");
  // (queue, next_at) is covered by the two above.
  sql.exec("DROP INDEX IF EXISTS queue_messages_due");
  // Deliveries of the Cloudflare Queues backend already run, for at-most-once (queues/cloudflare-queue.ts).
  sql.exec("CREATE TABLE IF NOT EXISTS queue_delivered (id TEXT PRIMARY KEY, at INTEGER NOT NULL)");
  // Dead letters when no D1 is bound (queues/dead-letters.ts).
  sql.exec(
    "CREATE TABLE IF NOT EXISTS local_dead_letters (id TEXT PRIMARY KEY, queue TEXT NOT NULL, function_id TEXT NOT NULL, data TEXT NOT NULL, attempts INTEGER NOT NULL, last_error TEXT NOT NULL, enqueued_at INTEGER NOT NULL, failed_at INTEGER NOT NULL, traceparent TEXT)",
  );
  // Idempotency receipts of `enqueue` (queues/receipts.ts).
  sql.exec(
    "CREATE TABLE IF NOT EXISTS queue_receipts (queue TEXT NOT NULL, idempotency_key TEXT NOT NULL, receipt TEXT NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (queue, idempotency_key))",
  );

  // Channels and their buffered items (channels/store.ts).
  sql.exec(
    "CREATE TABLE IF NOT EXISTS channels (id TEXT PRIMARY KEY, access_key TEXT NOT NULL, created_at INTEGER NOT NULL, buffer_size INTEGER NOT NULL, writer INTEGER NOT NULL, reader INTEGER NOT NULL, end_code INTEGER, end_reason TEXT, items INTEGER NOT NULL, bytes INTEGER NOT NULL, next_seq INTEGER NOT NULL DEFAULT 0, sweep_at INTEGER NOT NULL)",
  );
  sql.exec("CREATE INDEX IF NOT EXISTS channels_sweep ON channels (sweep_at)");
  sql.exec(
    "CREATE TABLE IF NOT EXISTS channel_items (channel_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, data, PRIMARY KEY (channel_id, seq))",
  );

  // Streams: items, browser subscriptions, and the grant the front door gave each browser socket,
  // so it survives hibernation (builtins/streams.ts).
  sql.exec(
    "CREATE TABLE IF NOT EXISTS stream_items (stream_name TEXT NOT NULL, group_id TEXT NOT NULL, item_id TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (stream_name, group_id, item_id))",
  );
  sql.exec(
    "CREATE TABLE IF NOT EXISTS stream_subs (socket_id TEXT NOT NULL, subscription_id TEXT NOT NULL, stream_name TEXT NOT NULL, group_id TEXT NOT NULL, item_id TEXT, context TEXT, PRIMARY KEY (socket_id, subscription_id))",
  );
  sql.exec("CREATE INDEX IF NOT EXISTS stream_subs_by_group ON stream_subs (stream_name, group_id)");
  sql.exec("CREATE TABLE IF NOT EXISTS stream_socket_grants (socket_id TEXT PRIMARY KEY NOT NULL, grant_json TEXT NOT NULL)");

  // State (builtins/state.ts): who each value counts for (the principal that last wrote it; NULL: a
  // trusted caller, or written before quotas existed) and what it costs; and what each principal
  // holds, kept in the same transaction as every write, so a quota check is one row read.
  sql.exec("CREATE TABLE IF NOT EXISTS state (scope TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (scope, key))");
  addMissingColumns(sql, "state", ["principal TEXT", "charge INTEGER"]);
  sql.exec("CREATE TABLE IF NOT EXISTS state_quota (principal TEXT PRIMARY KEY, keys INTEGER NOT NULL, bytes INTEGER NOT NULL)");

  // Cron schedules (triggers/cron.ts).
  sql.exec(
    "CREATE TABLE IF NOT EXISTS cron_schedule (trigger_id TEXT PRIMARY KEY, expression TEXT NOT NULL, next_at INTEGER, running_since INTEGER, last_scheduled INTEGER, skipped INTEGER NOT NULL DEFAULT 0, runs INTEGER NOT NULL DEFAULT 0)",
  );
  sql.exec("CREATE INDEX IF NOT EXISTS cron_schedule_next ON cron_schedule (next_at)");

  // Which connection shard holds each worker, on the catalog object of a sharded namespace
  // (../shards/catalog-side.ts). Empty elsewhere.
  sql.exec("CREATE TABLE IF NOT EXISTS shard_conns (worker_id TEXT PRIMARY KEY, shard TEXT NOT NULL)");
}

/** The Engine object's migrations, oldest first. A new one is appended, never edited once released. */
export const ENGINE_MIGRATIONS: readonly Migration[] = [
  { version: 1, description: "baseline: the tables each feature created on wake", up: baseline },
];

/** The PrincipalConnections object's migrations (../principal-connections.ts): its own database. */
export const PRINCIPAL_CONNECTIONS_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: "baseline: connection leases",
    up: (sql) =>
      sql.exec(
        "CREATE TABLE IF NOT EXISTS leases (object TEXT NOT NULL, id TEXT NOT NULL, since INTEGER NOT NULL, PRIMARY KEY (object, id))",
      ),
  },
];

/** The version `sql`'s schema has reached: 0 for an object that never ran a migration. */
export function schemaVersion(sql: Sql): number {
  if (columnsOf(sql, VERSION_TABLE).size === 0) return 0;
  return Number(sql.exec<{ version: number }>(`SELECT version FROM ${VERSION_TABLE}`)[0]?.version ?? 0);
}

/**
 * Bring `sql` to the last of `migrations`: those past its version run in order, and the new version
 * is written, in one transaction, so an object never stays half-migrated (a migration that throws
 * leaves the schema and the version as they were, and the error reaches the object's start). An
 * object already there costs one read. A version beyond the list (a rollback to older code) is left
 * alone: the older code reads the tables it knows.
 */
export function migrate(sql: Sql, migrations: readonly Migration[] = ENGINE_MIGRATIONS): { from: number; to: number } {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1) throw new Error(`migration ${i + 1} is numbered ${m.version}: versions must run 1, 2, 3, …`);
  });
  const from = schemaVersion(sql);
  const pending = migrations.filter((m) => m.version > from);
  if (pending.length === 0) return { from, to: from };
  return sql.transaction(() => {
    sql.exec(`CREATE TABLE IF NOT EXISTS ${VERSION_TABLE} (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)`);
    for (const m of pending) m.up(sql);
    const to = pending[pending.length - 1]!.version;
    sql.exec(`INSERT INTO ${VERSION_TABLE} (id, version) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET version = excluded.version`, to);
    return { from, to };
  });
}
