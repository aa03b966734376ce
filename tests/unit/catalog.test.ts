// The catalog's holdings counters (engine-do/src/core/catalog.ts): what each owner and each
// principal holds is kept on every put and delete, so quota checks are O(1). The counts must equal
// a full recount after any sequence of puts (new ids, replacements that change owner), deletes,
// principal changes and a reload from SQLite.
import { DatabaseSync } from "node:sqlite";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Catalog, type HoldingKind } from "@iii-edge/engine-do/core/catalog.ts";
import type { Sql } from "@iii-edge/engine-do/core/ports.ts";
import { migrate } from "@iii-edge/engine-do/core/schema.ts";
import { nodeSql } from "@iii-edge/test-support/node-sql";

/** The database as the engine leaves it at start: the schema migrated, before the catalog loads. */
function sqlOver(db: DatabaseSync): Sql {
  const sql = nodeSql(db);
  migrate(sql);
  return sql;
}

/** The slow truth the counters stand in for. */
function recount(c: Catalog, owner: string, kind?: HoldingKind): number {
  let n = 0;
  if (!kind || kind === "functions") for (const f of c.functions.values()) if (f.owner === owner) n++;
  if (!kind || kind === "triggers") for (const t of c.triggers.values()) if (t.owner === owner) n++;
  if (!kind || kind === "triggerTypes") for (const t of c.triggerTypes.values()) if (t.owner === owner) n++;
  return n;
}
function recountPrincipal(c: Catalog, principal: string): number {
  let n = 0;
  const owners = new Set<string>(
    [...c.functions.values(), ...c.triggers.values(), ...c.triggerTypes.values()]
      .map((r) => r.owner)
      .filter((o): o is string => o !== null),
  );
  for (const o of owners) if (c.principalOf(o) === principal) n += recount(c, o);
  for (const t of c.triggers.values()) if (t.owner === null && t.principal === principal) n++;
  return n;
}

const worker = (id: string, sub?: string) => ({
  worker_id: id,
  token: "t",
  connected_at: 1,
  info: {},
  ...(sub ? { grant: { sub, ns: ["*"] } } : {}),
});

