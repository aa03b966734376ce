// Keyed instances in a Node process (sdk-edge keyed.ts + keyed-node.ts) without an engine: the
// line of calls per key, its bound, transactions, alarms refused, kept across a restart and
// fired once, and instances closed past the open bound keeping their data.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { MAX_KEYED_WAITING } from "@iii-edge/protocol";
import { NodeKeyedInstances } from "@iii-edge/sdk-edge/worker-node";
import type { InvocationContext } from "@iii-edge/sdk-edge/node";
import type { KeyedContext } from "@iii-edge/sdk-edge/worker";
import { afterEach, describe, expect, it } from "vitest";
import { eventually } from "@iii-edge/test-support/wait";

const dirs: string[] = [];
const open: NodeKeyedInstances[] = [];
afterEach(() => {
  for (const k of open.splice(0)) k.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function instances(dir = mkdtempSync(path.join(tmpdir(), "keyed-unit-")), maxOpen?: number) {
  if (!dirs.includes(dir)) dirs.push(dir);
  const k = new NodeKeyedInstances({ dir, namespace: "default", ...(maxOpen ? { maxOpen } : {}), log: () => undefined });
  open.push(k);
  return k;
}
const ctx = (function_id: string): InvocationContext => ({
  function_id,
  metadata: undefined,
  trigger: () => Promise.reject(new Error("no engine here")),
});
const noTrigger = ctx("x").trigger;

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe("keyed instances in Node", () => {
  it("runs one key's calls one at a time and other keys' meanwhile", async () => {
    const k = instances();
    const started: string[] = [];
    const gates = new Map<string, ReturnType<typeof deferred>>();
    const run = k.declare(
      "t::hold",
      "id",
      async (data: { id: string; tag: string }) => {
        started.push(data.tag);
        const g = deferred();
        gates.set(data.tag, g);
        await g.promise;
        return data.tag;
      },
      noTrigger,
    );
    const a1 = run({ id: "a", tag: "a1" }, ctx("t::hold"));
    const a2 = run({ id: "a", tag: "a2" }, ctx("t::hold"));
    const b1 = run({ id: "b", tag: "b1" }, ctx("t::hold"));
    await eventually(() => started.length === 2, 5_000, "two calls started");
    expect(started.sort()).toEqual(["a1", "b1"]);
    gates.get("b1")?.resolve();
    expect(await b1).toBe("b1");
    expect(started).not.toContain("a2");
    gates.get("a1")?.resolve();
    expect(await a1).toBe("a1");
    await eventually(() => gates.has("a2"), 5_000, "a2 started");
    gates.get("a2")?.resolve();
    expect(await a2).toBe("a2");
  });

  it("refuses a call past the waiting bound at once, and one without its key before it runs", async () => {
    const k = instances();
    const hold = deferred();
    let ran = 0;
    const run = k.declare(
      "t::slow",
      "id",
      async () => {
        ran++;
        await hold.promise;
      },
      noTrigger,
    );
    const first = run({ id: "a" }, ctx("t::slow"));
    await eventually(() => ran === 1, 5_000, "the first call running");
    const waiting = Array.from({ length: MAX_KEYED_WAITING }, () => run({ id: "a" }, ctx("t::slow")));
    await expect(run({ id: "a" }, ctx("t::slow"))).rejects.toMatchObject({ code: "too_many_calls" });
    await expect(run({}, ctx("t::slow"))).rejects.toMatchObject({ code: "invalid_arguments" });
    hold.resolve();
    await Promise.all([first, ...waiting]);
    expect(ran).toBe(MAX_KEYED_WAITING + 1);
  });

  it("a transaction's writes all land or none do", async () => {
    const k = instances();
    const run = k.declare(
      "t::tx",
      "id",
      (data: { id: string; fail: boolean }, c: KeyedContext) => {
        c.sql.exec("CREATE TABLE IF NOT EXISTS items (n INTEGER)");
        try {
          c.transaction(() => {
            c.sql.exec("INSERT INTO items (n) VALUES (1)");
            c.sql.exec("INSERT INTO items (n) VALUES (2)");
            if (data.fail) throw new Error("no");
          });
        } catch {
          // the rollback is what is looked at
        }
        return c.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM items")[0]?.n;
      },
      noTrigger,
    );
    expect(await run({ id: "a", fail: true }, ctx("t::tx"))).toBe(0);
    expect(await run({ id: "a", fail: false }, ctx("t::tx"))).toBe(2);
  });

  it("refuses an alarm whose target is not a keyed function of the same group", async () => {
    const k = instances();
    k.declare("other::f", "id", () => undefined, noTrigger);
    const run = k.declare(
      "t::set",
      "id",
      (data: { id: string; target: string }, c: KeyedContext) => c.setAlarm(Date.now(), data.target),
      noTrigger,
    );
    for (const target of ["t::nope", "other::f"]) {
      await expect(run({ id: "a", target }, ctx("t::set"))).rejects.toMatchObject({ code: "invalid_arguments" });
    }
  });

  it("an alarm set before a restart fires after it, once", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "keyed-unit-"));
    const fired: string[] = [];
    const declare = (k: NodeKeyedInstances) => {
      k.declare("t::fire", "id", (data: { id: string; n: number }) => void fired.push(`${data.id}:${data.n}`), noTrigger);
      return k.declare("t::later", "id", (_: unknown, c: KeyedContext) => c.setAlarm(Date.now() + 60_000, "t::fire", { n: 1 }), noTrigger);
    };
    const first = instances(dir);
    await declare(first)({ id: "a" }, ctx("t::later"));
    first.close();
    // Restarted an hour later: the alarm is due, and the new process's resume arms it.
    const second = new NodeKeyedInstances({ dir, namespace: "default", now: () => Date.now() + 3_600_000 });
    open.push(second);
    declare(second);
    second.resume();
    await eventually(() => fired.length === 1, 5_000, "the alarm after the restart");
    expect(await second.fire("t", "a")).toBe(0);
    expect(fired).toEqual(["a:1"]);
  });

  it("two wakes at once fire a due alarm once: each re-reads it in its turn, and the first claims it", async () => {
    let now = 1_000_000;
    const dir = mkdtempSync(path.join(tmpdir(), "keyed-unit-"));
    dirs.push(dir);
    const k = new NodeKeyedInstances({ dir, namespace: "default", now: () => now, log: () => undefined });
    open.push(k);
    let fired = 0;
    k.declare("t::fire", "id", () => void fired++, noTrigger);
    const set = k.declare("t::set", "id", (_: unknown, c: KeyedContext) => c.setAlarm(now + 60_000, "t::fire"), noTrigger);
    await set({ id: "a" }, ctx("t::set"));
    now += 120_000;
    expect(await Promise.all([k.fire("t", "a"), k.fire("t", "a"), k.fire("t", "a")])).toEqual(expect.arrayContaining([1, 0, 0]));
    expect(fired).toBe(1);
  });

  it("closes instances past the open bound and finds their data again", async () => {
    const k = instances(undefined, 2);
    const run = k.declare(
      "t::inc",
      "id",
      (_: unknown, c: KeyedContext) => {
        c.sql.exec("CREATE TABLE IF NOT EXISTS n (v INTEGER)");
        c.sql.exec("INSERT INTO n (v) VALUES (1)");
        return c.sql.exec<{ c: number }>("SELECT COUNT(*) AS c FROM n")[0]?.c;
      },
      noTrigger,
    );
    for (const id of ["a", "b", "c", "d"]) expect(await run({ id }, ctx("t::inc"))).toBe(1);
    for (const id of ["a", "b", "c", "d"]) expect(await run({ id }, ctx("t::inc"))).toBe(2);
  });
});
