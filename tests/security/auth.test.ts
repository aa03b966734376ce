// Tokens, namespaces and ownership against `npm start` with AUTH_SECRET: every attack on them
// (connecting without a valid token, taking another's function, route or trigger, reaching into
// another namespace), each refused with nothing registered or stored changing.
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOKEN_ALGORITHM, TOKEN_ISSUER } from "@iii-edge/protocol";
import { mintToken } from "@iii-edge/protocol/token";
import { TEST_AUTH_SECRET, bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { NO_REPLY, RawSocket, upgradeStatus, type Frame } from "@iii-edge/test-support/raw-socket";
import { eventually } from "@iii-edge/test-support/wait";

let engine: EngineServer;
let admin: RawSocket;
const open: RawSocket[] = [];

async function connect(sub: string, grant: Parameters<typeof token>[1] = {}, path = "/"): Promise<RawSocket> {
  const s = await RawSocket.open(`${engine.wsUrl}${path}`, bearer(await token(sub, grant)));
  open.push(s);
  return s;
}

async function invokeHttp(body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Frame }> {
  const res = await fetch(`${engine.url}/_iii/invoke`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Frame };
}

/** What an attack must leave as it was: the catalog and the bindings. */
async function snapshot(s: RawSocket = admin): Promise<string> {
  const fns = await s.ok<{ functions: { function_id: string; worker_name: string }[] }>("engine::functions::list", {
    include_internal: true,
  });
  const trg = await s.ok<{ registered_triggers: unknown[] }>("engine::registered-triggers::list", { include_internal: true });
  return JSON.stringify({ fns: fns.functions.map((f) => [f.function_id, f.worker_name]), trg: trg.registered_triggers });
}

/** A token signed with the engine's secret whose expiry passed a minute ago: mintToken gives at least a
 * second of life, and waiting that second out is what this saves. */
function expiredToken(sub: string): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ ns: ["*"] })
    .setProtectedHeader({ alg: TOKEN_ALGORITHM, typ: "JWT" })
    .setSubject(sub)
    .setIssuer(TOKEN_ISSUER)
    .setIssuedAt(now - 120)
    .setExpirationTime(now - 60)
    .sign(new TextEncoder().encode(TEST_AUTH_SECRET));
}

beforeAll(async () => {
  engine = await startSecureEngine();
  admin = await connect("admin");
});
afterAll(async () => {
  for (const s of open) await s.close().catch(() => {});
  await engine?.stop();
});

describe("only who holds a token connects", () => {
  it("refuses every socket and /_iii request without a valid token with 401, before anything is registered", async () => {
    const before = await snapshot();
    const expired = await expiredToken("late");
    const forged = await mintToken("another-secret-that-is-long-enough-000000", { sub: "forged", ns: ["*"] });
    for (const path of ["/", "/ns/a", "/otel", "/_iii/streams", "/ns/a/_iii/streams"]) {
      for (const headers of [{}, bearer("not-a-token"), bearer(forged), bearer(expired), { Authorization: "Basic YTpi" }]) {
        const r = await upgradeStatus(`${engine.wsUrl}${path}`, headers);
        expect(r.status, `${path} ${JSON.stringify(headers)}`).toBe(401);
        expect(r.body?.error?.code).toBe("unauthorized");
      }
    }
    const anon = await invokeHttp({ function_id: "state::set", payload: { scope: "s", key: "k", value: "anon" } });
    expect(anon.status).toBe(401);
    expect((await invokeHttp({ function_id: "state::get", payload: { scope: "s", key: "k" } }, bearer(forged))).status).toBe(401);
    expect(await admin.ok("state::get", { scope: "s", key: "k" })).toBeUndefined();
    expect(await snapshot()).toBe(before);
  });

  it("accepts a token as a Bearer header, as the iii.bearer subprotocol (answered with `iii`) and as ?access_token=", async () => {
    const t = await token("carol");
    expect((await upgradeStatus(`${engine.wsUrl}/`, bearer(t))).status).toBe(101);
    const viaProtocol = await upgradeStatus(`${engine.wsUrl}/`, { "Sec-WebSocket-Protocol": `iii, iii.bearer.${t}` });
    expect(viaProtocol.status).toBe(101);
    expect(viaProtocol.protocol).toBe("iii");
    // A browser's stream socket too: without `iii` answered, Chromium drops the handshake.
    const stream = await upgradeStatus(`${engine.wsUrl}/_iii/streams`, { "Sec-WebSocket-Protocol": `iii, iii.bearer.${t}` });
    expect(stream.status).toBe(101);
    expect(stream.protocol).toBe("iii");
    expect((await upgradeStatus(`${engine.wsUrl}/?access_token=${t}`)).status).toBe(101);
    expect((await invokeHttp({ function_id: "state::list_groups" }, bearer(t))).status).toBe(200);
  });

  it("healthz says auth is on and needs no token", async () => {
    const res = await fetch(`${engine.url}/healthz`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as Frame).auth).toBe("token");
  });
});

