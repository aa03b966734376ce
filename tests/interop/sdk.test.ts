// The unmodified iii-sdk@0.22.1 against `npm start`'s engine: two workers in this process and one
// in a child process, calling each other through the engine (protocol/README.md §12).
import { spawn, type ChildProcess } from "node:child_process";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { registerWorker, TriggerAction } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { failure, invokeHttp, listed, registered, sleep, until, worker, type Worker } from "./sdk.ts";

let engine: EngineServer;
let a: Worker;
let b: Worker;
const seen: { fn: string; data: unknown; metadata: unknown }[] = [];

beforeAll(async () => {
  engine = await startSecureEngine();
  a = await worker(engine.wsUrl, "interop-a");
  b = await worker(engine.wsUrl, "interop-b");
  b.registerFunction(
    "b::add",
    async (data: { a: number; b: number }, metadata) => {
      seen.push({ fn: "b::add", data, metadata });
      return { sum: data.a + data.b };
    },
    { description: "adds a and b" },
  );
  b.registerFunction("b::fail", async () => {
    throw new Error("b::fail always throws");
  });
  b.registerFunction("b::record", async (data, metadata) => {
    seen.push({ fn: "b::record", data, metadata });
    return null;
  });
  a.registerFunction("a::upper", async (data: { s: string }) => ({ s: data.s.toUpperCase() }));
  a.registerFunction("a::via-b", async (data: { a: number; b: number }) => {
    // A call made inside a handler: worker → engine → worker → engine → worker.
    const r = (await a.trigger({ function_id: "b::add", payload: data })) as { sum: number };
    return { doubled: r.sum * 2 };
  });
  await registered(a, "b::add", "b::fail", "b::record", "a::upper", "a::via-b");
});

afterAll(async () => {
  await Promise.allSettled([a?.shutdown(), b?.shutdown()]);
  await engine?.stop();
});

describe("calls between SDK workers", () => {
  it("sync calls both ways, nested calls, metadata to the handler, _caller_worker_id in the payload", async () => {
    expect(await a.trigger({ function_id: "b::add", payload: { a: 2, b: 3 }, metadata: { tenant: "acme" } })).toEqual({ sum: 5 });
    const call = seen.find((s) => s.fn === "b::add")!;
    expect(call.metadata).toEqual({ tenant: "acme" });
    expect(call.data).toMatchObject({ a: 2, b: 3, _caller_worker_id: expect.any(String) });
    expect(await b.trigger({ function_id: "a::upper", payload: { s: "hi" } })).toEqual({ s: "HI" });
    expect(await b.trigger({ function_id: "a::via-b", payload: { a: 1, b: 2 } })).toEqual({ doubled: 6 });
  });

  it("a throwing handler rejects the caller with invocation_failed and the remote message", async () => {
    const e = await failure(a.trigger({ function_id: "b::fail", payload: {} }));
    expect(e.code).toBe("invocation_failed");
    expect(e.message).toContain("b::fail always throws");
  });

  it("an unknown function fails at once with function_not_found", async () => {
    const t0 = Date.now();
    const e = await failure(a.trigger({ function_id: "nobody::home", payload: {} }));
    expect(e.code).toBe("function_not_found");
    expect(Date.now() - t0).toBeLessThan(1_000);
  });

  it("void resolves at once with undefined and still runs the target", async () => {
    const n = seen.length;
    expect(await a.trigger({ function_id: "b::record", payload: { kind: "void" }, action: TriggerAction.Void() })).toBeUndefined();
    await until(() => seen.slice(n).some((s) => (s.data as { kind?: string }).kind === "void"), "the void call to run");
  });

  it("enqueue answers {messageReceiptId} and delivers the payload later", async () => {
    const n = seen.length;
    const r = (await a.trigger({
      function_id: "b::record",
      payload: { kind: "queued" },
      action: TriggerAction.Enqueue({ queue: "default" }),
    })) as { messageReceiptId: string };
    expect(r.messageReceiptId).toMatch(/^[0-9a-f-]{36}$/);
    const got = await until(() => seen.slice(n).find((s) => (s.data as { kind?: string }).kind === "queued"), "the queued delivery");
    expect(got.data).toEqual({ kind: "queued" });
    const e = await failure(
      a.trigger({ function_id: "b::record", payload: {}, action: TriggerAction.Enqueue({ queue: "no-such-queue" }) }),
    );
    expect(e.code).toBe("enqueue_error");
  });
});

