// http triggers' guards through the real front door and Engine object: a route belongs to the
// binding holding it while its owner is connected (forbidden for anyone else), path params that
// decode to a path separator or dot segment are refused before any function runs, and a request
// body is cut off as soon as it passes its bound, without reading the rest.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { RawWorker, eventually } from "./raw-worker.ts";

const get = (path: string, init?: RequestInit) => exports.default.fetch(`http://127.0.0.1:8787${path}`, init);
/** The front door's body bound (engine-do/src/http-routes.ts MAX_HTTP_BODY_BYTES). */
const MAX_BODY = 1024 * 1024;

async function bindings(w: RawWorker): Promise<{ id: string; function_id: string; config: unknown }[]> {
  const r = await w.call("engine::registered-triggers::list", { trigger_type: "http" });
  return (r.result as { registered_triggers: { id: string; function_id: string; config: unknown }[] }).registered_triggers;
}

describe("http trigger routes are owned", () => {
  it("refuses another worker's trigger on a held route (same or other param names), and A keeps its requests", async () => {
    const a = await RawWorker.connect("default");
    const b = await RawWorker.connect("default");
    const seenByA: { headers: Record<string, string> }[] = [];
    let seenByB = 0;
    a.fn("owned::a", (req) => {
      seenByA.push(req as { headers: Record<string, string> });
      return { body: { by: "a" } };
    });
    b.fn("owned::b", () => {
      seenByB++;
      return { body: { by: "b" } };
    });
    const mine = a.trigger("http", "owned::a", { api_path: "/owned/acct/:id", http_method: "POST" });
    await a.settle();
    expect(a.registrationErrors(mine)).toEqual([]);
    const before = await bindings(b);

    const attempts = [
      b.trigger("http", "owned::b", { api_path: "/owned/acct/:id", http_method: "POST" }),
      b.trigger("http", "owned::b", { api_path: "owned/acct/:other/", http_method: "post" }),
      b.trigger("http", "owned::b", { api_path: "//owned//acct/:x", http_method: "POST" }),
    ];
    await b.settle();
    for (const id of attempts) {
      expect(b.registrationErrors(id)[0], id).toMatchObject({ code: "forbidden", message: expect.stringMatching(/held by another owner/) });
    }
    // B reusing A's trigger id is refused too (the engine's trigger-id ownership).
    b.trigger("http", "owned::b", { api_path: "/owned/acct/:id", http_method: "POST" }, mine);
    await b.settle();
    expect(b.registrationErrors(mine)[0]?.code).toBeDefined();
    expect(await bindings(b)).toEqual(before);

    const res = await get("/owned/acct/7", { method: "POST", headers: { authorization: "Bearer for-a-only" } });
    expect(await res.json()).toEqual({ by: "a" });
    expect(seenByA.at(-1)?.headers.authorization).toBe("Bearer for-a-only");
    expect(seenByB).toBe(0);
    // Another method on the same path is another route.
    const put = b.trigger("http", "owned::b", { api_path: "/owned/acct/:id", http_method: "PUT" });
    await b.settle();
    expect(b.registrationErrors(put)).toEqual([]);
    await a.close();
    await b.close();
  });

  it("lets the owner re-register its route under another id, and frees the route when the owner leaves", async () => {
    const a = await RawWorker.connect("default");
    const b = await RawWorker.connect("default");
    a.fn("free::a", () => ({ body: "a" }));
    b.fn("free::b", () => ({ body: "b" }));
    const first = a.trigger("http", "free::a", { api_path: "/free/:x" });
    const second = a.trigger("http", "free::a", { api_path: "/free/:x" });
    const again = a.trigger("http", "free::a", { api_path: "/free/:x" }, first);
    await a.settle();
    expect([...a.registrationErrors(first), ...a.registrationErrors(second), ...a.registrationErrors(again)]).toEqual([]);
    await a.close();
    const late = await eventually(
      async () => {
        const id = b.trigger("http", "free::b", { api_path: "/free/:y" });
        await b.settle();
        return b.registrationErrors(id).length === 0 && id;
      },
      5_000,
      "route freed after its owner left",
    );
    expect(late).toBeTruthy();
    expect(await (await get("/free/1")).json()).toBe("b");
    await b.close();
  });

  it("an engine-held route (engine::register_trigger) is not taken by a worker", async () => {
    const a = await RawWorker.connect("default");
    const b = await RawWorker.connect("default");
    a.fn("held::a", () => ({ body: "engine-held" }));
    b.fn("held::b", () => ({ body: "b" }));
    await a.settle();
    const made = await a.call("engine::register_trigger", {
      trigger_type: "http",
      function_id: "held::a",
      config: { api_path: "/held/:id" },
    });
    expect(made.error).toBeUndefined();
    const id = b.trigger("http", "held::b", { api_path: "/held/:other" });
    await b.settle();
    expect(b.registrationErrors(id)[0]?.code).toBe("forbidden");
    expect(await (await get("/held/1")).json()).toBe("engine-held");
    // Engine-held bindings of one principal (here the open engine's "anonymous") replace each other as before.
    const replaced = await b.call("engine::register_trigger", {
      trigger_type: "http",
      function_id: "held::b",
      config: { api_path: "/held/:id" },
    });
    expect(replaced.error).toBeUndefined();
    expect(await (await get("/held/1")).json()).toBe("b");
    for (const r of [made, replaced]) await b.call("engine::unregister_trigger", { id: (r.result as { id: string }).id });
    await a.close();
    await b.close();
  });
});

