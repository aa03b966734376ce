// Connection shards (engine-do/src/shards/, docs/scaling.md) on a real engine: `npm start` with
// CONNECTION_SHARDS=4 and AUTH_SECRET. Worker sockets are spread over the namespace's four shard
// objects (round-robin, seen in /healthz), the namespace's own object keeps the catalog, and a call
// from a worker on one shard to a function on another goes shard → catalog → shard by DO RPC the
// first time and shard → shard once the caller's shard has the route. Tokens, grants and ownership
// are the catalog's rules (a shard only checks a grant to decide it may skip the catalog), so they
// hold across shards.
import { registerWorker } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { NO_REPLY, RawSocket, upgradeStatus } from "@iii-edge/test-support/raw-socket";
import { until } from "@iii-edge/test-support/wait";

const SHARDS = 4;
let engine: EngineServer;
const open: RawSocket[] = [];

beforeAll(async () => {
  engine = await startSecureEngine({ CONNECTION_SHARDS: String(SHARDS) });
}, 120_000);

afterAll(async () => {
  await Promise.all(open.map((s) => s.close().catch(() => {})));
  await engine?.stop();
});

/** Live worker connections per shard of the default namespace, as /healthz reports them. */
async function shardCounts(): Promise<Record<string, number>> {
  const h = (await (await fetch(`${engine.url}/healthz`)).json()) as { engine: { shards?: Record<string, number> } };
  if (!h.engine.shards) throw new Error(`/healthz has no shard counts: ${JSON.stringify(h)}`);
  return h.engine.shards;
}

/** Connect as `sub` (grant extras optional) and say which shard the socket landed on: the one whose
 * count went up (connects here are sequential, so nothing else moves the counts meanwhile). */
async function connect(sub: string, grant: Parameters<typeof token>[1] = {}): Promise<{ socket: RawSocket; shard: string }> {
  const before = await shardCounts();
  const socket = await RawSocket.open(`${engine.wsUrl}/`, bearer(await token(sub, grant)));
  open.push(socket);
  const after = await until(async () => {
    const c = await shardCounts();
    return Object.keys(c).find((k) => (c[k] ?? 0) > (before[k] ?? 0));
  }, `${sub}'s socket counted on a shard`);
  return { socket, shard: after };
}

async function listed(caller: RawSocket, id: string): Promise<boolean> {
  const { functions } = await caller.ok<{ functions: { function_id: string }[] }>("engine::functions::list", { prefix: id });
  return functions.some((f) => f.function_id === id);
}

