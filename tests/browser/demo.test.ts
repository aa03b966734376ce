// The demo app a new user sees at `npm start`, in real Chromium: the tab connects as a worker,
// the catalog and the workers list are pushed to it, its own function answers a curl-style call,
// and the call form reaches any function. The engine runs with auth on: the page gets its token in
// its URL's fragment (`/#token=…`), HTTP calls carry a Bearer header.
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { bearer, startSecureEngine, token } from "../support/auth.ts";
import { launchChromium } from "../support/chromium.ts";
import type { EngineServer } from "../support/engine-server.ts";

let engine: EngineServer;
let ctx: BrowserContext;
let page: Page;
let demoUrl: string;

/** POST /_iii/invoke as curl with a token would. */
const invoke = async (body: unknown) => fetch(`${engine.url}/_iii/invoke`, { method: "POST", headers: bearer(await token("curl")), body: JSON.stringify(body) });

beforeAll(async () => {
  engine = await startSecureEngine();
  demoUrl = `${engine.url}/#token=${await token("demo-tab")}`;
  ctx = await launchChromium();
  page = await ctx.newPage();
  await page.goto(demoUrl);
  await page.waitForSelector('#status[data-state="connected"]', { timeout: 30_000 });
});
afterAll(async () => {
  await ctx?.close();
  await engine?.stop();
});

it("lists the catalog and this tab among the workers", async () => {
  await page.waitForSelector("#functions li", { timeout: 10_000 });
  const functions = await page.locator("#functions").textContent();
  expect(functions).toContain("edge::hello"); // a Worker-hosted function, pushed with the catalog
  const tabFn = (await page.locator("#tab-fn").textContent())!;
  expect(functions).toContain(tabFn);
  await page.waitForSelector("#workers li", { timeout: 10_000 });
  expect(await page.locator("#workers").textContent()).toContain("this tab");
});

it("the tab's own function answers a call made over HTTP, and the page counts it", async () => {
  const tabFn = (await page.locator("#tab-fn").textContent())!;
  const res = await invoke({ function_id: tabFn, payload: { name: "curl" } });
  expect(res.status).toBe(200);
  expect(((await res.json()) as { result: { greeting: string } }).result.greeting).toMatch(/^Hello, curl, from tab-/);
  await page.waitForFunction(() => document.getElementById("invoked")?.textContent === "1");
  // zod-typed: a bad payload is refused before the handler runs.
  const bad = await invoke({ function_id: tabFn, payload: { name: 7 } });
  expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("invalid_input");
  expect(await page.locator("#invoked").textContent()).toBe("1");
});

it("a function appearing elsewhere shows up in the catalog without a reload", async () => {
  const res = await invoke({ function_id: "state::set", payload: { scope: "demo", key: "k", value: 1 } });
  expect(res.status).toBe(200);
  const other = await ctx.newPage();
  await other.goto(demoUrl);
  await other.waitForSelector('#status[data-state="connected"]', { timeout: 30_000 });
  const otherFn = (await other.locator("#tab-fn").textContent())!;
  await page.waitForFunction((id) => document.getElementById("functions")?.textContent?.includes(id), otherFn, { timeout: 10_000 });
  await other.close();
});

it("the call form calls a function and shows its result", async () => {
  await page.fill("#call-fn", "state::get");
  await page.fill("#call-payload", '{"scope":"demo","key":"k"}');
  await page.click('#call-form button[type="submit"]');
  await page.waitForFunction(() => document.getElementById("call-result")?.dataset.kind === "ok");
  expect(await page.locator("#call-result").textContent()).toMatch(/^ok in [\d.]+ ms\n1$/);
});

it("the page's own requests to /_iii/* carry its token; the engine refuses them without it", async () => {
  const call = (fn: string) =>
    page.evaluate(`${fn}("/_iii/invoke", { method: "POST", body: JSON.stringify({ function_id: "state::get", payload: { scope: "demo", key: "k" } }) }).then(async (r) => ({ status: r.status, body: await r.json() }))`);
  expect(await call("window.iiiFetch")).toEqual({ status: 200, body: { result: 1 } });
  expect(await call("fetch")).toMatchObject({ status: 401, body: { error: { code: "unauthorized" } } });
});
