// The console token, attacked by a tenant: a worker allowed to register `fuzz*` and bind `http`
// serves an HTML page from a route on the engine's own origin; a person opens it (after the
// console, in the same browser) and its script asks `/_console/token` for an operator's token.
// Refused: the mint wants this run's console code (which only the URL `npm start` printed
// carries), and the engine's own page; the route's page runs sandboxed (an opaque origin), so it
// can read neither the console's stored code nor the token route's answer. The tenant cannot
// serve under the console's own paths either, and a console token calls only what the console's
// screens call. Against `npm start` with AUTH_SECRET.
import http from "node:http";
import { verifyToken } from "@iii-edge/protocol/token";
import { CONSOLE_CALLS } from "@iii-edge/demo-app/console-token";
import type { BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_AUTH_SECRET, bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import { launchChromium } from "@iii-edge/test-support/chromium";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { RawSocket, type Frame } from "@iii-edge/test-support/raw-socket";
import { until } from "@iii-edge/test-support/wait";

let engine: EngineServer;
let tenant: RawSocket;
let browser: BrowserContext | undefined;

/** The tenant's page: reads what a same-origin page could (the console's stored code), asks for a
 * console token with it, and writes down what it got. */
const ATTACK_PAGE = `<!doctype html><title>free stuff</title><body><script>
(async () => {
  const out = {};
  try { out.code = sessionStorage.getItem("iii-console-code"); } catch (e) { out.code = "denied: " + e.name; }
  try {
    const headers = out.code && !out.code.startsWith("denied") ? { "x-console-code": out.code } : {};
    const r = await fetch("/_console/token", { headers, cache: "no-store" });
    out.status = r.status;
    out.body = await r.text();
  } catch (e) { out.fetch = "failed: " + e.name; }
  document.body.setAttribute("data-done", JSON.stringify(out));
})();
</script></body>`;

function get(
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Frame }> {
  return new Promise((resolve, reject) => {
    http
      .get(`${engine.url}${path}`, { headers }, (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => {
          let body: Frame = {};
          try {
            body = JSON.parse(text) as Frame;
          } catch {
            body = { text };
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        });
      })
      .on("error", reject);
  });
}

async function bindings(): Promise<string[]> {
  const admin = await token("admin");
  const r = await fetch(`${engine.url}/_iii/invoke`, {
    method: "POST",
    headers: { ...bearer(admin), "content-type": "application/json" },
    body: JSON.stringify({ function_id: "engine::registered-triggers::list", payload: { include_internal: true } }),
  });
  const b = (await r.json()) as { result: { registered_triggers: { id: string }[] } };
  return b.result.registered_triggers.map((t) => t.id).sort();
}

beforeAll(async () => {
  engine = await startSecureEngine();
  tenant = await RawSocket.open(`${engine.wsUrl}/`, bearer(await token("tenant", { register: ["fuzz"], bind: ["http"], call: ["fuzz*"] })));
  tenant.serve("fuzz::page", () => ({ status_code: 200, headers: { "content-type": "text/html" }, body: ATTACK_PAGE }));
  tenant.send({
    type: "registertrigger",
    id: "fuzz-page",
    trigger_type: "http",
    function_id: "fuzz::page",
    config: { api_path: "fuzzpage", http_method: "GET" },
  });
  await until(async () => (await get("/fuzzpage")).status === 200, "the tenant's page");
});
afterAll(async () => {
  await browser?.close();
  await tenant?.close();
  await engine?.stop();
});

describe("a tenant's page on the engine's origin", () => {
  it("gets no console token the way a same-origin page would ask, without this run's code", async () => {
    const ownPage = { "sec-fetch-site": "same-origin", origin: engine.url };
    const noCode = await get("/_console/token", ownPage);
    expect(noCode.status).toBe(401);
    expect(noCode.body.token).toBeUndefined();
    expect(String(noCode.body.error?.message)).toMatch(/console code/);
    expect((await get("/_console/token", { ...ownPage, "x-console-code": "guessed" })).status).toBe(401);
    // The sandboxed page's real request: an opaque origin, cross-site.
    expect(
      (await get("/_console/token", { "sec-fetch-site": "cross-site", origin: "null", "x-console-code": engine.consoleCode })).status,
    ).toBe(403);
    // The control: the code is what the mint wants, and then the token is the console's narrow one.
    const ok = await get("/_console/token", { ...ownPage, "x-console-code": engine.consoleCode });
    expect(ok.status).toBe(200);
    const check = await verifyToken(TEST_AUTH_SECRET, String(ok.body.token));
    expect(check.ok && check.grant.call).toEqual([...CONSOLE_CALLS]);
  });

  it("is served sandboxed, and in a real browser (after the console was opened with the code) reads neither the code nor a token", async () => {
    const page = await get("/fuzzpage");
    expect(page.headers["content-security-policy"]).toMatch(/^sandbox /);
    expect(page.headers["content-security-policy"]).not.toMatch(/allow-same-origin/);

    browser = await launchChromium();
    const tab = await browser.newPage();
    // The person opened the console as `npm start` printed it: the code is in this tab's storage.
    await tab.goto(`${engine.url}/#code=${engine.consoleCode}`);
    await tab.waitForSelector('#status[data-status="open"]', { timeout: 30_000 });
    expect(await tab.evaluate("sessionStorage.getItem('iii-console-code')")).toBe(engine.consoleCode);
    // Then, in the same tab, the tenant's page.
    await tab.goto(`${engine.url}/fuzzpage`);
    await tab.waitForSelector("body[data-done]", { state: "attached", timeout: 15_000 });
    const out = JSON.parse((await tab.getAttribute("body", "data-done")) ?? "{}") as {
      code?: string;
      status?: number;
      body?: string;
      fetch?: string;
    };
    expect(out.code).toMatch(/^denied/);
    expect(out.body ?? "").not.toContain("token");
    expect(out.status === undefined || out.status >= 400).toBe(true);
  });

  it("cannot serve a route under the console's paths; nothing is bound", async () => {
    const before = await bindings();
    for (const api_path of ["_console/token", "_console", "assets/index.js", "sdk/sdk-browser.js", "index.html", "app.js"]) {
      const id = `fuzz-squat-${api_path.replace(/\W/g, "-")}`;
      tenant.send({
        type: "registertrigger",
        id,
        trigger_type: "http",
        function_id: "fuzz::page",
        config: { api_path, http_method: "GET" },
      });
      const refusal = await tenant.next((f) => (f.type === "triggerregistrationresult" && f.id === id) || f.type === "error");
      expect(refusal.error, api_path).toBeDefined();
    }
    expect(await bindings()).toEqual(before);
  });

  it("a console token calls only what the console's screens call", async () => {
    const ok = await get("/_console/token", { "sec-fetch-site": "same-origin", "x-console-code": engine.consoleCode });
    const consoleToken = String(ok.body.token);
    const call = (function_id: string) =>
      fetch(`${engine.url}/_iii/invoke`, {
        method: "POST",
        headers: { ...bearer(consoleToken), "content-type": "application/json" },
        body: JSON.stringify({ function_id, payload: {} }),
      });
    expect((await call("engine::functions::list")).status).toBe(200);
    for (const fn of ["fuzz::page", "models::register", "engine::register_trigger", "auth::delete_token"]) {
      const r = await call(fn);
      expect(r.status, fn).toBe(403);
    }
  });
});