describe(`connection shards (CONNECTION_SHARDS=${SHARDS})`, () => {
  let a: { socket: RawSocket; shard: string };
  let b: { socket: RawSocket; shard: string };

  it("spreads worker sockets over the shards, and a call crosses from one shard to another", async () => {
    a = await connect("alpha", { register: ["alpha::"] });
    b = await connect("beta", { register: ["beta::"], call: ["alpha::*", "engine::*"] });
    expect(Object.keys(await shardCounts())).toHaveLength(SHARDS);
    expect(a.shard).not.toBe(b.shard);
    a.socket.serve("alpha::double", (d) => ({ twice: Number(d.n) * 2, caller: d._caller_worker_id }));
    b.socket.serve("beta::greet", (d) => `hello ${String(d.name)}`);
    await until(() => listed(b.socket, "alpha::double"), "alpha::double listed");
    // b (one shard) → catalog → a (another shard) → back; the caller is stamped by the catalog.
    expect(await b.socket.ok("alpha::double", { n: 21 })).toEqual({ twice: 42, caller: b.socket.workerId });
    // …and the other way, and over HTTP (front door → catalog → shard).
    await until(() => listed(a.socket, "beta::greet"), "beta::greet listed");
    expect(await a.socket.ok("beta::greet", { name: "ada" })).toBe("hello ada");
    const http = await fetch(`${engine.url}/_iii/invoke`, {
      method: "POST",
      headers: bearer(await token("http-caller")),
      body: JSON.stringify({ function_id: "alpha::double", payload: { n: 5 } }),
    });
    expect(await http.json()).toMatchObject({ result: { twice: 10 } });
    // Many calls in flight at once across shards all come back, each to its own caller (by now
    // b's shard knows where alpha::double lives and calls a's shard directly, shards/direct-calls.ts).
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        b.socket.ok<{ twice: number; caller: string }>("alpha::double", { n: i, _caller_worker_id: "forged" }),
      ),
    );
    expect(results.map((r) => r.twice)).toEqual(Array.from({ length: 50 }, (_, i) => i * 2));
    expect(new Set(results.map((r) => r.caller))).toEqual(new Set([b.socket.workerId]));
  });

  it("keeps tokens and ownership: a grant's limits hold, and an id held on one shard is refused on another", async () => {
    // b's grant may call alpha::* and engine::* only — also once b's shard knows where beta::greet
    // lives (the second call), when the shard itself checks the grant before a direct call.
    for (let i = 0; i < 2; i++) expect((await b.socket.call("beta::greet", { name: "x" })).error).toMatchObject({ code: "forbidden" });
    // b may register beta:: only.
    b.socket.send({ type: "registerfunction", id: "alpha::stolen" });
    expect((await b.socket.next((f) => f.type === "error")).error).toMatchObject({ code: "forbidden" });
    // Another connection of alpha, on another shard, may not take the id a holds.
    const a2 = await connect("alpha", { register: ["alpha::"] });
    expect(a2.shard).not.toBe(a.shard);
    a2.socket.send({ type: "registerfunction", id: "alpha::double" });
    const refused = await a2.socket.next((f) => f.type === "error");
    expect(refused.error).toMatchObject({ code: "forbidden", message: expect.stringContaining("registered by another worker") });
    // Still a's: calls keep going to a.
    expect(await b.socket.ok("alpha::double", { n: 1 })).toMatchObject({ twice: 2, caller: b.socket.workerId });
    // Without a token the shard is never reached.
    expect((await upgradeStatus(`${engine.wsUrl}/`)).status).toBe(401);
  });

  it("a disconnect unregisters the worker's functions, ends its open calls, and frees its ids", async () => {
    a.socket.serve("alpha::hang", () => NO_REPLY);
    await until(() => listed(b.socket, "alpha::hang"), "alpha::hang listed");
    // The first call goes through the catalog; later ones go shard to shard: both end on disconnect.
    const hanging = b.socket.call("alpha::hang", {});
    await b.socket.ok("alpha::double", { n: 0 });
    const hangingDirect = b.socket.call("alpha::hang", {});
    const countsBefore = await shardCounts();
    await a.socket.close();
    // The call open on the vanished worker ends now, not at its deadline.
    expect((await hanging).error).toMatchObject({ code: "invocation_stopped" });
    expect((await hangingDirect).error).toMatchObject({ code: "invocation_stopped" });
    await until(async () => !(await listed(b.socket, "alpha::double")), "alpha::double gone after a's disconnect");
    expect((await b.socket.call("alpha::double", { n: 1 })).error).toMatchObject({ code: "function_not_found" });
    await until(async () => (await shardCounts())[a.shard] === (countsBefore[a.shard] ?? 0) - 1, "a's shard count down by one");
    // The id is free again: another alpha connection (on another shard) takes it and serves it.
    const a3 = await connect("alpha", { register: ["alpha::"] });
    a3.socket.serve("alpha::double", (d) => ({ twice: Number(d.n) * 2, by: "a3" }));
    await until(() => listed(b.socket, "alpha::double"), "alpha::double listed again");
    expect(await b.socket.ok("alpha::double", { n: 4 })).toEqual({ twice: 8, by: "a3" });
  });
});