describe("state", () => {
  it("set / get / update / list / list_groups / delete through trigger()", async () => {
    expect(await a.trigger({ function_id: "state::set", payload: { scope: "interop", key: "k", value: { n: 1 } } })).toEqual({
      old_value: null,
      new_value: { n: 1 },
    });
    expect(await b.trigger({ function_id: "state::get", payload: { scope: "interop", key: "k" } })).toEqual({ n: 1 });
    expect(await b.trigger({ function_id: "state::get", payload: { scope: "interop", key: "absent" } })).toBeUndefined();
    const up = (await a.trigger({
      function_id: "state::update",
      payload: {
        scope: "interop",
        key: "k",
        ops: [
          { type: "increment", path: "n", by: 4 },
          { type: "append", path: "log", value: 7 },
        ],
      },
    })) as { new_value: unknown };
    expect(up.new_value).toEqual({ n: 5, log: [7] });
    expect(await a.trigger({ function_id: "state::list", payload: { scope: "interop" } })).toEqual([{ n: 5, log: [7] }]);
    expect(((await a.trigger({ function_id: "state::list_groups", payload: {} })) as { groups: string[] }).groups).toContain("interop");
    expect(await a.trigger({ function_id: "state::delete", payload: { scope: "interop", key: "k" } })).toEqual({ n: 5, log: [7] });
    expect(await a.trigger({ function_id: "state::get", payload: { scope: "interop", key: "k" } })).toBeUndefined();
  });

  it("a state trigger delivers the §8.3 payload with the binding's metadata", async () => {
    const events: { data: unknown; metadata: unknown }[] = [];
    a.registerFunction("a::on-state", async (data, metadata) => {
      events.push({ data, metadata });
    });
    const trig = a.registerTrigger({
      type: "state",
      function_id: "a::on-state",
      config: { scope: "watched" },
      metadata: { from: "binding" },
    });
    await registered(a, "a::on-state");
    await until(async () => {
      const r = (await a.trigger({
        function_id: "engine::registered-triggers::list",
        payload: { trigger_type: "state", function_id: "a::on-state" },
      })) as { registered_triggers: unknown[] };
      return r.registered_triggers.length === 1;
    }, "the state binding");
    await b.trigger({ function_id: "state::set", payload: { scope: "watched", key: "x", value: 1 } });
    await b.trigger({ function_id: "state::set", payload: { scope: "ignored", key: "x", value: 1 } });
    await b.trigger({ function_id: "state::set", payload: { scope: "watched", key: "x", value: 2 } });
    await until(() => events.length >= 2, "two state events");
    expect(events.map((e) => e.data)).toEqual([
      { type: "state", event_type: "state:created", scope: "watched", key: "x", old_value: null, new_value: 1 },
      { type: "state", event_type: "state:updated", scope: "watched", key: "x", old_value: 1, new_value: 2 },
    ]);
    expect(events[0]!.metadata).toEqual({ from: "binding" });
    trig.unregister();
  });
});

