// Built-in functions and trigger types (protocol/README.md §6, §7.1–7.2, §8.3, §8.7), over the
// raw wire: one suite of cases run on both engines — in workerd through the engine Worker
// (builtins.test.ts) and on the engine core served in-process (tests/unit/builtins.test.ts).
// Discovery is pushed on change: a binding to engine::functions-available hears about a new
// function well under a second after its registration.
import { afterEach, describe, expect, it } from "vitest";
import { Wires, eventually, sleep, uuid, type Frame } from "./wire-core.ts";

export interface BuiltinsOptions {
  /** POST /_iii/invoke through the front door, where the engine has one (workerd). */
  invokeHttp?: (body: unknown) => Promise<Response>;
}

export function builtinsCases(opts: BuiltinsOptions = {}): void {
  const wires = new Wires();
  afterEach(() => wires.closeAll());

  describe("engine::*", () => {
    it("engine::workers::register + engine::workers::list (all live connections, sanitised names)", async () => {
      const a = await wires.connect();
      const b = await wires.connect();
      // The SDK sends it as a Void call (§3.13).
      a.send({
        type: "invokefunction",
        function_id: "engine::workers::register",
        action: { type: "void" },
        data: {
          runtime: "node",
          version: "0.22.1",
          name: "bi-a\u0007\u202e",
          description: "d".repeat(400),
          os: "linux",
          pid: 7,
          isolation: null,
          telemetry: { framework: "iii-node" },
        },
      });
      a.serve("bi::counted", () => 1);
      const list = await eventually(async () => {
        const l = (await b.ok("engine::workers::list")) as { workers: Frame[] };
        return l.workers.find((w) => w.id === a.workerId && w.name === "bi-a" && w.function_count === 1) ? l : null;
      });
      expect(list).toBeTruthy();
      const wa = list!.workers.find((w) => w.id === a.workerId)!;
      expect(wa).toMatchObject({
        name: "bi-a",
        runtime: "node",
        version: "0.22.1",
        os: "linux",
        pid: 7,
        status: "connected",
        function_count: 1,
        active_invocations: 0,
      });
      expect(wa.description).toHaveLength(280);
      expect(typeof wa.connected_at_ms).toBe("number");
      // b never described itself (like the browser SDK) and is still listed.
      expect(list!.workers.find((w) => w.id === b.workerId)).toMatchObject({ name: b.workerId, pid: null });
      const filtered = (await b.ok("engine::workers::list", { runtime: "node" })) as { workers: Frame[] };
      expect(filtered.workers.map((w) => w.id)).toEqual([a.workerId]);
    });

    it("engine::functions::list: sorted, internal hidden by default, filters", async () => {
      const a = await wires.connect();
      await a.ok("engine::workers::register", { name: "bi-lister" });
      a.serve("bi::list-a", () => 1, { description: "alpha thing" });
      a.serve("bi::list-b", () => 1, { description: "beta", metadata: { team: "x" } });
      a.serve("bi::list-hidden", () => 1, { metadata: { internal: true } });
      const all = ((await a.ok("engine::functions::list")) as { functions: Frame[] }).functions;
      const ids = all.map((f) => f.function_id);
      expect(ids).toEqual([...ids].sort());
      expect(ids).toEqual(expect.arrayContaining(["bi::list-a", "bi::list-b", "state::get", "state::set"]));
      expect(ids).not.toContain("bi::list-hidden");
      // "internal" = engine::* except engine::queue::* (§7.1 notes).
      expect(ids.filter((id) => id.startsWith("engine::") && !id.startsWith("engine::queue::"))).toEqual([]);
      expect(all.find((f) => f.function_id === "bi::list-b")).toEqual({
        function_id: "bi::list-b",
        worker_name: "bi-lister",
        description: "beta",
        metadata: { team: "x" },
      });
      expect(all.find((f) => f.function_id === "state::get")).toMatchObject({ worker_name: "state" });

      const internal = ((await a.ok("engine::functions::list", { include_internal: true })) as { functions: Frame[] }).functions.map(
        (f) => f.function_id,
      );
      expect(internal).toEqual(expect.arrayContaining(["bi::list-hidden", "engine::functions::list", "engine::workers::register"]));
      const byPrefix = ((await a.ok("engine::functions::list", { prefix: "bi::list-" })) as { functions: Frame[] }).functions.map(
        (f) => f.function_id,
      );
      expect(byPrefix).toEqual(["bi::list-a", "bi::list-b"]);
      const bySearch = ((await a.ok("engine::functions::list", { search: "ALPHA" })) as { functions: Frame[] }).functions.map(
        (f) => f.function_id,
      );
      expect(bySearch).toEqual(["bi::list-a"]);
      const byWorker = ((await a.ok("engine::functions::list", { worker: "bi-lister" })) as { functions: Frame[] }).functions.map(
        (f) => f.function_id,
      );
      expect(byWorker).toEqual(["bi::list-a", "bi::list-b"]);
      const bad = await a.call("engine::functions::list", { include_internal: "yes" });
      expect(bad.error.code).toBe("deserialization_error");
    });

    it("engine::functions::info: single, batch, not_found, bad input", async () => {
      const a = await wires.connect();
      const schema = { type: "object", properties: { a: { type: "number" } } };
      a.serve("bi::info", () => 1, { description: "has info", request_format: schema, response_format: { type: "number" } });
      a.send({ type: "registertrigger", id: "bi-info-trig", trigger_type: "state", function_id: "bi::info", config: { scope: "bi-info" } });
      const d = (await a.ok("engine::functions::info", { function_id: "bi::info" })) as Frame;
      expect(d).toMatchObject({
        function_id: "bi::info",
        description: "has info",
        request_schema: schema,
        response_schema: { type: "number" },
      });
      expect(d.registered_triggers).toEqual([
        expect.objectContaining({ id: "bi-info-trig", trigger_type: "state", config: { scope: "bi-info" } }),
      ]);
      const builtin = (await a.ok("engine::functions::info", { function_id: "state::set" })) as Frame;
      expect(builtin).toMatchObject({ function_id: "state::set", worker_name: "state" });
      const batch = (await a.ok("engine::functions::info", { function_ids: ["bi::info", "bi::nope"] })) as { functions: Frame[] };
      expect(batch.functions[0]).toMatchObject({ function_id: "bi::info" });
      expect(batch.functions[1]).toEqual({ function_id: "bi::nope", error: "not_found" });
      expect((await a.call("engine::functions::info", { function_id: "bi::nope" })).error.code).toBe("not_found");
      expect((await a.call("engine::functions::info", {})).error.code).toBe("deserialization_error");
      expect((await a.call("engine::functions::info", { function_ids: Array.from({ length: 33 }, (_, i) => `f${i}`) })).error.code).toBe(
        "deserialization_error",
      );
    });

    it("engine::triggers::list: built-in and worker-provided trigger types", async () => {
      const a = await wires.connect();
      await a.ok("engine::workers::register", { name: "bi-provider" });
      a.send({ type: "registertriggertype", id: "bi::hook", description: "a webhook" });
      const l = await eventually(async () => {
        const r = ((await a.ok("engine::triggers::list")) as { triggers: Frame[] }).triggers;
        return r.some((t) => t.id === "bi::hook") ? r : null;
      });
      expect(l!.find((t) => t.id === "bi::hook")).toEqual({ id: "bi::hook", worker_name: "bi-provider", description: "a webhook" });
      expect(l!.find((t) => t.id === "state")).toMatchObject({ worker_name: "engine" });
      expect(l!.some((t) => t.id.startsWith("engine::"))).toBe(false);
      const internal = ((await a.ok("engine::triggers::list", { include_internal: true })) as { triggers: Frame[] }).triggers.map(
        (t) => t.id,
      );
      expect(internal).toEqual(expect.arrayContaining(["engine::functions-available", "engine::workers-available", "state", "bi::hook"]));
    });

    it("engine::registered-triggers::list: active and parked bindings, filters", async () => {
      const a = await wires.connect();
      a.registerTrigger("bi-rt-1", "state", "bi::rt", { scope: "rt" }, { metadata: { m: 1 } });
      a.send({ type: "registertrigger", id: "bi-rt-2", trigger_type: "bi::unknown-type", function_id: "bi::rt", config: { x: 1 } });
      a.send({ type: "registertrigger", id: "bi-rt-3", trigger_type: "engine::workers-available", function_id: "bi::rt", config: {} });
      const l = ((await a.ok("engine::registered-triggers::list", { function_id: "bi::rt" })) as { registered_triggers: Frame[] })
        .registered_triggers;
      expect(l.map((t) => t.id)).toEqual(["bi-rt-1", "bi-rt-2"]);
      expect(l[0]).toMatchObject({
        trigger_type: "state",
        function_id: "bi::rt",
        config: { scope: "rt" },
        status: "active",
        worker_name: a.workerId,
      });
      expect(l[1]).toMatchObject({ trigger_type: "bi::unknown-type", status: "parked" });
      expect(typeof l[0]!.config_summary).toBe("string");
      const internal = (
        (await a.ok("engine::registered-triggers::list", { function_id: "bi::rt", include_internal: true })) as {
          registered_triggers: Frame[];
        }
      ).registered_triggers;
      expect(internal.map((t) => t.id)).toEqual(["bi-rt-1", "bi-rt-2", "bi-rt-3"]);
      const byType = (
        (await a.ok("engine::registered-triggers::list", { trigger_type: "bi::unknown-type" })) as { registered_triggers: Frame[] }
      ).registered_triggers;
      expect(byType.map((t) => t.id)).toEqual(["bi-rt-2"]);
    });
  });

  describe("state::*", () => {
    it("set / get / delete / list / list_groups, with the iii result shapes (§7.2)", async () => {
      const a = await wires.connect();
      const scope = `st-${uuid()}`;
      expect(await a.ok("state::set", { scope, key: "k1", value: { n: 1 } })).toEqual({ old_value: null, new_value: { n: 1 } });
      expect(await a.ok("state::set", { scope, key: "k1", value: { n: 2 } })).toEqual({ old_value: { n: 1 }, new_value: { n: 2 } });
      // `data` is an alias of `value`; null is a value.
      expect(await a.ok("state::set", { scope, key: "k2", data: [1, 2] })).toEqual({ old_value: null, new_value: [1, 2] });
      expect(await a.ok("state::set", { scope, key: "k3", value: null })).toEqual({ old_value: null, new_value: null });
      expect(await a.ok("state::get", { scope, key: "k1" })).toEqual({ n: 2 });
      const missing = await a.call("state::get", { scope, key: "absent" });
      expect(missing.error).toBeUndefined();
      expect("result" in missing).toBe(false);
      expect(await a.ok("state::list", { scope })).toEqual([{ n: 2 }, [1, 2], null]);
      // Keys in the same order as the values, paged the same way.
      expect(await a.ok("state::list_keys", { scope })).toEqual({ keys: ["k1", "k2", "k3"], total: 3 });
      expect(await a.ok("state::list_keys", { scope, limit: 2 })).toEqual({ keys: ["k1", "k2"], total: 3, next_offset: 2 });
      expect(await a.ok("state::list", { scope, limit: 2, offset: 2 })).toEqual([null]);
      expect((await a.call("state::list_keys", { key: "k1" })).error?.code).toBe("deserialization_error");
      const groups = (await a.ok("state::list_groups")) as { groups: string[] };
      expect(groups.groups).toContain(scope);
      expect(groups.groups).toEqual([...new Set(groups.groups)].sort());
      // delete returns the previous value itself, nothing when absent.
      expect(await a.ok("state::delete", { scope, key: "k1" })).toEqual({ n: 2 });
      const again = await a.call("state::delete", { scope, key: "k1" });
      expect("result" in again).toBe(false);
      expect(await a.ok("state::list", { scope })).toEqual([[1, 2], null]);
    });

    it("refuses bad input with deserialization_error and too large values with value_too_large", async () => {
      const a = await wires.connect();
      for (const [fn, data] of [
        ["state::set", { scope: "s", key: "k" }],
        ["state::set", { scope: "", key: "k", value: 1 }],
        ["state::get", { scope: "s" }],
        ["state::get", { scope: 1, key: "k" }],
        ["state::delete", {}],
        ["state::update", { scope: "s", key: "k", ops: [{ type: "explode" }] }],
        ["state::update", { scope: "s", key: "k", ops: "nope" }],
        ["state::list", {}],
      ] as const) {
        const r = await a.call(fn, data);
        expect(r.error?.code, `${fn} ${JSON.stringify(data)}`).toBe("deserialization_error");
      }
      // Frames are capped at 1 MiB, so only the HTTP front door can carry a value over the limit.
      if (opts.invokeHttp) {
        const res = await opts.invokeHttp({
          function_id: "state::set",
          payload: { scope: "big", key: "k", value: "x".repeat(1024 * 1024 + 1) },
        });
        expect(((await res.json()) as Frame).error.code).toBe("value_too_large");
      }
    });

    it("state::update applies every op in order and reports per-op errors (§7.2)", async () => {
      const a = await wires.connect();
      const scope = `up-${uuid()}`;
      const r = (await a.ok("state::update", {
        scope,
        key: "doc",
        ops: [
          { type: "set", path: "name", value: "widget" },
          { type: "increment", path: "count", by: 5 },
          { type: "decrement", path: "count", by: 2 },
          { type: "decrement", path: "neg", by: 4 },
          { type: "merge", value: { a: 1 } },
          { type: "merge", path: ["deep", "er"], value: { b: 2 } },
          { type: "append", path: "tags", value: "x" },
          { type: "append", path: "list", value: 1 },
          { type: "append", path: "list", value: 2 },
          { type: "set", path: "gone", value: true },
          { type: "remove", path: "gone" },
          { type: "increment", path: "name", by: 1 },
          { type: "append", path: "count", value: 1 },
          { type: "merge", path: "__proto__", value: { p: 1 } },
        ],
      })) as Frame;
      expect(r.old_value).toBeNull();
      expect(r.new_value).toEqual({ name: "widget", count: 3, neg: -4, a: 1, deep: { er: { b: 2 } }, tags: "x", list: [1, 2] });
      expect(r.errors.map((e: Frame) => [e.op_index, e.code])).toEqual([
        [11, "increment.not_number"],
        [12, "append.type_mismatch"],
        [13, "merge.path.proto_polluted"],
      ]);
      expect(await a.ok("state::get", { scope, key: "doc" })).toEqual(r.new_value);
      const r2 = (await a.ok("state::update", {
        scope,
        key: "doc",
        ops: [
          { type: "set", path: "", value: [1] },
          { type: "append", value: 2 },
        ],
      })) as Frame;
      expect(r2).toEqual({ old_value: r.new_value, new_value: [1, 2] });
    });

    it("state::update increments by fractions and compare-and-sets with `expected`", async () => {
      const a = await wires.connect();
      const scope = `cas-${uuid()}`;
      await a.ok("state::update", { scope, key: "c", ops: [{ type: "increment", path: "spent", by: 0.25 }] });
      const inc = (await a.ok("state::update", { scope, key: "c", ops: [{ type: "increment", path: "spent", by: 1.5 }] })) as Frame;
      expect(inc.new_value).toEqual({ spent: 1.75 });
      // Absent compares as null: a create-if-absent that a second writer loses.
      const created = (await a.ok("state::update", {
        scope,
        key: "rec",
        expected: null,
        ops: [{ type: "set", path: "", value: { state: "a", n: 1 } }],
      })) as Frame;
      expect(created.new_value).toEqual({ state: "a", n: 1 });
      const lost = await a.call("state::update", { scope, key: "rec", expected: null, ops: [{ type: "set", path: "state", value: "b" }] });
      expect(lost.error.code).toBe("state_conflict");
      // Equal whatever the key order; a stale `expected` changes nothing.
      const won = (await a.ok("state::update", {
        scope,
        key: "rec",
        expected: { n: 1, state: "a" },
        ops: [{ type: "set", path: "state", value: "c" }],
      })) as Frame;
      expect(won.new_value).toEqual({ state: "c", n: 1 });
      const stale = await a.call("state::update", {
        scope,
        key: "rec",
        expected: { n: 1, state: "a" },
        ops: [{ type: "set", path: "state", value: "d" }],
      });
      expect(stale.error.code).toBe("state_conflict");
      expect(await a.ok("state::get", { scope, key: "rec" })).toEqual({ state: "c", n: 1 });
      // Not a number: refused as bad input, nothing written.
      expect(
        (await a.call("state::update", { scope, key: "c", ops: [{ type: "increment", path: "spent", by: "2" }] })).error,
      ).toBeDefined();
      expect(await a.ok("state::get", { scope, key: "c" })).toEqual({ spent: 1.75 });
    });
  });

  describe("state trigger (§8.3)", () => {
    // Delivery itself (retries, eviction, order, delivery ids): state-delivery.test.ts.
    it("fires state:created / updated / deleted with the iii payload, filtered by scope and key, with the binding's metadata", async () => {
      const w = await wires.connect();
      const fires: Frame[] = [];
      const scope = `trig-${uuid()}`;
      w.serve("bi::on-state", (_d, f) => (fires.push(f), null));
      w.serve("bi::on-key", (_d, f) => (fires.push(f), null));
      w.registerTrigger(`t-scope-${scope}`, "state", "bi::on-state", { scope }, { metadata: { via: "state-trigger" } });
      w.registerTrigger(`t-key-${scope}`, "state", "bi::on-key", { scope, key: "only" });
      await w.ok("state::set", { scope, key: "k", value: 1 });
      await w.ok("state::set", { scope, key: "k", value: 2 });
      await w.ok("state::update", { scope, key: "k", ops: [{ type: "set", path: "", value: 3 }] });
      await w.ok("state::delete", { scope, key: "k" });
      await w.ok("state::delete", { scope, key: "k" }); // absent: no event
      await w.ok("state::set", { scope: `${scope}-other`, key: "k", value: 1 }); // other scope: no event
      await w.ok("state::set", { scope, key: "only", value: "o" });
      await eventually(() => fires.length >= 6);
      await sleep(100);
      // Fires of one record arrive in write order (records may interleave: "only" can overtake "k").
      const onState = fires
        .filter((f) => f.function_id === "bi::on-state")
        .sort((a, b) => (a.data.key === b.data.key ? 0 : a.data.key === "k" ? -1 : 1));
      expect(onState.map((f) => f.data)).toEqual([
        { type: "state", event_type: "state:created", scope, key: "k", old_value: null, new_value: 1 },
        { type: "state", event_type: "state:updated", scope, key: "k", old_value: 1, new_value: 2 },
        { type: "state", event_type: "state:updated", scope, key: "k", old_value: 2, new_value: 3 },
        { type: "state", event_type: "state:deleted", scope, key: "k", old_value: 3, new_value: null },
        { type: "state", event_type: "state:created", scope, key: "only", old_value: null, new_value: "o" },
      ]);
      for (const f of onState) expect(f.metadata).toEqual({ via: "state-trigger" });
      const onKey = fires.filter((f) => f.function_id === "bi::on-key");
      expect(onKey.map((f) => f.data.key)).toEqual(["only"]);
    });

    it("a condition function returning exactly false skips the target", async () => {
      const w = await wires.connect();
      const scope = `cond-${uuid()}`;
      const fired: unknown[] = [];
      w.serve("bi::cond", (d) => d.new_value !== "skip");
      w.serve("bi::conditioned", (d) => (fired.push(d.new_value), null));
      w.registerTrigger(`t-cond-${scope}`, "state", "bi::conditioned", { scope, condition_function_id: "bi::cond" });
      await w.ok("state::set", { scope, key: "a", value: "skip" });
      await w.ok("state::set", { scope, key: "b", value: "go" });
      await eventually(() => fired.length >= 1);
      await sleep(100);
      expect(fired).toEqual(["go"]);
    });

    it("an invalid config is refused with triggerregistrationresult trigger_registration_failed", async () => {
      const w = await wires.connect();
      w.send({ type: "registertrigger", id: "t-bad-state", trigger_type: "state", function_id: "bi::x", config: { scope: 5 } });
      const r = await w.next((f) => f.type === "triggerregistrationresult");
      expect(r).toMatchObject({
        id: "t-bad-state",
        trigger_type: "state",
        function_id: "bi::x",
        error: { code: "trigger_registration_failed" },
      });
      const l = ((await w.ok("engine::registered-triggers::list", { function_id: "bi::x" })) as { registered_triggers: Frame[] })
        .registered_triggers;
      expect(l).toEqual([]);
    });
  });

  describe("discovery is pushed on change (§6)", () => {
    it("engine::functions-available fires within 500 ms of a registration, only when the set of ids changes", async () => {
      const watcher = await wires.connect();
      const events: { at: number; f: Frame }[] = [];
      watcher.serve("bi::on-functions", (_d, f) => (events.push({ at: Date.now(), f }), null));
      await sleep(50); // let the watcher's own registration settle before binding
      watcher.registerTrigger("t-fa", "engine::functions-available", "bi::on-functions", {}, { metadata: { m: "fa" } });
      await watcher.ok("state::list_groups"); // binding processed (frames are handled in order)
      // Binding does not fire by itself.
      await sleep(100);
      expect(events).toEqual([]);

      const other = await wires.connect();
      const t0 = Date.now();
      other.serve("bi::fresh", () => 1, { description: "fresh one" });
      await eventually(() => events.length >= 1, 2_000, 5);
      expect(events[0]!.at - t0).toBeLessThan(500);
      const payload = events[0]!.f.data;
      expect(payload.event).toBe("functions_changed");
      // The full, unfiltered list, built-ins included.
      expect(payload.functions).toEqual(
        expect.arrayContaining([
          { function_id: "bi::fresh", worker_name: other.workerId, description: "fresh one" },
          expect.objectContaining({ function_id: "engine::functions::list" }),
        ]),
      );
      expect(events[0]!.f.metadata).toEqual({ m: "fa" });
      // Sent without waiting for a result: no invocation id, so the watcher answers nothing.
      expect(events[0]!.f.invocation_id).toBeUndefined();

      // Same id again (new description): the set did not change, so no event of its own. The next
      // registrations are the barrier: every later event already lists them. (How a burst is
      // coalesced into one event is pinned with held timers in tests/unit/discovery-delta.test.ts;
      // over a socket on a loaded machine, two frames may land in two debounce windows.)
      other.serve("bi::fresh", () => 1, { description: "new text" });
      other.serve("bi::fresh-2", () => 1);
      other.serve("bi::fresh-3", () => 1);
      const ids = (e: { f: Frame }) => e.f.data.functions.map((f: Frame) => f.function_id) as string[];
      await eventually(() => events.length >= 2 && ids(events.at(-1)!).includes("bi::fresh-3"));
      for (const e of events.slice(1)) expect(ids(e)).toContain("bi::fresh-2");
      const settled = events.length;
      await other.close();
      await eventually(() => events.length > settled);
      expect(ids(events.at(-1)!)).not.toContain("bi::fresh");
    });

    it("engine::workers-available fires on connect, metadata update and disconnect", async () => {
      const watcher = await wires.connect();
      const events: Frame[] = [];
      watcher.serve("bi::on-workers", (d) => (events.push(d), null));
      watcher.registerTrigger("t-wa", "engine::workers-available", "bi::on-workers", {});
      await watcher.ok("state::list_groups");
      const w = await wires.connect();
      w.send({ type: "invokefunction", function_id: "engine::workers::register", data: { name: "bi-wa" }, action: { type: "void" } });
      await eventually(() => events.some((e) => e.worker_id === w.workerId && e.event === "worker_metadata_updated"));
      await w.close();
      await eventually(() => events.some((e) => e.worker_id === w.workerId && e.event === "worker_disconnected"));
      expect(events.filter((e) => e.worker_id === w.workerId).map((e) => e.event)).toEqual([
        "worker_connected",
        "worker_metadata_updated",
        "worker_disconnected",
      ]);
    });

    it("engine::triggers-available pushes the bindings on change, full and {delta: true}, without invocation ids", async () => {
      const tag = uuid().slice(0, 8);
      const watcher = await wires.connect();
      const full: Frame[] = [];
      const delta: Frame[] = [];
      watcher.serve(`bi::on-triggers-${tag}`, (_d, f) => (full.push(f), null));
      watcher.serve(`bi::on-triggers-delta-${tag}`, (_d, f) => (delta.push(f), null));
      for (const [fn, config] of [
        [`bi::on-triggers-${tag}`, {}],
        [`bi::on-triggers-delta-${tag}`, { delta: true }],
      ] as const)
        watcher.send({ type: "registertrigger", id: `t-${fn}`, trigger_type: "engine::triggers-available", function_id: fn, config });
      await watcher.ok("state::list_groups"); // both bindings processed (frames are handled in order)

      const maker = await wires.connect();
      const id = `bi-tav-${tag}`;
      maker.serve(`bi::hooked-${tag}`, () => 1);
      maker.send({ type: "registertrigger", id, trigger_type: `bi::custom-${tag}`, function_id: `bi::hooked-${tag}`, config: { k: 1 } });
      const added = await eventually(() => delta.find((f) => f.data.added?.some((t: Frame) => t.id === id)), 10_000, 5);
      expect(added!.invocation_id).toBeUndefined();
      expect(added!.data).toMatchObject({ event: "triggers_changed", removed: [] });
      const entry = added!.data.added.find((t: Frame) => t.id === id);
      expect(entry).toMatchObject({
        id,
        trigger_type: `bi::custom-${tag}`,
        function_id: `bi::hooked-${tag}`,
        worker_name: maker.workerId,
        config: { k: 1 },
        status: "parked",
      });
      // The entry is the one engine::registered-triggers::list answers.
      const listed = (await watcher.ok("engine::registered-triggers::list", { function_id: `bi::hooked-${tag}` })) as {
        registered_triggers: Frame[];
      };
      expect(listed.registered_triggers).toEqual([entry]);
      const inFull = await eventually(() => full.find((f) => f.data.triggers?.some((t: Frame) => t.id === id)), 10_000, 5);
      expect(inFull!.invocation_id).toBeUndefined();
      expect(inFull!.data.event).toBe("triggers_changed");
      // engine::* bindings (the subscriptions themselves) are not listed.
      expect(inFull!.data.triggers.some((t: Frame) => String(t.trigger_type).startsWith("engine::"))).toBe(false);

      // The maker's disconnect removes its binding: one more change.
      await maker.close();
      await eventually(() => delta.some((f) => f.data.removed?.includes(id)), 10_000, 5);
      await eventually(() => full.length > 0 && !full.at(-1)!.data.triggers.some((t: Frame) => t.id === id), 10_000, 5);
    });

    it.each([
      ["engine::triggers-available", "engine::registered-triggers::list"],
      ["engine::functions-available", "engine::functions::list"],
    ])("%s is refused to a maker whose grant may not call %s", async (type, listing) => {
      const tag = uuid().slice(0, 8);
      const w = await wires.connect("/", { sub: `bi-nolist-${tag}`, ns: ["*"], call: ["bi::*"], register: ["bi::"] });
      w.serve(`bi::nolist-${tag}`, () => null);
      w.send({ type: "registertrigger", id: `t-nolist-${tag}`, trigger_type: type, function_id: `bi::nolist-${tag}`, config: {} });
      const r = await w.next((f) => f.type === "triggerregistrationresult" && f.id === `t-nolist-${tag}`);
      expect(r.error).toMatchObject({ code: "forbidden" });
      expect(r.error.message).toContain(listing);
    });
  });
}
