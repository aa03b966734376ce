// Global HTTP middleware (protocol/README.md §8.1), configured with the HTTP_MIDDLEWARE var of the
// engine `npm start` runs: it runs before every route's own middleware and can answer by itself.
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";

let engine: EngineServer;
let iii: IIIClient;
const order: string[] = [];

beforeAll(async () => {
  engine = await startEngine({ vars: { HTTP_MIDDLEWARE: "mw::auth" } });
  iii = registerWorker(engine.wsUrl, { workerName: "middleware-e2e", otel: { enabled: false } });
  iii.registerFunction("mw::auth", async (input: { phase: string; request: { headers: Record<string, string> } }) => {
    order.push(`auth:${input.phase}`);
    if (input.request.headers["x-token"] !== "let-me-in")
      return { action: "respond", response: { status_code: 401, body: { error: "no token" } } };
    return { action: "continue" };
  });
  iii.registerFunction("mw::route", async () => {
    order.push("route-mw");
    return { action: "continue" };
  });
  iii.registerFunction("mw::handler", async () => {
    order.push("handler");
    return { status_code: 200, body: { ok: true } };
  });
  iii.registerTrigger({
    type: "http",
    function_id: "mw::handler",
    config: { api_path: "guarded", http_method: "GET", middleware_function_ids: ["mw::route"] },
  });
  const end = Date.now() + 15_000;
  for (;;) {
    const r = await fetch(`${engine.url}/guarded`, { headers: { "x-token": "let-me-in" } });
    if (r.status === 200) break;
    if (Date.now() > end) throw new Error(`route never came up: ${r.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}, 120_000);

afterAll(async () => {
  await iii?.shutdown();
  await engine?.stop();
});

describe("global HTTP middleware", () => {
  it("answers for the route when it says respond; the handler never runs", async () => {
    order.length = 0;
    const r = await fetch(`${engine.url}/guarded`);
    expect(r.status).toBe(401);
    expect(await r.json()).toEqual({ error: "no token" });
    expect(order).toEqual(["auth:preHandler"]);
  });

  it("runs before the route's own middleware, then the handler", async () => {
    order.length = 0;
    const r = await fetch(`${engine.url}/guarded`, { headers: { "x-token": "let-me-in" } });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ ok: true });
    expect(order).toEqual(["auth:preHandler", "route-mw", "handler"]);
  });
});
