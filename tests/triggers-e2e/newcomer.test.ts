// A newcomer's first hour against `npm start`: what they get wrong, and what the engine and the
// SDKs tell them. A WebSocket dialled at a path with no endpoint is answered with the right paths
// (a 404 body for Node clients, a close reason for browsers); the sdk-edge Node client stops and
// says so instead of reconnecting forever (the unmodified iii-sdk 0.22.1 cannot be changed: what it
// does is pinned here too); `/_iii/invoke` says what is wrong with a request; `npm start` prints
// where everything is once it is healthy.
import { registerWorker as iiiSdkWorker } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerWorker, type EdgeClient } from "@iii-edge/sdk-edge/node";
import { freePort, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { upgradeStatus } from "@iii-edge/test-support/raw-socket";
import { eventually } from "@iii-edge/test-support/wait";

let engine: EngineServer;
const clients: { shutdown(): Promise<void> }[] = [];
const quiet = { warn: () => {}, error: () => {} };

beforeAll(async () => {
  engine = await startEngine({ wrangler: true });
});
afterAll(async () => {
  for (const c of clients) await c.shutdown().catch(() => {});
  await engine?.stop();
});

/** A WebSocket upgrade request as a Node client sends it, answered how? */
const upgrade = (path: string, headers: Record<string, string> = {}) => upgradeStatus(`${engine.url}${path}`, headers);

const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${engine.url}${path}`, { method: "POST", body, headers });

describe("a WebSocket dialled at the wrong path", () => {
  it("a Node client gets 404 with a body naming the paths to dial", async () => {
    for (const path of ["/ws", "/wrong", "/ns/team-a/wrong", "/ns/team-a/"]) {
      const r = await upgrade(path);
      expect(r.status, path).toBe(404);
      const body = r.body as { error: { code: string; message: string }; endpoints: Record<string, string> };
      expect(body.error.code).toBe("not_found");
      expect(body.error.message).toBe(
        `no WebSocket endpoint at ${path}: a worker dials ${engine.wsUrl}/ (namespace "default") or ${engine.wsUrl}/ns/<namespace>; browser stream subscriptions use ${engine.wsUrl}/_iii/streams`,
      );
      expect(body.endpoints).toMatchObject({
        worker: `${engine.wsUrl}/`,
        namespace: `${engine.wsUrl}/ns/<namespace>`,
        streams: `${engine.wsUrl}/_iii/streams`,
      });
    }
    // The real endpoints still upgrade.
    for (const path of ["/", "/ns/team-a", "/_iii/streams", "/otel"]) expect((await upgrade(path)).status, path).toBe(101);
  });

  it("a browser (it sends Origin, and cannot read a refused handshake) gets an error frame and a close reason naming them", async () => {
    // undici's WebSocket takes headers as its (non-standard) second argument, Origin included.
    const ws = new WebSocket(`${engine.wsUrl}/ws`, { headers: { origin: engine.url } } as unknown as string[]);
    const frames: string[] = [];
    ws.onmessage = (m) => frames.push(String(m.data));
    const closed = await new Promise<CloseEvent>((r) => (ws.onclose = r));
    expect(closed.code).toBe(4404);
    expect(closed.reason).toBe("no WebSocket at /ws; dial / or /ns/<namespace> (streams: /_iii/streams)");
    expect(frames.map((f) => JSON.parse(f))).toEqual([
      { type: "error", error: { code: "not_found", message: expect.stringContaining(`a worker dials ${engine.wsUrl}/`) } },
    ]);
  });

  it("the sdk-edge Node client fails with the engine's message, once, and every call fails at once with it", async () => {
    const states: string[] = [];
    const errors: string[] = [];
    const c: EdgeClient = registerWorker(`${engine.wsUrl}/wrong`, {
      workerName: "newcomer",
      logger: { warn: () => {}, error: (m) => void errors.push(m) },
    });
    clients.push(c);
    c.addConnectionStateListener((s) => void states.push(s));
    await eventually(() => c.getConnectionState() === "failed", 10_000, "failed");
    expect(c.connectionError?.code).toBe("not_found");
    expect(c.connectionError?.message).toContain(`no WebSocket endpoint at /wrong: a worker dials ${engine.wsUrl}/`);
    expect(errors).toEqual([`cannot connect to the engine: ${c.connectionError?.message}`]);
    const t0 = Date.now();
    await expect(c.trigger({ function_id: "engine::functions::list", payload: {} })).rejects.toMatchObject({ code: "not_found" });
    expect(Date.now() - t0).toBeLessThan(1_000); // at once, not after a call deadline
    // It does not come back: no reconnecting after it failed.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(states).toEqual(["failed"]);
  });

  it("an invalid namespace is fatal too; an engine that is merely down is retried, not failed", async () => {
    const bad = registerWorker(`${engine.wsUrl}/ns/not$valid`, { logger: quiet });
    clients.push(bad);
    await eventually(() => bad.getConnectionState() === "failed", 10_000, "failed");
    expect(bad.connectionError).toMatchObject({ code: "invalid_arguments", message: expect.stringContaining("invalid namespace") });

    const down = registerWorker(`ws://127.0.0.1:${await freePort()}/`, {
      logger: quiet,
      reconnectionConfig: { initialDelayMs: 100, maxDelayMs: 200 },
    });
    clients.push(down);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(down.getConnectionState()).not.toBe("failed");
    expect(down.connectionError).toBeUndefined();
  });

  it("the unmodified iii-sdk keeps reconnecting, and a call fails only at its timeout (documented in docs/http.md)", async () => {
    const logged: string[] = [];
    const original = console.error;
    console.error = (...args: unknown[]) => void logged.push(args.map(String).join(" "));
    try {
      const iii = iiiSdkWorker(`${engine.wsUrl}/wrong`, {
        workerName: "newcomer-iii-sdk",
        otel: { enabled: false },
        enableMetricsReporting: false,
        invocationTimeoutMs: 1_500,
      });
      clients.push(iii);
      const t0 = Date.now();
      const err = await iii.trigger({ function_id: "engine::functions::list", payload: {} }).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(err?.message).toMatch(/timed? ?out/i);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(1_400);
      // What it tells the user: the status, not the engine's body.
      expect(logged.some((l) => l.includes("Unexpected server response: 404"))).toBe(true);
    } finally {
      console.error = original;
    }
  });
});