describe("a token's grant bounds what its holder may call, register and bind", () => {
  it("call globs: a call outside them is forbidden, inside them answered", async () => {
    const math = await connect("math-host");
    math.serve("math::add", (d) => ({ sum: d.a + d.b }));
    const caller = await connect("limited", { call: ["math::*"] });
    await eventually(async () => (await caller.call("math::add", { a: 1, b: 2 })).result?.sum === 3, 10_000, "math::add");
    const denied = await caller.call("state::set", { scope: "s", key: "k", value: 1 });
    expect(denied.error.code).toBe("forbidden");
    expect(await admin.ok("state::get", { scope: "s", key: "k" })).toBeUndefined();
    const viaHttp = await invokeHttp(
      { function_id: "state::set", payload: { scope: "s", key: "k", value: 1 } },
      bearer(await token("limited-http", { call: ["math::*"] })),
    );
    expect(viaHttp.status).toBe(403);
    // an enqueue is a call too
    const queued = await caller.call("state::set", { scope: "s", key: "k", value: 1 }, { action: { type: "enqueue", queue: "jobs" } });
    expect(queued.error.code).toBe("forbidden");
  });

  it("register prefixes: registering outside them is forbidden and changes nothing", async () => {
    const before = await snapshot();
    const alice = await connect("alice", { register: ["alice::"] });
    alice.send({ type: "registerfunction", id: "bob::steal" });
    expect((await alice.next((f) => f.type === "error")).error.code).toBe("forbidden");
    alice.send({ type: "registertriggertype", id: "bob::type", description: "x" });
    expect((await alice.next((f) => f.type === "error")).error.code).toBe("forbidden");
    expect(await snapshot()).toBe(before);
    alice.send({ type: "registerfunction", id: "alice::mine" });
    await eventually(async () => (await snapshot()).includes("alice::mine"), 10_000, "alice::mine listed");
  });

  it("bind lists: a trigger type outside them is forbidden", async () => {
    const before = await snapshot();
    const cronOnly = await connect("cron-only", { bind: ["cron"] });
    cronOnly.send({ type: "registerfunction", id: "cron-only::route" });
    cronOnly.send({
      type: "registertrigger",
      id: "co-http",
      trigger_type: "http",
      function_id: "cron-only::route",
      config: { api_path: "co/route", http_method: "GET" },
    });
    const refused = await cronOnly.next((f) => f.type === "triggerregistrationresult" && f.id === "co-http");
    expect(refused.error.code).toBe("forbidden");
    expect((await fetch(`${engine.url}/co/route`)).status).toBe(404);
    await cronOnly.close();
    await eventually(async () => (await snapshot()) === before, 10_000, "catalog back as it was");
  });
});

