// What a state write causes, delivered durably (protocol/README.md §7.2, §8.3): `state::set` /
// `state::update` with `enqueue` store one queue message in the write's own transaction, only
// when the write happens; `state` trigger fires are durable messages written with the write,
// retried until their handler succeeds and kept across eviction, with one delivery id (the
// invocation id of every attempt) per fire. Over the wire, against the real Engine object.
// The cases that need nothing of workerd are in state-delivery.case.ts, run here and on the engine core
// (tests/unit/state-delivery.test.ts); this file adds those that need the object itself.
import { afterEach, describe, expect, it } from "vitest";
import { Wires, engineStub, eventually, evictEngine, sleep, uuid, type Frame } from "./wire.ts";
import { stateDeliveryCases } from "./state-delivery.case.ts";

stateDeliveryCases();

const wires = new Wires();
afterEach(() => wires.closeAll());

/** How long to watch for a delivery that must not come. */
const QUIET_MS = 400;
/** `jobs` (wrangler.toml): durable, standard. `turns`: durable fifo by session_id. `default`: Cloudflare Queues. */
const DURABLE = "jobs";

describe("state::set / state::update with enqueue (§7.2)", () => {
  it("refuses, writing nothing: a Cloudflare-backed queue (invalid_arguments), an unknown queue, a fifo payload without its group, bad input", async () => {
    const w = await wires.connect();
    const scope = `refuse-${uuid()}`;
    const attempt = async (enqueue: unknown) => (await w.call("state::set", { scope, key: "k", value: 1, enqueue })).error?.code;
    expect(await attempt({ function_id: "se::x", queue: "default" })).toBe("invalid_arguments");
    expect(await attempt({ function_id: "se::x", queue: "no-such-queue" })).toBe("enqueue_error");
    expect(await attempt({ function_id: "se::x", queue: "turns", payload: { no_session: true } })).toBe("enqueue_error");
    expect(await attempt({ function_id: "se::x" })).toBe("deserialization_error");
    expect(await attempt({ function_id: "", queue: DURABLE })).toBe("deserialization_error");
    const upd = await w.call("state::update", {
      scope,
      key: "k",
      ops: [{ type: "set", path: "", value: 1 }],
      enqueue: { function_id: "se::x", queue: "default" },
    });
    expect(upd.error.code).toBe("invalid_arguments");
    const missing = await w.call("state::get", { scope, key: "k" });
    expect(missing).not.toHaveProperty("result");
    expect(missing.error).toBeUndefined();
  });

  it("the caller must be allowed to call the enqueued function (its grant), else forbidden and nothing written", async () => {
    const scope = `grant-${uuid()}`;
    const grant = { sub: "limited", ns: ["*"], call: ["state::*"] };
    const refused = await engineStub().trigger({
      function_id: "state::set",
      payload: { scope, key: "k", value: 1, enqueue: { function_id: "se::secret", queue: DURABLE } },
      grant,
    });
    expect(refused).toMatchObject({ ok: false, error: { code: "forbidden" } });
    const absent = await engineStub().trigger({ function_id: "state::get", payload: { scope, key: "k" } });
    expect(absent).toEqual({ ok: true });
    const allowed = await engineStub().trigger({
      function_id: "state::set",
      payload: { scope, key: "k", value: 1, enqueue: { function_id: "state::get", payload: { scope, key: "k" }, queue: DURABLE } },
      grant,
    });
    expect(allowed).toMatchObject({ ok: true, result: { new_value: 1, messageReceiptId: expect.any(String) } });
  });
});

describe("state triggers are delivered at least once (§8.3)", () => {
  it("a fire is kept across eviction: its function registered only afterwards still gets it, once", async () => {
    const scope = `evict-${uuid()}`;
    const fn = `st::late-${uuid()}`;
    const w = await wires.connect();
    // Held by the engine (no owning connection), bound to a function nobody serves yet.
    await w.ok("engine::register_trigger", { id: `t-${scope}`, trigger_type: "state", function_id: fn, config: { scope } });
    await w.ok("state::set", { scope, key: "k", value: "kept" });
    await evictEngine();
    const late = await wires.connect();
    const got: Frame[] = [];
    late.serve(fn, (_d, f) => void got.push(f));
    await eventually(() => got.length >= 1, 8_000);
    await sleep(QUIET_MS);
    expect(got).toHaveLength(1);
    expect(got[0]!.data).toEqual({ type: "state", event_type: "state:created", scope, key: "k", old_value: null, new_value: "kept" });
    await w.ok("engine::unregister_trigger", { id: `t-${scope}` });
  });
});