describe("custom trigger types", () => {
  it("binding parked before the provider exists, delivered to it, fired by it, unregistered through it", async () => {
    const registrations: { id: string; function_id: string; config: unknown; metadata?: unknown }[] = [];
    const unregistrations: string[] = [];
    const fired: unknown[] = [];
    a.registerFunction("a::on-hook", async (data, metadata) => {
      fired.push({ data, metadata });
      return "handled";
    });
    // Bound before any provider: the engine parks it.
    const binding = a.registerTrigger({
      type: "interop::webhook",
      function_id: "a::on-hook",
      config: { path: "/orders" },
      metadata: { m: 1 },
    });
    await registered(a, "a::on-hook");
    b.registerTriggerType(
      { id: "interop::webhook", description: "test webhook" },
      {
        async registerTrigger(cfg) {
          registrations.push(cfg);
          // The provider fires the binding like any caller.
          await b.trigger({
            function_id: cfg.function_id,
            payload: { hook: (cfg.config as { path: string }).path },
            metadata: cfg.metadata,
          });
        },
        async unregisterTrigger(cfg) {
          unregistrations.push(cfg.id);
        },
      },
    );
    await until(() => fired.length === 1, "the provider to fire the parked binding");
    expect(registrations[0]).toMatchObject({ function_id: "a::on-hook", config: { path: "/orders" }, metadata: { m: 1 } });
    expect(fired[0]).toEqual({ data: { hook: "/orders", _caller_worker_id: expect.any(String) }, metadata: { m: 1 } });
    binding.unregister();
    await until(() => unregistrations.includes(registrations[0]!.id), "unregisterTrigger at the provider");
    const types = (await a.trigger({ function_id: "engine::triggers::list", payload: {} })) as {
      triggers: { id: string; worker_name: string }[];
    };
    expect(types.triggers).toContainEqual(expect.objectContaining({ id: "interop::webhook", worker_name: "interop-b" }));
  });

  it("the provider's refusal reaches the binding's owner (never silent)", async () => {
    const spy = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      b.registerTriggerType(
        { id: "interop::picky", description: "refuses everything" },
        {
          async registerTrigger() {
            throw new Error("picky says no");
          },
          async unregisterTrigger() {},
        },
      );
      await sleep(100);
      const binding = a.registerTrigger({ type: "interop::picky", function_id: "a::upper", config: {} });
      const logged = await until(
        () =>
          spy.mock.calls.map((c) => String(c[0])).find((m) => m.includes("Trigger registration failed") && m.includes("interop::picky")),
        "the owner to log the refusal",
      );
      expect(logged).toContain("picky says no");
      binding.unregister();
    } finally {
      spy.mockRestore();
    }
  });
});

describe("discovery", () => {
  it("engine::functions-available is pushed to a bound worker well under a second after a registration", async () => {
    const pushes: { at: number; ids: string[] }[] = [];
    a.registerFunction("a::on-functions", async (data: { functions: { function_id: string }[] }) => {
      pushes.push({ at: Date.now(), ids: data.functions.map((f) => f.function_id) });
    });
    a.registerTrigger({ type: "engine::functions-available", function_id: "a::on-functions", config: {} });
    await registered(a, "a::on-functions");
    await sleep(300);
    const n = pushes.length;
    const t0 = Date.now();
    b.registerFunction("b::brand-new", async () => "new");
    const push = await until(() => pushes.slice(n).find((p) => p.ids.includes("b::brand-new")), "the functions-available push", 3_000, 5);
    expect(push.at - t0).toBeLessThan(1_000);
  });

  it("engine::triggers-available reaches an iii-sdk worker (a call without invocation id) when a binding comes and goes", async () => {
    const pushes: string[][] = [];
    a.registerFunction("a::on-triggers", async (data: { event: string; triggers: { function_id: string }[] }) => {
      pushes.push(data.triggers.map((t) => t.function_id));
    });
    a.registerTrigger({ type: "engine::triggers-available", function_id: "a::on-triggers", config: {} });
    await registered(a, "a::on-triggers");
    await until(async () => {
      const r = (await a.trigger({
        function_id: "engine::registered-triggers::list",
        payload: { trigger_type: "engine::triggers-available", function_id: "a::on-triggers", include_internal: true },
      })) as { registered_triggers: unknown[] };
      return r.registered_triggers.length === 1;
    }, "the triggers-available binding");
    b.registerFunction("b::hooked", async () => null);
    const binding = b.registerTrigger({ type: "interop::announced", function_id: "b::hooked", config: { x: 1 } });
    await until(() => pushes.some((ids) => ids.includes("b::hooked")), "the push of the new binding", 5_000, 5);
    const seen = pushes.length;
    binding.unregister();
    await until(() => pushes.length > seen && !pushes.at(-1)!.includes("b::hooked"), "the push of its removal", 5_000, 5);
  });

  it("engine::workers::list shows both SDK workers with what they reported", async () => {
    const r = (await a.trigger({ function_id: "engine::workers::list", payload: {} })) as {
      workers: { name: string; runtime: string; version: string; pid: number; function_count: number }[];
    };
    const names = r.workers.map((w) => w.name);
    expect(names).toEqual(expect.arrayContaining(["interop-a", "interop-b"]));
    expect(r.workers.find((w) => w.name === "interop-b")).toMatchObject({ runtime: "node", version: "0.22.1", pid: process.pid });
    const fns = (await a.trigger({ function_id: "engine::functions::list", payload: {} })) as {
      functions: { function_id: string; worker_name: string; description?: string }[];
    };
    expect(fns.functions).toContainEqual({ function_id: "b::add", worker_name: "interop-b", description: "adds a and b" });
  });
});

