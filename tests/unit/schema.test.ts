// The object's SQLite schema (engine-do/src/core/schema.ts): one ordered list of migrations and a
// stored version, applied in one transaction when the engine starts. An object deployed before the
// schema was versioned has the tables its features created on wake, some of them in older shapes:
// it must upgrade in place, keeping every row, and end with the same tables as a fresh object.
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import { EngineCore } from "@iii-edge/engine-do/core/engine.ts";
import { installEngine } from "@iii-edge/engine-do/core/install.ts";
import { ENGINE_MIGRATIONS, type Migration, migrate, schemaVersion } from "@iii-edge/engine-do/core/schema.ts";
import { nodePorts, nodeSql } from "@iii-edge/test-support/node-sql";

const LATEST = ENGINE_MIGRATIONS.length;

/** Tables as the code before versioning left an object that predates quotas, auth and queue
 * overrides (the oldest shapes it upgraded on wake), with a row in each. */
function oldObject(): DatabaseSync {
  const db = new DatabaseSync(":memory:");
  db.exec(`
    CREATE TABLE workers (worker_id TEXT PRIMARY KEY, token TEXT NOT NULL, connected_at INTEGER NOT NULL, info TEXT NOT NULL DEFAULT '{}');
    CREATE TABLE functions (id TEXT PRIMARY KEY, kind TEXT NOT NULL, owner TEXT NOT NULL, description TEXT, request_format TEXT, response_format TEXT, metadata TEXT, invocation TEXT);
    CREATE TABLE triggers (id TEXT PRIMARY KEY, trigger_type TEXT NOT NULL, function_id TEXT NOT NULL, config TEXT, metadata TEXT, owner TEXT, status TEXT NOT NULL);
    CREATE TABLE state (scope TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (scope, key));
    CREATE TABLE queue_messages (id TEXT PRIMARY KEY, queue TEXT NOT NULL, function_id TEXT NOT NULL, data TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, next_at INTEGER NOT NULL, leased INTEGER NOT NULL DEFAULT 0, group_key TEXT, enqueued_at INTEGER NOT NULL, seq INTEGER NOT NULL, traceparent TEXT, baggage TEXT, last_error TEXT);
    CREATE INDEX queue_messages_due ON queue_messages (queue, next_at);
    CREATE TABLE cron_schedule (trigger_id TEXT PRIMARY KEY, expression TEXT NOT NULL, next_at INTEGER, running_since INTEGER, last_scheduled INTEGER, skipped INTEGER NOT NULL DEFAULT 0, runs INTEGER NOT NULL DEFAULT 0);
    INSERT INTO workers VALUES ('w-old', 'tok', 1, '{"name":"old"}');
    INSERT INTO functions (id, kind, owner) VALUES ('old::fn', 'worker', 'w-old');
    INSERT INTO triggers VALUES ('t-old', 'cron', 'old::fn', '{"expression":"0 0 * * *"}', NULL, NULL, 'active');
    INSERT INTO state VALUES ('settings', 'theme', '"dark"');
    INSERT INTO queue_messages (id, queue, function_id, data, next_at, enqueued_at, seq) VALUES ('m-1', 'default', 'old::fn', '{"n":1}', 5, 4, 1);
    INSERT INTO cron_schedule (trigger_id, expression, next_at, runs) VALUES ('t-old', '0 0 * * *', 86400000, 7);
  `);
  return db;
}

/** Every table and index with its columns, in order: what two objects' schemas are compared by. */
function shape(db: DatabaseSync): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  const objects = db.prepare("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").all() as {
    type: string;
    name: string;
  }[];
  for (const o of objects) {
    const pragma = o.type === "table" ? "table_info" : "index_info";
    out[`${o.type} ${o.name}`] = (db.prepare(`SELECT name FROM pragma_${pragma}('${o.name}')`).all() as { name: string }[]).map(
      (c) => c.name,
    );
  }
  return out;
}

function engineOver(db: DatabaseSync): EngineCore {
  const core = new EngineCore(nodePorts(db));
  installEngine(core);
  return core;
}