describe("http trigger path params", () => {
  it("refuses params that decode to a separator, a dot segment or NUL with 400, before the function", async () => {
    const w = await RawWorker.connect("default");
    const seen: unknown[] = [];
    w.fn("files::get", (req) => {
      seen.push((req as { path_params: unknown }).path_params);
      return { body: (req as { path_params: unknown }).path_params };
    });
    w.fn("files::mw", () => {
      seen.push("middleware");
      return { action: "continue" };
    });
    w.trigger("http", "files::get", { api_path: "/files/:name", middleware_function_ids: ["files::mw"] });
    await w.settle();
    for (const bad of ["..%2F..%2Fetc%2Fpasswd", "a%2Fb", "..%5Cwin", "a%5Cb", "a%00b", "%2F", "%2F..%2F"]) {
      const res = await get(`/files/${bad}`);
      expect(res.status, bad).toBe(400);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("invalid_arguments");
    }
    // `%2e%2e` is a dot segment to the URL parser already: the path is resolved before routing.
    await get("/files/%2e%2e");
    await get("/files/.%2E");
    expect(seen).toEqual([]);
    const ok = await get("/files/my%20report.pdf");
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ name: "my report.pdf" });
    await w.close();
  });
});

describe("request body bound", () => {
  it("answers a chunked 64 MiB body with 413 after reading little more than the bound", async () => {
    const w = await RawWorker.connect("default");
    let called = 0;
    w.fn("big::upload", () => {
      called++;
      return {};
    });
    w.trigger("http", "big::upload", { api_path: "/big/upload", http_method: "POST" });
    await w.settle();
    const TOTAL = 64 * 1024 * 1024;
    const CHUNK = 64 * 1024;
    let pulled = 0;
    let cancelled = false;
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        if (pulled >= TOTAL) return c.close();
        pulled += CHUNK;
        c.enqueue(new Uint8Array(CHUNK));
      },
      cancel() {
        cancelled = true;
      },
    });
    const res = await get("/big/upload", { method: "POST", body, headers: { "content-type": "application/octet-stream" } });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("value_too_large");
    expect(pulled).toBeLessThan(MAX_BODY * 4);
    expect(cancelled || pulled < TOTAL).toBe(true);
    expect(called).toBe(0);

    // At the bound exactly, the body goes through.
    w.fn("big::size", (req) => ({ body: { size: String((req as { headers: Record<string, string> }).headers["x-size"]) } }));
    w.trigger("http", "big::size", { api_path: "/big/size", http_method: "POST" });
    await w.settle();
    const exact = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < MAX_BODY / CHUNK; i++) c.enqueue(new Uint8Array(CHUNK));
        c.close();
      },
    });
    const fits = await get("/big/size", { method: "POST", body: exact, headers: { "x-size": "exact" } });
    expect(fits.status).toBe(200);
    await w.close();
  });
});