describe("a worker in another process", () => {
  const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/hanging-worker.ts");
  let child: ChildProcess | undefined;
  afterAll(() => {
    if (child && child.exitCode === null) child.kill("SIGKILL");
  });

  it("killed mid-call: the caller gets invocation_stopped within about a second, long before its SDK timeout", async () => {
    // The child gets its token in its environment, as a deployed worker would.
    child = spawn(process.execPath, [fixture, engine.wsUrl], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, III_TOKEN: await token("interop-child") },
    });
    await registered(a, "interop::child-hang", "interop::child-echo");
    expect(await a.trigger({ function_id: "interop::child-echo", payload: { x: 1 } })).toMatchObject({ echoed: { x: 1 }, pid: child.pid });

    const call = failure(a.trigger({ function_id: "interop::child-hang", payload: {}, timeoutMs: 20_000 }));
    // The call reached the child (the engine counts it as active there).
    await until(async () => {
      const r = (await a.trigger({ function_id: "engine::workers::list", payload: {} })) as {
        workers: { name: string; active_invocations: number }[];
      };
      return r.workers.find((w) => w.name === "interop-child")?.active_invocations === 1;
    }, "the call to be in flight at the child");
    const t0 = Date.now();
    child.kill("SIGKILL");
    const e = await call;
    const took = Date.now() - t0;
    expect(e.code).toBe("invocation_stopped");
    expect(took).toBeLessThan(1_500);
    // Its functions are gone, the engine carries on.
    await until(async () => !(await listed(a)).includes("interop::child-hang"), "the child's functions to be removed");
    expect(await a.trigger({ function_id: "b::add", payload: { a: 1, b: 1 } })).toEqual({ sum: 2 });
  });
});