describe("nobody takes another's function", () => {
  it("a second worker registering a live function id is forbidden; its calls stay with the owner; its unregister is ignored", async () => {
    const a = await connect("owner-a");
    const b = await connect("thief-b");
    const c = await connect("caller-c");
    a.serve("shop::pay", () => "a");
    await eventually(async () => (await c.call("shop::pay")).result === "a", 10_000, "shop::pay");
    b.serve("shop::pay", () => "b");
    expect((await b.next((f) => f.type === "error")).error.code).toBe("forbidden");
    b.send({ type: "unregisterfunction", id: "shop::pay" });
    for (let i = 0; i < 5; i++) expect((await c.call("shop::pay")).result).toBe("a");
    // Once the owner is gone the id is free again.
    await a.close();
    await eventually(async () => (await c.call("shop::pay")).error?.code === "function_not_found", 10_000, "shop::pay gone");
    b.serve("shop::pay", () => "b");
    await eventually(async () => (await c.call("shop::pay")).result === "b", 10_000, "b's shop::pay");
  });

  it("an unmodified iii-sdk worker cannot take a function a raw worker holds", async () => {
    const { registerWorker } = await import("iii-sdk");
    const a = await connect("sdk-owner");
    a.serve("sdk::held", () => "a");
    const sdk = registerWorker(engine.wsUrl, {
      workerName: "sdk-thief",
      headers: bearer(await token("sdk-thief")),
      otel: { enabled: false },
      enableMetricsReporting: false,
    });
    try {
      sdk.registerFunction("sdk::held", async () => "thief");
      // Its registrations go out in order on one socket: once the next one is listed, the engine
      // has dealt with the claim on sdk::held.
      sdk.registerFunction("sdk::thief-ready", async () => "ready");
      await eventually(
        async () =>
          (await admin.ok<{ functions: { function_id: string }[] }>("engine::functions::list", {})).functions.some(
            (f) => f.function_id === "sdk::thief-ready",
          ),
        10_000,
        "the thief's later registration listed",
      );
      await eventually(async () => (await admin.call("sdk::held")).result === "a", 10_000, "owner answers");
      for (let i = 0; i < 3; i++) expect((await admin.call("sdk::held")).result).toBe("a");
    } finally {
      await sdk.shutdown();
    }
  });
});

describe("nobody takes another's route or trigger", () => {
  it("engine::unregister_trigger of another worker's binding is forbidden, over a socket and over HTTP", async () => {
    const a = await connect("route-owner");
    a.serve("routes::hello", () => ({ status_code: 200, body: { from: "a" } }));
    a.send({
      type: "registertrigger",
      id: "hello-route",
      trigger_type: "http",
      function_id: "routes::hello",
      config: { api_path: "hello-owned", http_method: "GET" },
    });
    await eventually(async () => (await fetch(`${engine.url}/hello-owned`)).status === 200, 10_000, "route up");
    const before = await snapshot();
    const b = await connect("route-thief");
    const r = await b.call("engine::unregister_trigger", { id: "hello-route" });
    expect(r.error.code).toBe("forbidden");
    b.send({ type: "unregistertrigger", id: "hello-route" });
    expect((await b.next((f) => f.type === "error")).error.code).toBe("forbidden");
    const viaHttp = await invokeHttp(
      { function_id: "engine::unregister_trigger", payload: { id: "hello-route" } },
      bearer(await token("http-thief")),
    );
    expect(viaHttp.status).toBe(403);
    // the same id under another worker is refused too
    b.serve("routes::evil", () => ({ status_code: 200, body: { from: "b" } }));
    b.send({
      type: "registertrigger",
      id: "hello-route",
      trigger_type: "http",
      function_id: "routes::evil",
      config: { api_path: "hello-owned", http_method: "GET" },
    });
    expect((await b.next((f) => f.type === "triggerregistrationresult" && f.id === "hello-route")).error.code).toBe("forbidden");
    expect(await (await fetch(`${engine.url}/hello-owned`)).json()).toEqual({ from: "a" });
    const after = JSON.parse(await snapshot());
    expect(JSON.stringify(after.trg)).toBe(JSON.stringify(JSON.parse(before).trg));
  });

  it("an engine-held binding (engine::register_trigger) belongs to the principal that made it", async () => {
    const alice = await connect("binder-alice");
    alice.serve("binder::tick", () => null);
    await alice.ok("engine::register_trigger", {
      id: "alice-cron",
      trigger_type: "cron",
      function_id: "binder::tick",
      config: { expression: "0 0 1 1 *" },
    });
    const bob = await connect("binder-bob");
    expect((await bob.call("engine::unregister_trigger", { id: "alice-cron" })).error.code).toBe("forbidden");
    expect(
      (
        await bob.call("engine::register_trigger", {
          id: "alice-cron",
          trigger_type: "cron",
          function_id: "binder::tick",
          config: { expression: "* * * * *" },
        })
      ).error.code,
    ).toBe("forbidden");
    const list = await admin.ok<{ registered_triggers: { id: string; config: { expression: string } }[] }>(
      "engine::registered-triggers::list",
      {},
    );
    expect(list.registered_triggers.find((t) => t.id === "alice-cron")?.config.expression).toBe("0 0 1 1 *");
    // alice (another connection of the same principal) may remove it
    const alice2 = await connect("binder-alice");
    expect(await alice2.ok("engine::unregister_trigger", { id: "alice-cron" })).toEqual({ removed: true });
  });
});