describe("triggers with connection shards", () => {
  it("a trigger bound by a worker on one shard fires for a registration on another (discovery)", async () => {
    const watcher = await connect("watcher", { register: ["watch::"] });
    const seen: string[][] = [];
    watcher.socket.serve("watch::functions", (d) => {
      seen.push(((d.functions ?? []) as { function_id: string }[]).map((f) => f.function_id));
      return null;
    });
    await until(() => listed(watcher.socket, "watch::functions"), "watch::functions listed");
    watcher.socket.send({
      type: "registertrigger",
      id: "watch-functions",
      trigger_type: "engine::functions-available",
      function_id: "watch::functions",
      config: {},
    });
    const maker = await connect("maker", { register: ["made::"] });
    expect(maker.shard).not.toBe(watcher.shard);
    // The binding is the catalog's; the registration arrives from another shard; the fire is a call
    // from the catalog to the watcher's shard.
    // (A fresh id each poll: the binding may still be on its way to the catalog for the first one.)
    let n = 0;
    await until(
      () => {
        maker.socket.send({ type: "registerfunction", id: `made::thing-${n++}` });
        return seen.some((ids) => ids.some((id) => id.startsWith("made::thing-")));
      },
      "the watcher told of a made::thing-<n>",
      10_000,
      200,
    );
  });
});

describe("the unmodified iii-sdk through connection shards", () => {
  it("an iii-sdk worker registers math::add, another on another shard calls it", async () => {
    // OTel off: the SDK's /otel side socket sends no headers, so an engine with auth refuses it.
    const quiet = { otel: { enabled: false }, enableMetricsReporting: false, invocationTimeoutMs: 10_000 };
    const before = await shardCounts();
    const math = registerWorker(engine.wsUrl, {
      workerName: "math",
      headers: bearer(await token("math", { register: ["math::"] })),
      ...quiet,
    });
    math.registerFunction("math::add", async (d: { a: number; b: number }) => ({ sum: d.a + d.b }));
    const caller = registerWorker(engine.wsUrl, { workerName: "caller", headers: bearer(await token("caller")), ...quiet });
    try {
      await until(async () => {
        const { functions } = (await caller.trigger({ function_id: "engine::functions::list", payload: { prefix: "math::" } })) as {
          functions: { function_id: string }[];
        };
        return functions.some((f) => f.function_id === "math::add");
      }, "math::add listed");
      const c = await shardCounts();
      expect(Object.keys(c).filter((k) => (c[k] ?? 0) > (before[k] ?? 0))).toHaveLength(2);
      // The first call goes through the catalog, the later ones shard to shard.
      for (let i = 0; i < 5; i++)
        expect(await caller.trigger({ function_id: "math::add", payload: { a: i, b: 3 } })).toEqual({ sum: i + 3 });
    } finally {
      await Promise.all([caller.shutdown(), math.shutdown()]);
    }
  });
});

describe("connection shards across a restart", () => {
  it("a restarted engine forgets the sockets its shards lost, so their ids can be taken again", async () => {
    const w = await connect("gamma", { register: ["gamma::"] });
    w.socket.serve("gamma::kept", () => "first");
    await until(() => listed(w.socket, "gamma::kept"), "gamma::kept listed");
    // Every socket drops without a close event reaching the catalog; the catalog's rows remain.
    await engine.restart();
    open.length = 0;
    const next = await connect("gamma", { register: ["gamma::"] });
    // On wake the catalog asked its shards which sockets still exist: none of the old ones.
    expect(await listed(next.socket, "gamma::kept")).toBe(false);
    next.socket.serve("gamma::kept", () => "second");
    await until(() => listed(next.socket, "gamma::kept"), "gamma::kept registered by the new connection");
    expect(await next.socket.ok("gamma::kept")).toBe("second");
    expect(Object.values(await shardCounts()).reduce((x, y) => x + y, 0)).toBe(1);
  }, 120_000);
});
