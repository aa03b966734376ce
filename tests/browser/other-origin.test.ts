// The browser SDK from a web developer's own app: a page served by another origin (a plain HTTP
// server on another port, as a Vite dev server would be) imports the bundle from the engine
// (`http://127.0.0.1:<port>/sdk/sdk-browser.js`, a CORS request) and registers a function that Node
// then calls. The open engine serves that page only because ALLOWED_ORIGINS names its origin; a page
// of an origin not listed loads the same bundle but cannot connect.
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "@iii-edge/test-support/chromium";
import { freePort, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { until } from "@iii-edge/test-support/wait";

let engine: EngineServer;
let ctx: BrowserContext;
let app: http.Server;
let appPort: number;
let otherPort: number;

/** The app's page: what a ten-line Vite quickstart does, written out without a bundler. */
const page = (enginePort: number, name: string) => `<!doctype html><meta charset="utf-8"><title>my app</title>
<script type="module">
  import { registerWorker } from "http://127.0.0.1:${enginePort}/sdk/sdk-browser.js";
  const iii = registerWorker("ws://127.0.0.1:${enginePort}/", { workerName: "${name}", reconnectionConfig: { initialDelayMs: 100 } });
  iii.registerFunction("${name}::hello", ({ who }) => ({ greeting: "hello " + who + " from " + location.origin }));
  window.states = [];
  iii.addConnectionStateListener((s) => window.states.push(s));
  // A bare socket beside the SDK: a browser hides why a handshake failed, but not that it did.
  const probe = new WebSocket("ws://127.0.0.1:${enginePort}/");
  probe.onopen = () => { window.probe = "open"; probe.close(); };
  probe.onclose = () => { window.probe ??= "refused"; };
  window.loaded = true;
</script>`;

beforeAll(async () => {
  appPort = await freePort();
  otherPort = await freePort();
  // Chromium starts while the engine boots (each start is seconds on a loaded machine).
  await Promise.all([
    startEngine({ env: { ALLOWED_ORIGINS: `http://127.0.0.1:${appPort}` } }).then((e) => (engine = e)),
    launchChromium().then((c) => (ctx = c)),
  ]);
  app = http.createServer((req, res) => {
    const name = new URL(req.url ?? "/", "http://x").searchParams.get("name") ?? "app";
    res.writeHead(200, { "content-type": "text/html" }).end(page(engine.port, name));
  });
  await new Promise<void>((r) => app.listen(appPort, "127.0.0.1", () => r()));
}, 120_000);
afterAll(async () => {
  await ctx?.close();
  app?.closeAllConnections();
  await new Promise<void>((r) => (app ? app.close(() => r()) : r()));
  await engine?.stop();
});

const inPage = <T>(p: Page, expr: string) => p.evaluate(expr) as Promise<T>;

async function invoke(
  function_id: string,
  payload: unknown,
): Promise<{ status: number; body: { result?: unknown; error?: { code: string } } }> {
  const res = await fetch(`${engine.url}/_iii/invoke`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ function_id, payload }),
  });
  return { status: res.status, body: (await res.json()) as { result?: unknown; error?: { code: string } } };
}

describe("the browser SDK on another origin", () => {
  it("the bundle carries CORS; a listed origin's page becomes a worker Node can call", async () => {
    const head = await fetch(`${engine.url}/sdk/sdk-browser.js`, { headers: { Origin: `http://127.0.0.1:${appPort}` } });
    expect(head.status).toBe(200);
    expect(head.headers.get("access-control-allow-origin")).toBe("*");

    const p = await ctx.newPage();
    await p.goto(`http://127.0.0.1:${appPort}/?name=myapp`);
    await until(() => inPage<boolean>(p, "window.loaded === true"), "the page imported the SDK from the engine", 20_000);
    await until(() => inPage<boolean>(p, "window.states.includes('connected')"), "the page connected", 20_000);
    expect(await until(() => inPage<string | null>(p, "window.probe ?? null"), "the bare socket's fate", 20_000)).toBe("open");
    const r = await until(
      async () => {
        const out = await invoke("myapp::hello", { who: "node" });
        return out.status === 200 ? out : undefined;
      },
      "myapp::hello answered",
      20_000,
    );
    expect(r.body.result).toEqual({ greeting: `hello node from http://127.0.0.1:${appPort}` });
    await p.close();
  });

  it("a page of an origin not listed loads the bundle but cannot connect, and registers nothing", async () => {
    const other = http.createServer((_req, res) => res.writeHead(200, { "content-type": "text/html" }).end(page(engine.port, "intruder")));
    await new Promise<void>((r) => other.listen(otherPort, "127.0.0.1", () => r()));
    try {
      const p = await ctx.newPage();
      await p.goto(`http://127.0.0.1:${(other.address() as AddressInfo).port}/`);
      await until(() => inPage<boolean>(p, "window.loaded === true"), "the page imported the SDK", 20_000);
      // Give it several reconnect attempts (100 ms apart): none gets through.
      expect(await until(() => inPage<string | null>(p, "window.probe ?? null"), "the bare socket's fate", 20_000)).toBe("refused");
      expect(await inPage<string[]>(p, "window.states")).not.toContain("connected");
      expect((await invoke("intruder::hello", { who: "node" })).body.error?.code).toBe("function_not_found");
      await p.close();
    } finally {
      // Chromium keeps its connection alive: close it too, or close() waits for it.
      other.closeAllConnections();
      await new Promise<void>((r) => other.close(() => r()));
    }
  });
});
