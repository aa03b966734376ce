// The channel store over SQLite keeps each row in memory once read (a writer's every chunk looks at
// its channel's row): what it answers must always be what the table holds, which a second store on
// the same database — an object woken after an eviction, with nothing in memory — reads.
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import { newChannelRow, SqlChannelStore, type ChannelRow } from "@iii-edge/engine-do/core/channels/store.ts";
import { migrate } from "@iii-edge/engine-do/core/schema.ts";
import { nodeSql } from "@iii-edge/test-support/node-sql";

const row = (id: string, over: Partial<ChannelRow> = {}): ChannelRow => ({
  ...newChannelRow({ id, access_key: `key-${id}`, created_at: 1, buffer_size: 4, sweep_at: 100 }),
  ...over,
});

function setup() {
  const sql = nodeSql(new DatabaseSync(":memory:"));
  migrate(sql);
  const store = new SqlChannelStore(sql);
  /** The row as the table holds it (a store with nothing in memory reads it). */
  const stored = (id: string) => new SqlChannelStore(sql).get(id);
  return { sql, store, stored };
}

describe("SqlChannelStore's rows in memory", () => {
  it("match the table after every change: attach, buffer, drain, end, sweep, remove", () => {
    const { store, stored } = setup();
    store.insert(row("a"));
    const same = () => expect(store.get("a")).toEqual(stored("a"));
    same();
    store.update("a", { writer: 1 });
    same();
    // (Text only: node:sqlite binds no ArrayBuffer, which workerd's SQLite stores as a blob.)
    store.append("a", { type: "text", value: "héllo" }); // 6 UTF-8 bytes
    store.append("a", { type: "text", value: "abc" });
    same();
    expect(store.get("a")).toMatchObject({ items: 2, bytes: 9 });
    store.update("a", { reader: 1 });
    expect(store.drain("a").map((i) => i.value)).toEqual(["héllo", "abc"]);
    same();
    expect(store.get("a")).toMatchObject({ items: 0, bytes: 0, reader: 1 });
    store.update("a", { writer: 2, end_code: 1008, end_reason: "flooding" });
    store.update("a", { sweep_at: 500 });
    same();
    expect(store.get("a")).toMatchObject({ writer: 2, end_code: 1008, end_reason: "flooding", sweep_at: 500 });
    expect(store.due(1_000).map((r) => r.id)).toEqual(["a"]);
    store.remove("a");
    expect(store.get("a")).toBeUndefined();
    expect(stored("a")).toBeUndefined();
  });

  it("a row read once is the same after the table is read again, and one the store never held is read from the table", () => {
    const { sql, store, stored } = setup();
    // Written by an earlier instance of the object (before an eviction): this store reads it.
    new SqlChannelStore(sql).insert(row("b", { writer: 1, reader: 1 }));
    expect(store.get("b")).toEqual(stored("b"));
    store.append("b", { type: "text", value: "x" });
    expect(store.get("b")).toEqual(stored("b"));
    expect(store.get("nope")).toBeUndefined();
  });

  it("an append to a channel that is gone changes nothing", () => {
    const { store, stored } = setup();
    store.insert(row("c"));
    store.remove("c");
    store.append("c", { type: "text", value: "late" });
    expect(store.get("c")).toBeUndefined();
    expect(stored("c")).toBeUndefined();
  });

  it("a failed statement leaves the row in memory as the table has it", () => {
    const { sql, store, stored } = setup();
    store.insert(row("d", { writer: 1 }));
    // The item table refuses the next insert: the append's transaction is rolled back whole.
    sql.exec("CREATE TRIGGER refuse BEFORE INSERT ON channel_items BEGIN SELECT RAISE(ABORT, 'refused'); END");
    expect(() => store.append("d", { type: "text", value: "x" })).toThrow(/refused/);
    expect(store.get("d")).toEqual(stored("d"));
    expect(store.get("d")).toMatchObject({ items: 0, bytes: 0 });
  });
});
