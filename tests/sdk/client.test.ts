// The shared client core (sdk-edge/src/client) through the Node adapter, against a real
// WebSocket server: replay order, reconnect + reattach, fail-fast, bounded buffer, zod-typed
// functions, trigger type providers, error codes and trace context.
import { readFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { repoRoot } from "@iii-edge/test-support/engine-server";
import { until } from "@iii-edge/test-support/wait";
import {
  registerWorker,
  z,
  IIIError,
  TriggerAction,
  MAX_BUFFERED_FRAMES,
  reconnectDelay,
  DEFAULT_RECONNECTION,
  type EdgeClient,
} from "@iii-edge/sdk-edge/node";
import { nodeSurface } from "@iii-edge/sdk-edge/worker-node";
import { FakeEngine, types } from "./fake-engine.ts";

/** The version the client must announce: its package's, as the manifest says. */
const sdkPackage = JSON.parse(readFileSync(path.join(repoRoot, "sdk-edge", "package.json"), "utf8")) as { version: string };

const fast = { reconnectionConfig: { initialDelayMs: 30, maxDelayMs: 200, jitterFactor: 0 } };
const quiet = { warn: () => {}, error: () => {} };

let engine: FakeEngine;
let client: EdgeClient | undefined;

beforeEach(async () => {
  engine = new FakeEngine();
  await engine.start();
});
afterEach(async () => {
  await client?.shutdown();
  client = undefined;
  await engine.stop();
});

function connect(extra: Parameters<typeof registerWorker>[1] = {}): EdgeClient {
  client = registerWorker(engine.url, { workerName: "unit", logger: quiet, ...fast, ...extra });
  return client;
}

const answerCalls = (result: (frame: Record<string, unknown>) => unknown) => {
  engine.onFrame = (conn, f) => {
    if (f.type === "invokefunction" && f.invocation_id && f.function_id !== "engine::workers::register") {
      conn.send({ type: "invocationresult", invocation_id: f.invocation_id, function_id: f.function_id, result: result(f) });
    }
  };
};

describe("open and replay", () => {
  it("sends trigger types, functions, triggers, queued calls, then engine::workers::register", async () => {
    answerCalls(() => ({ ok: true }));
    const c = connect({ metadata: { team: "sdk" } });
    c.registerTriggerType({ id: "t::tick", description: "ticks" }, { registerTrigger: async () => {}, unregisterTrigger: async () => {} });
    c.registerFunction("u::add", ({ a, b }) => ({ sum: a + b }), {
      description: "adds",
      input: z.object({ a: z.number(), b: z.number() }),
    });
    c.registerTrigger({ type: "t::tick", function_id: "u::add", config: { every: 1 } });
    const queued = c.trigger({ function_id: "other::fn", payload: { x: 1 } });
    await expect(queued).resolves.toEqual({ ok: true });
    const conn = await engine.until(() => engine.connections[0]?.frames.length >= 5 && engine.connections[0]);
    expect(types(conn.frames)).toEqual([
      "registertriggertype",
      "registerfunction",
      "registertrigger",
      "invokefunction:other::fn",
      "invokefunction:engine::workers::register",
    ]);
    const fn = conn.frames[1] as { request_format: { type: string; properties: Record<string, unknown> } };
    expect(fn.request_format.type).toBe("object");
    expect(Object.keys(fn.request_format.properties)).toEqual(["a", "b"]);
    expect(conn.frames[2]).toMatchObject({ trigger_type: "t::tick", function_id: "u::add", config: { every: 1 } });
    expect(conn.frames[3]).toMatchObject({ timeout_ms: 30_000 });
    expect(conn.frames[4]).toMatchObject({
      action: { type: "void" },
      data: { runtime: "node", version: sdkPackage.version, name: "unit", metadata: { team: "sdk" }, pid: process.pid },
    });
    expect(c.getConnectionState()).toBe("connected");
    expect(c.workerId).toBe("worker-1");
  });

  it("accepts iii-sdk's object form of registerFunction and HTTP-invoked registrations", async () => {
    const c = connect();
    c.registerFunction({ id: "u::obj", description: "object form", request_format: { type: "object" } }, async () => 1);
    c.registerFunction("u::http", { url: "https://example.com/hook", auth: { type: "hmac", secret_key: "K" } });
    const conn = await engine.until(() => engine.connections[0]?.frames.length >= 3 && engine.connections[0]);
    expect(conn.frames[0]).toEqual({
      type: "registerfunction",
      id: "u::obj",
      description: "object form",
      request_format: { type: "object" },
    });
    expect(conn.frames[1]).toMatchObject({ id: "u::http", invocation: { url: "https://example.com/hook" } });
    conn.send({ type: "invokefunction", invocation_id: "i-http", function_id: "u::http", data: {} });
    const res = await engine.until(() => conn.frames.find((f) => f.invocation_id === "i-http"));
    expect(res).toMatchObject({ error: { code: "function_not_invokable" } });
  });
});

describe("reconnect", () => {
  it("reattaches first, replays every registration with the same trigger ids, and reports states", async () => {
    const states: string[] = [];
    const c = connect();
    c.addConnectionStateListener((s) => states.push(s));
    c.registerFunction("u::f", async () => 1);
    const trig = c.registerTrigger({ trigger_type: "cron", function_id: "u::f", config: { expression: "* * * * * *" } });
    await engine.until(() => engine.connections[0]?.frames.length >= 3);
    engine.dropAll();
    const second = await engine.until(() => engine.connections[1]?.frames.length >= 4 && engine.connections[1]);
    expect(types(second.frames)).toEqual(["reattach", "registerfunction", "registertrigger", "invokefunction:engine::workers::register"]);
    expect(second.frames[0]).toEqual({ type: "reattach", previous_worker_id: "worker-1", reattach_token: "token-1" });
    expect(second.frames[2]).toMatchObject({ id: trig.id });
    await engine.until(() => c.getConnectionState() === "connected");
    expect(states).toEqual(["connected", "reconnecting", "connected"]);
    expect(c.workerId).toBe("worker-2");
  });

  it("once connected, a 404 from the address while the engine restarts is waited out, not fatal", async () => {
    const states: string[] = [];
    const c = connect();
    c.addConnectionStateListener((s) => states.push(s));
    c.registerFunction("u::f", async () => 1);
    await engine.until(() => engine.connections[0]?.frames.some((f) => f.type === "registerfunction"));
    // The engine goes away and, for a while, its port answers every upgrade (and the probe) 404.
    await engine.stop();
    let refused = 0;
    const notFound = http.createServer((_req, res) => {
      refused++;
      res.writeHead(404, { "content-type": "application/json" }).end('{"code":"not_found","message":"no route"}');
    });
    notFound.on("upgrade", (_req, socket) => {
      refused++;
      socket.end("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    });
    await new Promise<void>((r) => notFound.listen(engine.port, "127.0.0.1", () => r()));
    await until(() => refused >= 4, "the client refused twice (upgrade and probe)", 10_000);
    notFound.closeAllConnections();
    await new Promise<void>((r) => notFound.close(() => r()));
    await engine.start(engine.port);
    const back = await engine.until(
      () => engine.connections[1]?.frames.some((f) => f.type === "registerfunction") && engine.connections[1],
      10_000,
    );
    expect(back.frames.find((f) => f.type === "registerfunction")).toMatchObject({ id: "u::f" });
    await engine.until(() => c.getConnectionState() === "connected");
    expect(states.at(-1)).toBe("connected");
    expect(states).not.toContain("failed");
  });

  it("reconnect() dials at once instead of waiting out the retry delay", async () => {
    // A long backoff: without reconnect() the next attempt would be a minute away.
    const c = connect({ reconnectionConfig: { initialDelayMs: 60_000, maxDelayMs: 60_000, jitterFactor: 0 } });
    await engine.until(() => c.getConnectionState() === "connected");
    await engine.stop();
    await engine.until(() => c.getConnectionState() === "reconnecting");
    await engine.start(engine.port);
    const before = engine.connections.length;
    c.reconnect();
    await engine.until(() => c.getConnectionState() === "connected");
    expect(engine.connections.length).toBe(before + 1);
  });

  it("comes back after the engine process restarts (server down for a while)", async () => {
    const c = connect();
    c.registerFunction("u::g", async () => "g");
    await engine.until(() => engine.connections[0]?.frames.length >= 2);
    await engine.stop();
    await new Promise((r) => setTimeout(r, 300)); // several failed attempts
    const before = engine.connections.length;
    await engine.start(engine.port);
    const conn = await engine.until(() =>
      engine.connections.slice(before).find((x) => x.frames.some((f) => f.type === "registerfunction")),
    );
    conn.send({ type: "invokefunction", invocation_id: "i-g", function_id: "u::g", data: null });
    const res = await engine.until(() => conn.frames.find((f) => f.invocation_id === "i-g"));
    expect(res).toMatchObject({ type: "invocationresult", result: "g" });
  });

  it("pings with JSON and reconnects by itself when the engine goes silent (half-open socket)", async () => {
    const c = connect({ heartbeat: { intervalMs: 50, timeoutMs: 250 } });
    c.registerFunction("u::hb", async () => "hb");
    // The first connection never answers: after the timeout the client gives it up and replays.
    const second = await engine.until(
      () => engine.connections[1]?.frames.some((f) => f.type === "registerfunction") && engine.connections[1],
      3_000,
    );
    expect(engine.connections[0]!.frames.filter((f) => f.type === "ping").length).toBeGreaterThanOrEqual(2);
    expect(second.frames[0]).toMatchObject({ type: "reattach", previous_worker_id: "worker-1" });
  });

  it("stays on a socket whose engine answers the pings", async () => {
    engine.onFrame = (conn, f) => {
      if (f.type === "ping") conn.send({ type: "pong" });
    };
    connect({ heartbeat: { intervalMs: 50, timeoutMs: 250 } });
    await new Promise((r) => setTimeout(r, 700));
    expect(engine.connections.length).toBe(1);
    expect(engine.connections[0]!.frames.filter((f) => f.type === "ping").length).toBeGreaterThanOrEqual(5);
  });

  it("uses iii-sdk's backoff: 1 s × 2^n capped at 30 s, ±30 %", () => {
    expect(reconnectDelay(0, DEFAULT_RECONNECTION, () => 0.5)).toBe(1000);
    expect(reconnectDelay(3, DEFAULT_RECONNECTION, () => 0.5)).toBe(8000);
    expect(reconnectDelay(10, DEFAULT_RECONNECTION, () => 0.5)).toBe(30000);
    expect(reconnectDelay(0, DEFAULT_RECONNECTION, () => 0)).toBe(700);
    expect(reconnectDelay(0, DEFAULT_RECONNECTION, () => 1)).toBe(1300);
  });
});

describe("calls", () => {
  it("fails fast with invocation_stopped when the socket drops under a synchronous call", async () => {
    const c = connect();
    await engine.until(() => c.getConnectionState() === "connected");
    const call = c.trigger({ function_id: "slow::fn", payload: {}, timeoutMs: 30_000 });
    await engine.until(() => engine.last.frames.some((f) => f.function_id === "slow::fn"));
    const t0 = Date.now();
    engine.dropAll();
    const err = await call.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(IIIError);
    expect((err as IIIError).code).toBe("invocation_stopped");
    expect(Date.now() - t0).toBeLessThan(1_000);
  });

  it("a worker surface counts the drops of its connection (a handler that sees the count move knows the engine may have given its invocation up)", async () => {
    const c = connect();
    const surface = nodeSurface(c, engine.url, {});
    await engine.until(() => c.getConnectionState() === "connected");
    expect(surface.connectionEpoch?.()).toBe(0);
    for (const drops of [1, 2]) {
      engine.dropAll();
      await engine.until(() => surface.connectionEpoch?.() === drops && c.getConnectionState() === "connected");
      expect(engine.connections.length).toBe(drops + 1);
    }
    expect(surface.connectionEpoch?.()).toBe(2);
  });

  it("keeps calls made while disconnected and sends them after reconnect", async () => {
    answerCalls((f) => ({ got: f.data }));
    const c = connect();
    await engine.until(() => c.getConnectionState() === "connected");
    await engine.stop();
    await engine.until(() => c.getConnectionState() === "reconnecting");
    const call = c.trigger({ function_id: "later::fn", payload: 7 });
    await engine.start(engine.port);
    await expect(call).resolves.toEqual({ got: 7 });
  });

  it("bounds the send buffer while disconnected: overflow is a typed not_connected error", async () => {
    const c = connect();
    await engine.until(() => c.getConnectionState() === "connected");
    await engine.stop();
    await engine.until(() => c.getConnectionState() === "reconnecting");
    const accepted = [];
    for (let i = 0; i < MAX_BUFFERED_FRAMES; i++)
      accepted.push(c.trigger({ function_id: "v::fn", payload: i, action: TriggerAction.Void() }));
    await Promise.all(accepted);
    const overflow = await c.trigger({ function_id: "v::fn", payload: "one too many", action: TriggerAction.Void() }).then(
      () => null,
      (e: unknown) => e,
    );
    expect((overflow as IIIError).code).toBe("not_connected");
    await engine.start(engine.port);
    const conn = await engine.until(() =>
      engine.connections.find((x) => x.frames.filter((f) => f.function_id === "v::fn").length === MAX_BUFFERED_FRAMES),
    );
    expect(conn.frames.filter((f) => f.function_id === "v::fn").map((f) => f.data)).toEqual([...Array(MAX_BUFFERED_FRAMES).keys()]);
  });

  it("turns an error result into IIIError with the wire code; enqueue resolves to the receipt", async () => {
    engine.onFrame = (conn, f) => {
      if (f.type !== "invokefunction" || !f.invocation_id) return;
      if (f.function_id === "nope::fn")
        conn.send({
          type: "invocationresult",
          invocation_id: f.invocation_id,
          function_id: f.function_id,
          error: { code: "function_not_found", message: "Function nope::fn not found" },
        });
      if (f.function_id === "q::fn")
        conn.send({
          type: "invocationresult",
          invocation_id: f.invocation_id,
          function_id: f.function_id,
          result: { messageReceiptId: "r-1" },
        });
    };
    const c = connect();
    const err = await c.trigger({ function_id: "nope::fn" }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: "function_not_found", message: "Function nope::fn not found" });
    await expect(
      c.trigger({ function_id: "q::fn", payload: 1, action: TriggerAction.Enqueue({ queue: "jobs", idempotencyKey: "k1" }) }),
    ).resolves.toEqual({ messageReceiptId: "r-1" });
    const frame = engine.last.frames.find((f) => f.function_id === "q::fn");
    expect(frame).toMatchObject({ action: { type: "enqueue", queue: "jobs", idempotency_key: "k1" } });
    expect(frame).not.toHaveProperty("timeout_ms");
  });

  it("times out locally when nothing answers (engine deadline + grace)", async () => {
    const c = connect();
    const t0 = Date.now();
    const err = await c.trigger({ function_id: "mute::fn", timeoutMs: 100 }).then(
      () => null,
      (e: unknown) => e,
    );
    expect((err as IIIError).code).toBe("timeout");
    expect(Date.now() - t0).toBeGreaterThanOrEqual(100);
    expect(engine.last.frames.find((f) => f.function_id === "mute::fn")).toMatchObject({ timeout_ms: 100 });
  });
});

describe("being invoked", () => {
  it("shutdown() lets a running handler send its result before the socket closes; a call arriving meanwhile is told invocation_stopped", async () => {
    const c = connect();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started = false;
    c.registerFunction("u::slow", async () => {
      started = true;
      await gate;
      return { done: true };
    });
    const conn = await engine.until(() => engine.connections[0]?.frames.length >= 2 && engine.connections[0]);
    let closedAt = -1;
    conn.socket.on("close", () => (closedAt = conn.frames.length));
    conn.send({ type: "invokefunction", invocation_id: "slow-1", function_id: "u::slow", data: {} });
    await engine.until(() => started);
    const stopping = c.shutdown();
    conn.send({ type: "invokefunction", invocation_id: "late-1", function_id: "u::slow", data: {} });
    const late = await engine.until(() => conn.frames.find((f) => f.invocation_id === "late-1"));
    expect(late).toMatchObject({ type: "invocationresult", error: { code: "invocation_stopped" } });
    expect(closedAt).toBe(-1);
    release();
    await stopping;
    await engine.until(() => closedAt >= 0);
    const result = conn.frames.findIndex((f) => f.invocation_id === "slow-1");
    expect(conn.frames[result]).toMatchObject({ type: "invocationresult", result: { done: true } });
    // The result went out before the close.
    expect(result).toBeLessThan(closedAt);
  });

  it("validates zod input (invalid_input with the issue) and strips _caller_worker_id", async () => {
    const c = connect();
    c.registerFunction("u::add", ({ a, b }) => ({ sum: a + b }), {
      input: z.strictObject({ a: z.number(), b: z.number() }),
      output: z.object({ sum: z.number() }),
    });
    const conn = await engine.until(() => engine.connections[0]?.frames.length >= 2 && engine.connections[0]);
    conn.send({ type: "invokefunction", invocation_id: "ok-1", function_id: "u::add", data: { a: 2, b: 3, _caller_worker_id: "w" } });
    conn.send({ type: "invokefunction", invocation_id: "bad-1", function_id: "u::add", data: { a: "two", b: 3 } });
    const ok = await engine.until(() => conn.frames.find((f) => f.invocation_id === "ok-1"));
    const bad = await engine.until(() => conn.frames.find((f) => f.invocation_id === "bad-1"));
    expect(ok).toMatchObject({ type: "invocationresult", function_id: "u::add", result: { sum: 5 } });
    expect(bad).toMatchObject({ type: "invocationresult", error: { code: "invalid_input" } });
    expect((bad as { error: { message: string } }).error.message).toMatch(/a/);
    expect((bad as { error: { message: string } }).error.message).toMatch(/expected number/i);
  });

  it("answers function_not_found, keeps a thrown error's code, and sends nothing without invocation_id", async () => {
    const c = connect();
    c.registerFunction("u::boom", () => {
      throw new IIIError("not_found", "no such thing");
    });
    c.registerFunction("u::plain", () => {
      throw new Error("plain failure");
    });
    const conn = await engine.until(() => engine.connections[0]?.frames.length >= 3 && engine.connections[0]);
    conn.send({ type: "invokefunction", invocation_id: "a", function_id: "u::missing", data: null });
    conn.send({ type: "invokefunction", invocation_id: "b", function_id: "u::boom", data: null });
    conn.send({ type: "invokefunction", invocation_id: "c", function_id: "u::plain", data: null });
    conn.send({ type: "invokefunction", function_id: "u::plain", data: null });
    await engine.until(() => conn.frames.filter((f) => f.type === "invocationresult").length >= 3);
    await new Promise((r) => setTimeout(r, 50));
    const results = conn.frames.filter((f) => f.type === "invocationresult");
    expect(results).toHaveLength(3);
    expect(results.find((f) => f.invocation_id === "a")).toMatchObject({ error: { code: "function_not_found" } });
    expect(results.find((f) => f.invocation_id === "b")).toMatchObject({ error: { code: "not_found", message: "no such thing" } });
    expect(results.find((f) => f.invocation_id === "c")).toMatchObject({ error: { code: "invocation_failed", message: "plain failure" } });
    expect((results.find((f) => f.invocation_id === "c") as { error: { stacktrace?: string } }).error.stacktrace).toMatch(/plain failure/);
  });

  it("continues the caller's trace on calls made inside a handler (no OTel SDK registered)", async () => {
    const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    answerCalls(() => "inner");
    const c = connect();
    c.registerFunction("u::outer", async (_d, _m, ctx) => {
      await new Promise((r) => setTimeout(r, 5)); // after an await: AsyncLocalStorage keeps it
      const viaClient = await c.trigger({ function_id: "x::inner", payload: 1 });
      const viaCtx = await ctx.trigger({ function_id: "x::inner", payload: 2 });
      return [viaClient, viaCtx];
    });
    const conn = await engine.until(() => engine.connections[0]?.frames.length >= 2 && engine.connections[0]);
    conn.send({ type: "invokefunction", invocation_id: "t-1", function_id: "u::outer", data: {}, traceparent: tp, baggage: "tenant=acme" });
    const res = await engine.until(() => conn.frames.find((f) => f.invocation_id === "t-1"));
    expect(res).toMatchObject({ result: ["inner", "inner"], traceparent: tp, baggage: "tenant=acme" });
    const inner = conn.frames.filter((f) => f.function_id === "x::inner");
    expect(inner).toHaveLength(2);
    for (const f of inner) expect(f).toMatchObject({ traceparent: tp, baggage: "tenant=acme" });
    // A call outside any handler carries no trace context.
    await c.trigger({ function_id: "x::inner", payload: 3 });
    expect(conn.frames.filter((f) => f.function_id === "x::inner")[2]).not.toHaveProperty("traceparent");
  });
});

describe("trigger type providers", () => {
  it("answers registertrigger with triggerregistrationresult and forwards unregistertrigger", async () => {
    const seen: string[] = [];
    const c = connect();
    c.registerTriggerType<{ reject?: boolean }>(
      { id: "p::hook", description: "test hooks" },
      {
        registerTrigger: async ({ id, config }) => {
          if (config?.reject) throw new Error("config.reject was set");
          seen.push(`register:${id}`);
        },
        unregisterTrigger: async ({ id }) => {
          seen.push(`unregister:${id}`);
        },
      },
    );
    const conn = await engine.until(() => engine.connections[0]?.frames.length >= 2 && engine.connections[0]);
    conn.send({ type: "registertrigger", id: "t1", trigger_type: "p::hook", function_id: "f::a", config: {} });
    conn.send({ type: "registertrigger", id: "t2", trigger_type: "p::hook", function_id: "f::b", config: { reject: true } });
    conn.send({ type: "registertrigger", id: "t3", trigger_type: "p::other", function_id: "f::c", config: {} });
    await engine.until(() => conn.frames.filter((f) => f.type === "triggerregistrationresult").length >= 3);
    const results = conn.frames.filter((f) => f.type === "triggerregistrationresult");
    expect(results.find((f) => f.id === "t1")).toEqual({
      type: "triggerregistrationresult",
      id: "t1",
      trigger_type: "p::hook",
      function_id: "f::a",
    });
    expect(results.find((f) => f.id === "t2")).toMatchObject({
      error: { code: "trigger_registration_failed", message: "config.reject was set" },
    });
    expect(results.find((f) => f.id === "t3")).toMatchObject({ error: { code: "trigger_type_not_found" } });
    conn.send({ type: "unregistertrigger", id: "t1", trigger_type: "p::hook" });
    await engine.until(() => seen.includes("unregister:t1"));
    expect(seen).toEqual(["register:t1", "unregister:t1"]);
  });
});