describe("auth: the engine runs with AUTH_SECRET", () => {
  /** iii-sdk 0.22.1 has no public getter; `connectionState` is the field its state machine sets. */
  const stateOf = (w: Worker) => (w as unknown as { connectionState: string }).connectionState;
  const workerNames = async () =>
    ((await a.trigger({ function_id: "engine::workers::list", payload: {} })) as { workers: { name: string }[] }).workers.map(
      (w) => w.name,
    );
  /** Every state a worker passes through for `ms`. */
  const statesFor = async (w: Worker, ms: number) => {
    const states = new Set<string>();
    for (const end = Date.now() + ms; Date.now() < end; await sleep(10)) states.add(stateOf(w));
    return states;
  };
  /** The HTTP status a WebSocket upgrade to `url` is answered with (101 = accepted). */
  const upgradeStatus = (url: string, headers: Record<string, string> = {}) =>
    new Promise<number>((resolve, reject) => {
      const req = http.get(url, {
        headers: {
          Connection: "Upgrade",
          Upgrade: "websocket",
          "Sec-WebSocket-Version": "13",
          "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
          ...headers,
        },
      });
      req.on("upgrade", (res, socket) => (socket.destroy(), resolve(res.statusCode ?? 0)));
      req.on("response", (res) => (res.resume(), resolve(res.statusCode ?? 0)));
      req.on("error", reject);
    });

  it("the unmodified iii-sdk without headers is refused: never connected, never listed, its calls never reach the engine", async () => {
    const spy = vi.spyOn(console, "error").mockImplementation(() => {});
    const anon = registerWorker(engine.wsUrl, {
      workerName: "interop-anon",
      otel: { enabled: false },
      reconnectionConfig: { initialDelayMs: 100, maxDelayMs: 200 },
    });
    try {
      anon.registerFunction("anon::fn", async () => "never");
      const call = failure(anon.trigger({ function_id: "b::add", payload: { a: 1, b: 1 }, timeoutMs: 1_500 }));
      const states = await statesFor(anon, 2_000);
      expect(states).not.toContain("connected");
      // A 401 is an ordinary failed handshake to iii-sdk: it logs it and retries with its backoff.
      expect(states).toContain("reconnecting");
      expect(spy.mock.calls.some((c) => String(c[0]).includes("WebSocket error") && String(c[1]).includes("401"))).toBe(true);
      // The call waited in the SDK's queue until its own timeout.
      expect((await call).code).toBe("TIMEOUT");
      expect(await workerNames()).not.toContain("interop-anon");
      expect(await listed(a)).not.toContain("anon::fn");
    } finally {
      await anon.shutdown();
      spy.mockRestore();
    }
  });

  it("a token that has expired is refused, over HTTP and on the WebSocket upgrade", async () => {
    // Expiry is in whole seconds from a whole-second issue time: a 1 s token can be dead at once, so
    // this one lives a few seconds, and the test waits for the moment its own `exp` names.
    const expiring = await token("x", {}, 5);
    const expMs = (JSON.parse(Buffer.from(expiring.split(".")[1]!, "base64url").toString()) as { exp: number }).exp * 1000;
    // Still valid: the same token is accepted.
    const ok = await invokeHttp(engine.url, { function_id: "b::add", payload: { a: 1, b: 2 } }, expiring);
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { result: unknown }).result).toEqual({ sum: 3 });
    await sleep(Math.max(0, expMs - Date.now()) + 50);
    const res = await invokeHttp(engine.url, { function_id: "b::add", payload: { a: 1, b: 2 } }, expiring);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ error: { code: "unauthorized", message: expect.stringContaining("expired") } });
    expect(await upgradeStatus(`${engine.url}/`, bearer(expiring))).toBe(401);

    const spy = vi.spyOn(console, "error").mockImplementation(() => {});
    const late = registerWorker(engine.wsUrl, {
      workerName: "interop-expired",
      otel: { enabled: false },
      headers: bearer(expiring),
      reconnectionConfig: { initialDelayMs: 100, maxDelayMs: 200 },
    });
    try {
      expect(await statesFor(late, 1_500)).not.toContain("connected");
      expect(await workerNames()).not.toContain("interop-expired");
    } finally {
      await late.shutdown();
      spy.mockRestore();
    }
  });

  it("the /otel telemetry socket needs a token too; it cannot send headers, so it takes ?access_token=", async () => {
    // iii-sdk dials /otel with the engine URL it was given and no headers (its telemetry
    // connection ignores `headers`): refused unless the URL carries the token.
    expect(await upgradeStatus(`${engine.url}/otel`)).toBe(401);
    expect(await upgradeStatus(`${engine.url}/otel?access_token=${await token("otel")}`)).toBe(101);
    expect(await upgradeStatus(`${engine.url}/otel`, bearer(await token("otel")))).toBe(101);
    // The same holds for the worker socket: the query is the last resort, headers come first.
    expect(await upgradeStatus(`${engine.url}/?access_token=${await token("q")}`)).toBe(101);
  });

  it("/_iii/* without a token is 401, with one it answers", async () => {
    const res = await fetch(`${engine.url}/_iii/invoke`, {
      method: "POST",
      body: JSON.stringify({ function_id: "b::add", payload: { a: 1, b: 1 } }),
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ error: { code: "unauthorized" } });
    expect((await invokeHttp(engine.url, { function_id: "b::add", payload: { a: 1, b: 1 } })).status).toBe(200);
  });
});