describe("namespaces isolate", () => {
  it("a token for namespace a reaches a only: sockets, cross-namespace calls and /_iii/invoke", async () => {
    const t = await token("tenant-a", { ns: ["a"] });
    expect((await upgradeStatus(`${engine.wsUrl}/ns/a`, bearer(t))).status).toBe(101);
    for (const path of ["/", "/ns/b", "/ns/b/_iii/streams"])
      expect((await upgradeStatus(`${engine.wsUrl}${path}`, bearer(t))).status, path).toBe(403);
    const inB = await connect("tenant-b", { ns: ["b"] }, "/ns/b");
    await inB.ok("state::set", { scope: "secret", key: "k", value: "b's" });
    inB.serve("b::private", () => "b's answer");
    const a = await connect("tenant-a", { ns: ["a"] }, "/ns/a");
    for (const fn of ["b::private", "state::get", "engine::functions::list"]) {
      const r = await a.call(fn, { scope: "secret", key: "k" }, { namespace: "b" });
      expect(r.error?.code, fn).toBe("forbidden");
    }
    expect((await a.call("state::get", { scope: "secret", key: "k" }, { namespace: "default" })).error.code).toBe("forbidden");
    expect(
      (await invokeHttp({ function_id: "state::get", payload: { scope: "secret", key: "k" }, namespace: "b" }, bearer(t))).status,
    ).toBe(403);
    // State scopes are per namespace: a's own `secret` scope is empty.
    expect(await a.ok("state::get", { scope: "secret", key: "k" })).toBeUndefined();
    expect(await inB.ok("state::get", { scope: "secret", key: "k" })).toBe("b's");
  });

  it("a token for a and b calls across, and the callee sees the engine-stamped caller, never the claimed one", async () => {
    const seen: Frame[] = [];
    const inB = await connect("both-b", { ns: ["b"] }, "/ns/b");
    inB.serve("b::who", (d) => (seen.push(d), "ok"));
    const a = await connect("both-a", { ns: ["a", "b"] }, "/ns/a");
    await eventually(
      async () => (await a.call("b::who", { _caller_worker_id: "admin-liar", x: 1 }, { namespace: "b" })).result === "ok",
      10_000,
      "cross-namespace call",
    );
    expect(seen.at(-1)).toEqual({ x: 1, _caller_worker_id: `a/${a.workerId}` });
    // /_iii/invoke: an HTTP caller is no worker, so a claimed id is dropped
    const r = await invokeHttp(
      { function_id: "b::who", namespace: "b", payload: { _caller_worker_id: "admin-liar", y: 2 } },
      bearer(await token("http-caller", { ns: ["b"] })),
    );
    expect(r.status).toBe(200);
    expect(seen.at(-1)).toEqual({ y: 2 });
    // a same-namespace call is stamped with the caller's own id
    const local = await connect("local-b", { ns: ["b"] }, "/ns/b");
    await local.ok("b::who", { _caller_worker_id: "admin-liar" });
    expect(seen.at(-1)).toEqual({ _caller_worker_id: local.workerId });
  });

  it("a hung target: nothing leaks into the caller's namespace when it disconnects", async () => {
    const inB = await connect("hang-b", { ns: ["b"] }, "/ns/b");
    let reached!: () => void;
    const arrived = new Promise<void>((r) => (reached = r));
    inB.serve("b::hang", () => {
      reached();
      return NO_REPLY;
    });
    const a = await connect("hang-a", { ns: ["a", "b"] }, "/ns/a");
    await eventually(
      async () =>
        (await admin.call("engine::functions::list", {}, { namespace: "b" })).result?.functions.some(
          (f: Frame) => f.function_id === "b::hang",
        ),
      10_000,
      "b::hang listed",
    );
    const pending = a.call("b::hang", {}, { namespace: "b" }, 20_000);
    await arrived; // the call is open at its target when the target goes
    await inB.close();
    expect((await pending).error.code).toBe("invocation_stopped");
  });
});
