// http triggers through the real front door: request shape (§8.1), response mapping, 404/500/504/
// 422, middleware, reserved paths refused at registration, namespaces, and static assets kept.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { RawWorker } from "./raw-worker.ts";

const get = (path: string, init?: RequestInit) => exports.default.fetch(`http://127.0.0.1:8787${path}`, init);

describe("http trigger", () => {
  it("serves a route with path params, query, headers and a JSON body; maps {status_code, headers, body}", async () => {
    const w = await RawWorker.connect("default");
    const seen: unknown[] = [];
    w.fn("h::orders", (req) => {
      seen.push(req);
      return { status_code: 201, headers: { "x-order": "42" }, body: { created: (req as { path_params: { id: string } }).path_params.id } };
    });
    const id = w.trigger("http", "h::orders", { api_path: "/orders/:id", http_method: "post" });
    await w.settle();
    expect(w.registrationErrors(id)).toEqual([]);
    const res = await get("/orders/42?verbose=1", {
      method: "POST",
      headers: { "content-type": "application/json", "x-trace": "t" },
      body: JSON.stringify({ name: "widget" }),
    });
    expect(res.status).toBe(201);
    expect(res.headers.get("x-order")).toBe("42");
    expect(await res.json()).toEqual({ created: "42" });
    expect(seen[0]).toMatchObject({
      query_params: { verbose: "1" },
      path_params: { id: "42" },
      path: "orders/:id",
      method: "POST",
      body: { name: "widget" },
      trigger: { type: "http", path: "orders/:id", method: "POST" },
    });
    expect((seen[0] as { headers: Record<string, string> }).headers["x-trace"]).toBe("t");
    await w.close();
  });

  it("passes text bodies as strings, invalid JSON as null, and sends string bodies verbatim", async () => {
    const w = await RawWorker.connect("default");
    w.fn("h::echo", (req) => ({ headers: ["Content-Type: text/plain"], body: `got ${JSON.stringify((req as { body: unknown }).body)}` }));
    w.trigger("http", "h::echo", { api_path: "echo", http_method: "PUT" });
    await w.settle();
    let res = await get("/echo", { method: "PUT", headers: { "content-type": "text/plain" }, body: "hello" });
    expect(res.headers.get("content-type")).toBe("text/plain");
    expect(await res.text()).toBe('got "hello"');
    res = await get("/echo", { method: "PUT", headers: { "content-type": "application/json" }, body: "{nope" });
    expect(await res.text()).toBe("got null");
    await w.close();
  });

  it("answers 404 JSON for unknown routes, 500 with the error for a failing function, 504 past the deadline", async () => {
    const w = await RawWorker.connect("default");
    w.fn("h::boom", () => {
      throw new Error("kaboom");
    });
    w.fn("h::slow", () => new Promise((r) => setTimeout(() => r({ body: "late" }), 2000)));
    w.trigger("http", "h::boom", { api_path: "boom" });
    w.trigger("http", "h::slow", { api_path: "slow", timeout_ms: 200 });
    await w.settle();
    let res = await get("/no/such/route");
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: { code: "not_found", message: "Not Found" } });
    res = await get("/boom");
    expect(res.status).toBe(500);
    const body = (await res.json()) as { error: { code: string; message: string; error_id: string } };
    expect(body.error).toMatchObject({ code: "invocation_failed", message: "kaboom" });
    expect(body.error.error_id).toMatch(/^[0-9a-f]{16}$/);
    res = await get("/slow");
    expect(res.status).toBe(504);
    await w.close();
  });

  it("runs the condition (false → 422) and middleware (respond short-circuits, continue proceeds)", async () => {
    const w = await RawWorker.connect("default");
    w.fn("h::guarded", () => ({ body: { ok: true } }));
    w.fn("h::cond", (req) => (req as { query_params: { allow?: string } }).query_params.allow === "1");
    w.fn("h::auth", (input) => {
      const { request } = input as { phase: string; request: { headers: Record<string, string> } };
      return request.headers.authorization === "Bearer ok"
        ? { action: "continue" }
        : { action: "respond", response: { status_code: 401, body: { error: "no" } } };
    });
    w.trigger("http", "h::guarded", { api_path: "guarded", condition_function_id: "h::cond", middleware_function_ids: ["h::auth"] });
    await w.settle();
    expect((await get("/guarded?allow=1")).status).toBe(401);
    const skipped = await get("/guarded?allow=0", { headers: { authorization: "Bearer ok" } });
    expect(skipped.status).toBe(422);
    expect(await skipped.json()).toEqual({ error: { code: "condition_not_met", message: "Request condition not met" }, skipped: true });
    const ok = await get("/guarded?allow=1", { headers: { authorization: "Bearer ok" } });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ ok: true });
    await w.close();
  });

  it("refuses reserved paths and colliding shapes at registration with a clear error", async () => {
    const w = await RawWorker.connect("default");
    w.fn("h::x", () => ({}));
    const refused = ["/healthz", "/_iii/invoke", "/ns/foo", "/ws/channels/:id", "/", "/index.html", "/sdk/app.js", "/otel"].map(
      (p) => [p, w.trigger("http", "h::x", { api_path: p })] as const,
    );
    const a = w.trigger("http", "h::x", { api_path: "items/:id" });
    const b = w.trigger("http", "h::x", { api_path: "items/:other" });
    const badMethod = w.trigger("http", "h::x", { api_path: "m", http_method: "BREW" });
    await w.settle();
    for (const [p, id] of refused) {
      const errs = w.registrationErrors(id);
      expect(errs[0]?.code, p).toBe("trigger_registration_failed");
      expect(errs[0]?.message).toMatch(/reserved|static asset/);
    }
    expect(w.registrationErrors(a)).toEqual([]);
    expect(w.registrationErrors(b)[0]?.message).toMatch(/collides/);
    expect(w.registrationErrors(badMethod)[0]?.code).toBe("trigger_registration_failed");
    await w.close();
  });

  it("keeps static assets and engine paths working, and serves other namespaces under /ns/<ns>/http/", async () => {
    const asset = await get("/index.html");
    expect(asset.status).toBe(200);
    expect(await asset.text()).toContain("<");
    expect(((await (await get("/healthz")).json()) as { ok: boolean }).ok).toBe(true);
    // The bench's plain baseline lives in the bench Worker (tests/bench/bench-worker.ts), not here.
    expect((await get("/_iii/bench/plain")).status).toBe(404);

    const w = await RawWorker.connect("tenant-a");
    w.fn("h::tenant", (req) => ({ body: { tenant: "a", id: (req as { path_params: { id: string } }).path_params.id } }));
    w.trigger("http", "h::tenant", { api_path: "things/:id" });
    await w.settle();
    const res = await get("/ns/tenant-a/http/things/7");
    expect(await res.json()).toEqual({ tenant: "a", id: "7" });
    // The default namespace has no such route.
    expect((await get("/things/7")).status).toBe(404);
    // Bindings die with their worker: once the engine has handled the close, the route is gone.
    await w.close();
    expect((await get("/ns/tenant-a/http/things/7")).status).toBe(404);
  });
});
