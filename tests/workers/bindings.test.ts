// Bindings made with engine::register_trigger and hibernation: one that ends with its maker stays
// while the maker is connected (across evictions, its socket hibernated) and ends when the maker's
// socket closes, even if that close is what wakes the object; one made under `durable_bindings`
// outlives its maker and eviction. Sockets carry grants as the front door would set them.
import { afterEach, describe, expect, it } from "vitest";
import { Wires, eventually, evictEngine, type Frame } from "./wire.ts";

const wires = new Wires();
afterEach(() => wires.closeAll());

const grant = (sub: string, extra: Record<string, unknown> = {}) => ({ sub, ns: ["*"], ...extra });

async function bindingIds(w: Awaited<ReturnType<Wires["connect"]>>, fn: string): Promise<string[]> {
  const r = (await w.ok("engine::registered-triggers::list", { function_id: fn })) as { registered_triggers: Frame[] };
  return r.registered_triggers.map((t) => t.id as string).sort();
}

describe("engine-held bindings across hibernation", () => {
  it("a binding that ends with its maker survives eviction while the maker is connected, and ends when its socket closes", async () => {
    const alice = await wires.connect("/", grant("hb-alice"));
    const work: Frame[] = [];
    const control: Frame[] = [];
    alice.serve("hb::work", (d) => (work.push(d), null));
    alice.serve("hb::control", (d) => (control.push(d), null));
    await alice.ok("engine::register_trigger", {
      id: "hb-control",
      trigger_type: "state",
      function_id: "hb::control",
      config: { scope: "hb-scope" },
    });
    const bob = await wires.connect("/", grant("hb-bob"));
    await bob.ok("engine::register_trigger", {
      id: "hb-bob-state",
      trigger_type: "state",
      function_id: "hb::work",
      config: { scope: "hb-scope" },
    });

    await evictEngine();
    await alice.ok("state::set", { scope: "hb-scope", key: "k", value: 1 });
    expect(await eventually(() => work.length === 1 && control.length === 1)).toBe(true);
    expect(await bindingIds(alice, "hb::work")).toEqual(["hb-bob-state"]);

    // The close reaches an evicted object: it wakes to handle it and ends Bob's binding.
    await evictEngine();
    await bob.close();
    expect(await eventually(async () => (await bindingIds(alice, "hb::work")).length === 0)).toBe(true);
    await evictEngine();
    expect(await bindingIds(alice, "hb::work")).toEqual([]);
    await alice.ok("state::set", { scope: "hb-scope", key: "k", value: 2 });
    expect(await eventually(() => control.length === 2)).toBe(true);
    expect(work).toHaveLength(1);
  });

  it("a binding made under durable_bindings outlives its maker and eviction; the function's owner removes it", async () => {
    const alice = await wires.connect("/", grant("hb-alice"));
    const work: Frame[] = [];
    alice.serve("hb::durable-work", (d) => (work.push(d), null));
    const ops = await wires.connect("/", grant("hb-ops", { durable_bindings: true }));
    await ops.ok("engine::register_trigger", {
      id: "hb-ops-state",
      trigger_type: "state",
      function_id: "hb::durable-work",
      config: { scope: "hb-durable" },
    });
    await ops.close();
    await evictEngine();
    const listed = (await alice.ok("engine::registered-triggers::list", { function_id: "hb::durable-work" })) as {
      registered_triggers: Frame[];
    };
    expect(listed.registered_triggers).toEqual([expect.objectContaining({ id: "hb-ops-state", made_by: "hb-ops", durable: true })]);
    await alice.ok("state::set", { scope: "hb-durable", key: "k", value: 1 });
    expect(await eventually(() => work.length === 1)).toBe(true);
    // A third principal may not remove it; the function's owner may.
    const carol = await wires.connect("/", grant("hb-carol"));
    expect((await carol.call("engine::unregister_trigger", { id: "hb-ops-state" })).error.code).toBe("forbidden");
    expect(await alice.ok("engine::unregister_trigger", { id: "hb-ops-state" })).toEqual({ removed: true });
  });

  it("without a connection of its maker here, a binding that would end with it is refused", async () => {
    const alice = await wires.connect("/", grant("hb-alice"));
    alice.serve("hb::lonely", () => null);
    // A caller whose grant reaches this namespace only by RPC (no socket here): the engine object's trigger().
    const { env } = await import("cloudflare:workers");
    const out = await env.ENGINE.getByName("default").trigger({
      function_id: "engine::register_trigger",
      payload: { id: "hb-remote", trigger_type: "state", function_id: "hb::lonely", config: { scope: "hb-lonely" } },
      grant: grant("hb-remote"),
    });
    expect(out).toMatchObject({ ok: false, error: { code: "forbidden" } });
    expect(await bindingIds(alice, "hb::lonely")).toEqual([]);
  });
});