describe("Catalog holdings", () => {
  it("put, replace (owner change) and delete of each kind; principals from the worker's grant", () => {
    const c = new Catalog(sqlOver(new DatabaseSync(":memory:")));
    c.putWorker(worker("w1", "bob"));
    c.putWorker(worker("w2", "bob"));
    c.putWorker(worker("w3", "eve"));
    expect(c.principalOf("w1")).toBe("bob");

    c.putFunction({ id: "f1", kind: "worker", owner: "w1" });
    c.putFunction({ id: "f2", kind: "worker", owner: "w1" });
    c.putTriggerType({ id: "tt", owner: "w1" });
    c.putTrigger({ id: "t1", trigger_type: "state", function_id: "f1", config: null, owner: "w1", status: "active" });
    expect([
      c.countOwnedBy("w1"),
      c.countOwnedBy("w1", "functions"),
      c.countOwnedBy("w1", "triggers"),
      c.countOwnedBy("w1", "triggerTypes"),
    ]).toEqual([4, 2, 1, 1]);
    expect(c.countByPrincipal("bob")).toBe(4);

    // Same id again, same owner: no double count.
    c.putFunction({ id: "f1", kind: "worker", owner: "w1", description: "again" });
    expect(c.countOwnedBy("w1")).toBe(4);
    // Same id, another owner: moves.
    c.putFunction({ id: "f2", kind: "worker", owner: "w3" });
    c.putTriggerType({ id: "tt", owner: "w2" });
    c.putTrigger({ id: "t1", trigger_type: "state", function_id: "f1", config: null, owner: "w3", status: "active" });
    expect([c.countOwnedBy("w1"), c.countOwnedBy("w2"), c.countOwnedBy("w3")]).toEqual([1, 1, 2]);
    expect([c.countByPrincipal("bob"), c.countByPrincipal("eve")]).toEqual([2, 2]);

    // Engine-held bindings count for the principal that made them, not for an owner.
    c.putTrigger({ id: "held", trigger_type: "cron", function_id: "f1", config: null, owner: null, principal: "eve", status: "active" });
    expect(c.countByPrincipal("eve")).toBe(3);
    c.putTrigger({ id: "held", trigger_type: "cron", function_id: "f1", config: null, owner: null, principal: "bob", status: "active" });
    expect([c.countByPrincipal("bob"), c.countByPrincipal("eve")]).toEqual([3, 2]);

    // Deletes are ownership-checked: a refused delete changes no count.
    expect(c.deleteFunction("f2", "w1")).toBe(false);
    expect(c.countOwnedBy("w3")).toBe(2);
    expect(c.deleteFunction("f2", "w3")).toBe(true);
    expect(c.deleteTriggerType("tt", "w2")).toBe(true);
    c.deleteTrigger("t1");
    c.deleteTrigger("held");
    c.deleteTrigger("nope");
    expect([c.countOwnedBy("w1"), c.countOwnedBy("w2"), c.countOwnedBy("w3")]).toEqual([1, 0, 0]);
    expect([c.countByPrincipal("bob"), c.countByPrincipal("eve")]).toEqual([1, 0]);

    // A worker gone: its principal no longer counts it; a row without a grant ran open.
    c.deleteWorker("w1");
    expect(c.principalOf("w1")).toBeUndefined();
    expect(c.countByPrincipal("bob")).toBe(0);
    c.putWorker(worker("w4"));
    expect(c.principalOf("w4")).toBe("anonymous");
    // Owners without a worker row (edge hosts) are nobody's until told.
    c.putFunction({ id: "e1", kind: "edge", owner: "HOST" });
    expect(c.countByPrincipal("ops")).toBe(0);
    c.setPrincipalOf("HOST", "ops");
    expect(c.countByPrincipal("ops")).toBe(1);
    c.setPrincipalOf("HOST", undefined);
    expect(c.countByPrincipal("ops")).toBe(0);
  });

  it("a row SQLite refuses changes neither the cache nor the counts", () => {
    const db = new DatabaseSync(":memory:");
    const c = new Catalog(sqlOver(db));
    c.putFunction({ id: "f", kind: "worker", owner: "w1" });
    db.exec("CREATE TRIGGER refuse BEFORE INSERT ON functions BEGIN SELECT RAISE(ABORT, 'full'); END");
    expect(() => c.putFunction({ id: "f", kind: "worker", owner: "w2" })).toThrow(/full/);
    expect(() => c.putFunction({ id: "g", kind: "worker", owner: "w2" })).toThrow(/full/);
    expect(c.functions.get("f")?.owner).toBe("w1");
    expect(c.functions.has("g")).toBe(false);
    expect([c.countOwnedBy("w1"), c.countOwnedBy("w2")]).toEqual([1, 0]);
  });

  it("property: after any sequence of operations (and a reload from SQLite) the counts equal a recount", () => {
    const owners = ["w1", "w2", "w3", "edge:H"];
    const subs = ["bob", "eve"];
    const ids = ["a", "b", "c", "d", "e"];
    const owner = fc.constantFrom(...owners);
    const op = fc.oneof(
      fc.record({ op: fc.constant("fn" as const), id: fc.constantFrom(...ids), owner }),
      fc.record({ op: fc.constant("type" as const), id: fc.constantFrom(...ids), owner }),
      fc.record({
        op: fc.constant("trig" as const),
        id: fc.constantFrom(...ids),
        owner: fc.option(owner, { nil: null }),
        principal: fc.option(fc.constantFrom(...subs), { nil: undefined }),
      }),
      fc.record({ op: fc.constant("delFn" as const), id: fc.constantFrom(...ids), owner }),
      fc.record({ op: fc.constant("delType" as const), id: fc.constantFrom(...ids), owner }),
      fc.record({ op: fc.constant("delTrig" as const), id: fc.constantFrom(...ids) }),
      fc.record({
        op: fc.constant("worker" as const),
        owner: fc.constantFrom("w1", "w2", "w3"),
        sub: fc.option(fc.constantFrom(...subs), { nil: undefined }),
      }),
      fc.record({ op: fc.constant("gone" as const), owner: fc.constantFrom("w1", "w2", "w3") }),
    );
    // One database, emptied before each run: migrating a fresh one 300 times would be most of the
    // test's time on a busy machine.
    const db = new DatabaseSync(":memory:");
    sqlOver(db);
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        for (const table of ["workers", "functions", "trigger_types", "triggers"]) db.exec(`DELETE FROM ${table}`);
        const c = new Catalog(sqlOver(db));
        const check = (cat: Catalog) => {
          for (const o of owners) {
            expect(cat.countOwnedBy(o)).toBe(recount(cat, o));
            for (const k of ["functions", "triggers", "triggerTypes"] as const) expect(cat.countOwnedBy(o, k)).toBe(recount(cat, o, k));
          }
          for (const s of [...subs, "anonymous"]) expect(cat.countByPrincipal(s)).toBe(recountPrincipal(cat, s));
        };
        for (const o of ops) {
          switch (o.op) {
            case "fn":
              c.putFunction({ id: o.id, kind: "worker", owner: o.owner });
              break;
            case "type":
              c.putTriggerType({ id: o.id, owner: o.owner });
              break;
            case "trig":
              c.putTrigger({
                id: o.id,
                trigger_type: "x",
                function_id: "f",
                config: null,
                owner: o.owner,
                status: "active",
                ...(o.principal ? { principal: o.principal } : {}),
              });
              break;
            case "delFn":
              c.deleteFunction(o.id, o.owner);
              break;
            case "delType":
              c.deleteTriggerType(o.id, o.owner);
              break;
            case "delTrig":
              c.deleteTrigger(o.id);
              break;
            case "worker":
              c.putWorker(worker(o.owner, o.sub));
              break;
            case "gone":
              c.deleteWorker(o.owner);
              break;
          }
          check(c);
        }
        // What a new instance (after hibernation or eviction) rebuilds from SQLite is the same.
        const reloaded = new Catalog(sqlOver(db));
        check(reloaded);
        for (const o of owners) expect(reloaded.countOwnedBy(o)).toBe(c.countOwnedBy(o));
        for (const s of [...subs, "anonymous"]) expect(reloaded.countByPrincipal(s)).toBe(c.countByPrincipal(s));
      }),
      { numRuns: 300 },
    );
    // 300 sequences against SQLite: about 1 s alone, several on a loaded 2-core machine.
  }, 30_000);
});
