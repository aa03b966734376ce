// HTTP-invoked ("external") functions to a local URL, as iii-sdk@0.22.1 uses them during
// development: a webhook server on 127.0.0.1 registered as a function, fed by a
// `durable:subscriber` binding. Allowed by `npm start` when the engine is loopback-only (no
// AUTH_SECRET: only this machine's clients get in); never with a deployed engine's settings
// (wrangler.toml: ALLOW_PRIVATE_HTTP_FUNCTIONS = "false"), where every SSRF refusal stays — shown
// here with those settings, and in tests/security/http.test.ts for an engine with auth on.
import { readFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { eventually } from "@iii-edge/test-support/wait";
import { listed, sleep, until } from "./sdk.ts";

interface Delivery {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

/** A local webhook server recording what the engine sends it. */
async function webhook(): Promise<{ url: string; seen: Delivery[]; close(): Promise<void> }> {
  const seen: Delivery[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString();
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: text ? (JSON.parse(text) as unknown) : null });
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"ok":true}');
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhook`,
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

const connect = (engine: EngineServer, name: string) =>
  registerWorker(engine.wsUrl, { workerName: name, otel: { enabled: false }, invocationTimeoutMs: 10_000 });
const functionIds = listed;
const publish = (w: IIIClient, topic: string, data: unknown) =>
  w.trigger({ function_id: "iii::durable::publish", payload: { topic, data } });

describe("npm start, loopback-only (no AUTH_SECRET): local webhooks work", () => {
  let engine: EngineServer;
  let w: IIIClient;

  beforeAll(async () => {
    engine = await startEngine();
    w = connect(engine, "webhooks-dev");
    await until(() => functionIds(w), "connected");
  });
  afterAll(async () => {
    await w?.shutdown();
    await engine?.stop();
  });

  it("registers a function at a 127.0.0.1 URL and delivers a queue topic's events to it; unregister removes it", async () => {
    const hook = await webhook();
    try {
      const fn = w.registerFunction("dev::hook", { url: hook.url, method: "POST", timeout_ms: 3000 });
      await until(async () => (await functionIds(w)).includes("dev::hook"), "dev::hook listed");
      const sub = w.registerTrigger({ type: "durable:subscriber", function_id: "dev::hook", config: { topic: "dev.orders" } });
      await sleep(200);
      await publish(w, "dev.orders", { order: 1, item: "widget" });
      const got = await eventually(() => hook.seen[0], 10_000, "the delivery");
      expect(got).toMatchObject({ method: "POST", url: "/webhook", body: { order: 1, item: "widget" } });
      expect(got.headers["content-type"]).toBe("application/json");
      expect(got.headers["x-iii-function-path"]).toBe("dev::hook");
      sub.unregister();
      fn.unregister();
      await until(async () => !(await functionIds(w)).includes("dev::hook"), "dev::hook removed");
    } finally {
      await hook.close();
    }
  });

  it("sends the configured custom headers, and PUT when asked", async () => {
    const hook = await webhook();
    try {
      w.registerFunction("dev::put", {
        url: hook.url,
        method: "PUT",
        timeout_ms: 3000,
        headers: { "X-Custom-Header": "test-value", "X-Another": "123" },
      });
      w.registerTrigger({ type: "durable:subscriber", function_id: "dev::put", config: { topic: "dev.put" } });
      await until(async () => (await functionIds(w)).includes("dev::put"), "dev::put listed");
      await sleep(200);
      await publish(w, "dev.put", { method_test: "put", value: 42 });
      const got = await eventually(() => hook.seen[0], 10_000, "the PUT delivery");
      expect(got).toMatchObject({ method: "PUT", url: "/webhook", body: { method_test: "put", value: 42 } });
      expect(got.headers["x-custom-header"]).toBe("test-value");
      expect(got.headers["x-another"]).toBe("123");
      // A direct call reaches it too, and its JSON answer is the result.
      expect(await w.trigger({ function_id: "dev::put", payload: { direct: true } })).toEqual({ ok: true });
    } finally {
      await hook.close();
    }
  });

  it("two external functions on two topics each get only their own events, and none after unregister", async () => {
    const [hookA, hookB] = [await webhook(), await webhook()];
    try {
      const fa = w.registerFunction("dev::multi-a", { url: hookA.url, timeout_ms: 3000 });
      const fb = w.registerFunction("dev::multi-b", { url: hookB.url, timeout_ms: 3000 });
      const ta = w.registerTrigger({ type: "durable:subscriber", function_id: "dev::multi-a", config: { topic: "dev.multi.a" } });
      const tb = w.registerTrigger({ type: "durable:subscriber", function_id: "dev::multi-b", config: { topic: "dev.multi.b" } });
      await until(async () => {
        const ids = await functionIds(w);
        return ids.includes("dev::multi-a") && ids.includes("dev::multi-b");
      }, "both listed");
      await sleep(200);
      await publish(w, "dev.multi.a", { source: "topic-a" });
      await publish(w, "dev.multi.b", { source: "topic-b" });
      await eventually(() => hookA.seen.length === 1 && hookB.seen.length === 1, 10_000, "one delivery each");
      expect(hookA.seen[0]?.body).toMatchObject({ source: "topic-a" });
      expect(hookB.seen[0]?.body).toMatchObject({ source: "topic-b" });

      ta.unregister();
      fa.unregister();
      await until(async () => !(await functionIds(w)).includes("dev::multi-a"), "dev::multi-a removed");
      await publish(w, "dev.multi.a", { source: "after" });
      await publish(w, "dev.multi.b", { source: "still" });
      await eventually(() => hookB.seen.length === 2, 10_000, "B's second delivery");
      // B's later event has arrived, so A's (published first) would have too.
      await sleep(300);
      expect(hookA.seen).toHaveLength(1);
      tb.unregister();
      fb.unregister();
    } finally {
      await hookA.close();
      await hookB.close();
    }
  });
});

describe("a deployed engine's settings (ALLOW_PRIVATE_HTTP_FUNCTIONS=false): every SSRF refusal stays", () => {
  let engine: EngineServer;
  let w: IIIClient;

  beforeAll(async () => {
    // What wrangler.toml gives a deploy (npm start's loopback default does not apply there).
    const toml = readFileSync(path.join(repoRoot, "wrangler.toml"), "utf8");
    expect(toml).toMatch(/^ALLOW_PRIVATE_HTTP_FUNCTIONS = "false"$/m);
    engine = await startEngine({ vars: { ALLOW_PRIVATE_HTTP_FUNCTIONS: "false" } });
    w = connect(engine, "webhooks-deployed");
    await until(() => functionIds(w), "connected");
  });
  afterAll(async () => {
    await w?.shutdown();
    await engine?.stop();
  });

  it("refuses loopback, private and metadata URLs, registering nothing and calling nothing", async () => {
    const hook = await webhook();
    try {
      const refused = [
        hook.url,
        "http://localhost:9/x",
        "http://10.0.0.1/x",
        "https://192.168.1.1/x",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/x",
        "https://[::ffff:127.0.0.1]/x",
      ];
      refused.forEach((url, i) => w.registerFunction(`deployed::ssrf-${i}`, { url }));
      w.registerFunction("deployed::marker", async () => "ok");
      await until(async () => (await functionIds(w)).includes("deployed::marker"), "the marker registered after them");
      expect((await functionIds(w)).filter((id) => id.startsWith("deployed::ssrf-"))).toEqual([]);
      await expect(w.trigger({ function_id: "deployed::ssrf-0", payload: {} })).rejects.toMatchObject({ code: "function_not_found" });
      expect(hook.seen).toEqual([]);
    } finally {
      await hook.close();
    }
  });
});