describe("the object's SQLite schema", () => {
  it("creates every table on a fresh object and records the version", () => {
    const db = new DatabaseSync(":memory:");
    const sql = nodeSql(db);
    expect(schemaVersion(sql)).toBe(0);
    expect(migrate(sql)).toEqual({ from: 0, to: LATEST });
    expect(schemaVersion(sql)).toBe(LATEST);
    const tables = Object.keys(shape(db)).filter((k) => k.startsWith("table "));
    for (const t of [
      "workers",
      "functions",
      "triggers",
      "state",
      "state_quota",
      "queue_messages",
      "cron_schedule",
      "channels",
      "stream_items",
    ])
      expect(tables).toContain(`table ${t}`);
  });

  it("upgrades an object made before versioning in place: rows kept, columns added, the same schema as a fresh one", () => {
    const db = oldObject();
    expect(migrate(nodeSql(db))).toEqual({ from: 0, to: LATEST });

    const fresh = new DatabaseSync(":memory:");
    migrate(nodeSql(fresh));
    expect(shape(db)).toEqual(shape(fresh));
    expect(shape(db)["index queue_messages_due"]).toBeUndefined();

    expect(db.prepare("SELECT * FROM workers").all()).toEqual([
      { worker_id: "w-old", token: "tok", connected_at: 1, info: '{"name":"old"}', grant_json: null, ip: null },
    ]);
    expect(db.prepare("SELECT * FROM state").all()).toEqual([
      { scope: "settings", key: "theme", value: '"dark"', principal: null, charge: null },
    ]);
    expect(db.prepare("SELECT id, data, max_retries, backoff_ms, trigger_id FROM queue_messages").all()).toEqual([
      { id: "m-1", data: '{"n":1}', max_retries: null, backoff_ms: null, trigger_id: null },
    ]);
    expect(db.prepare("SELECT trigger_id, runs FROM cron_schedule").all()).toEqual([{ trigger_id: "t-old", runs: 7 }]);
    expect(db.prepare("SELECT id, principal, durable FROM triggers").all()).toEqual([{ id: "t-old", principal: null, durable: null }]);
  });

  it("an upgraded object serves its old data through the engine", async () => {
    const db = oldObject();
    const core = engineOver(db);
    core.start([]);
    expect(schemaVersion(nodeSql(db))).toBe(LATEST);
    expect(await core.invoke({ function_id: "state::get", data: { scope: "settings", key: "theme" } })).toEqual({
      ok: true,
      result: "dark",
    });
    // A write uses the columns the upgrade added (who the value counts for, what it costs).
    expect((await core.invoke({ function_id: "state::set", data: { scope: "settings", key: "lang", value: "en" } })).ok).toBe(true);
    expect(db.prepare("SELECT key, value FROM state ORDER BY key").all()).toEqual([
      { key: "lang", value: '"en"' },
      { key: "theme", value: '"dark"' },
    ]);
  });

  it("runs once: a second start finds the version and changes nothing", () => {
    const db = oldObject();
    const sql = nodeSql(db);
    migrate(sql);
    const before = shape(db);
    expect(migrate(sql)).toEqual({ from: LATEST, to: LATEST });
    engineOver(db);
    expect(shape(db)).toEqual(before);
    expect(db.prepare("SELECT count(*) AS n FROM state").get()).toEqual({ n: 1 });
  });

  it("a migration that fails takes the whole step back: no table, no version", () => {
    const db = new DatabaseSync(":memory:");
    const sql = nodeSql(db);
    const failing: Migration[] = [
      ...ENGINE_MIGRATIONS,
      {
        version: LATEST + 1,
        description: "breaks halfway",
        up: (s) => {
          s.exec("CREATE TABLE half_done (x INTEGER)");
          s.exec("INSERT INTO no_such_table VALUES (1)");
        },
      },
    ];
    expect(() => migrate(sql, failing)).toThrow(/no_such_table/);
    expect(schemaVersion(sql)).toBe(0);
    expect(shape(db)).toEqual({});

    // The good migrations alone still apply, and the next one from there.
    migrate(sql);
    expect(() => migrate(sql, failing)).toThrow(/no_such_table/);
    expect(schemaVersion(sql)).toBe(LATEST);
    expect(shape(db)["table half_done"]).toBeUndefined();
  });

  it("refuses a list whose versions are not 1, 2, 3, …", () => {
    const sql = nodeSql(new DatabaseSync(":memory:"));
    const gap: Migration[] = [...ENGINE_MIGRATIONS, { version: LATEST + 2, description: "skips one", up: () => {} }];
    expect(() => migrate(sql, gap)).toThrow(/numbered/);
    expect(schemaVersion(sql)).toBe(0);
  });
});
