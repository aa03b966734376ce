// The unmodified iii-sdk@0.22.1 against `npm start`'s engine with AUTH_SECRET set: what the front
// door decides (a token on the handshake, on /_iii/invoke, on the /otel socket). The calls, state,
// triggers and discovery iii-sdk drives through the engine itself run on the engine core in
// tests/unit/iii-sdk.test.ts.
import http from "node:http";
import { registerWorker } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { failure, invokeHttp, listed, registered, sleep, worker, type Worker } from "./sdk.ts";

let engine: EngineServer;
let a: Worker;
let b: Worker;

beforeAll(async () => {
  engine = await startSecureEngine();
  a = await worker(engine.wsUrl, "interop-a");
  b = await worker(engine.wsUrl, "interop-b");
  b.registerFunction("b::add", async (data: { a: number; b: number }) => ({ sum: data.a + data.b }));
  await registered(a, "b::add");
});

afterAll(async () => {
  await Promise.allSettled([a?.shutdown(), b?.shutdown()]);
  await engine?.stop();
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