describe("POST /_iii/invoke says what is wrong", () => {
  it("a body that is not JSON, an empty body, a body of the wrong shape", async () => {
    const notJson = await post("/_iii/invoke", "function_id=state::get");
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as { error: { message: string } }).error.message).toMatch(
      /^the body is not JSON \(.+\): POST a JSON object \{function_id, payload\?, namespace\?, action\?, timeout_ms\?\}$/,
    );
    const empty = await post("/_iii/invoke", "");
    expect(((await empty.json()) as { error: { message: string } }).error.message).toMatch(/^the body is empty: POST a JSON object/);
    const shape = await post("/_iii/invoke", JSON.stringify({ function: "state::get" }));
    expect(shape.status).toBe(400);
    expect(((await shape.json()) as { error: { code: string; message: string } }).error).toEqual({
      code: "invalid_arguments",
      message: expect.stringMatching(/^body must be \{function_id, payload\?, namespace\?, action\?, timeout_ms\?\} \(function_id: .+\)$/),
    });
  });

  it("GET and other methods: 405 with Allow: POST", async () => {
    for (const method of ["GET", "PUT", "DELETE"]) {
      for (const path of ["/_iii/invoke", "/ns/team-a/_iii/invoke"]) {
        const r = await fetch(`${engine.url}${path}`, { method });
        expect(r.status, `${method} ${path}`).toBe(405);
        expect(r.headers.get("allow")).toBe("POST");
        expect(((await r.json()) as { error: { message: string } }).error.message).toBe(
          `${method} is not supported here: POST a JSON object {function_id, payload?, namespace?, action?, timeout_ms?}`,
        );
      }
    }
  });

  it("/ns/<ns>/_iii/invoke calls in that namespace, as the body's `namespace` does; both at once must agree", async () => {
    const set = await post(
      "/ns/team-a/_iii/invoke",
      JSON.stringify({ function_id: "state::set", payload: { scope: "newcomer", key: "k", value: "in team-a" } }),
    );
    expect(set.status).toBe(200);
    const viaBody = await post(
      "/_iii/invoke",
      JSON.stringify({ function_id: "state::get", namespace: "team-a", payload: { scope: "newcomer", key: "k" } }),
    );
    expect(await viaBody.json()).toEqual({ result: "in team-a" });
    const inDefault = await post("/_iii/invoke", JSON.stringify({ function_id: "state::get", payload: { scope: "newcomer", key: "k" } }));
    expect(await inDefault.json()).toEqual({ result: null });
    const clash = await post(
      "/ns/team-a/_iii/invoke",
      JSON.stringify({ function_id: "state::get", namespace: "team-b", payload: { scope: "newcomer", key: "k" } }),
    );
    expect(clash.status).toBe(400);
    expect(((await clash.json()) as { error: { message: string } }).error.message).toBe(
      "namespace given twice: the path says 'team-a', the body 'team-b'",
    );
    expect((await post("/ns/bad$ns/_iii/invoke", JSON.stringify({ function_id: "state::get", payload: {} }))).status).toBe(400);
  });

  it("include_internal: the engine's own functions are listed only when asked for", async () => {
    const list = async (payload: unknown) =>
      (
        (await (await post("/_iii/invoke", JSON.stringify({ function_id: "engine::functions::list", payload }))).json()) as {
          result: { functions: { function_id: string }[] };
        }
      ).result.functions.map((f) => f.function_id);
    expect(await list({})).not.toContain("engine::functions::list");
    expect(await list({ include_internal: true })).toContain("engine::functions::list");
  });
});

describe("npm start", () => {
  it("prints where everything is once /healthz answers", async () => {
    await eventually(() => engine.output().includes("iii-edge engine ready"), 15_000, "the ready lines");
    const out = engine.output();
    const ready = out.slice(out.indexOf("iii-edge engine ready"));
    expect(ready).toContain(`workers dial  ${engine.wsUrl}/   (namespace default; another namespace: ${engine.wsUrl}/ns/<name>)`);
    expect(ready).toContain(`console       ${engine.url}/`);
    expect(ready).toContain(`health        ${engine.url}/healthz`);
    // Printed once, after the start-up line.
    expect(out.split("iii-edge engine ready").length).toBe(2);
    expect(out.indexOf("iii-edge engine starting")).toBeLessThan(out.indexOf("iii-edge engine ready"));
  });
});
