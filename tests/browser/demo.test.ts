// The console a new user sees at `npm start`, in real Chromium: the tab connects as a worker, the
// catalog and the workers list are pushed to it, its own function answers a curl-style call, and
// the catalog's generated form reaches any function. The engine runs with auth on and the page is
// opened with a token minted by script in its URL's fragment (`/#token=…`, the other way in
// besides the `/_console/token` route console.test.ts uses); HTTP calls carry a Bearer header.
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import { launchChromium } from "@iii-edge/test-support/chromium";
import type { EngineServer } from "@iii-edge/test-support/engine-server";

let engine: EngineServer;
let ctx: BrowserContext;
/** A second browser, for the client that is not on loopback (its own profile and headers). */
let remote: BrowserContext;
let page: Page;
let demoUrl: string;
let greet: string;
/** The console credential of a deployed engine (a Worker secret there; a var here). */
const CONSOLE_CREDENTIAL = "console-credential-for-the-demo-suite";

/** POST /_iii/invoke as curl with a token would. */
const invoke = async (body: unknown) =>
  fetch(`${engine.url}/_iii/invoke`, { method: "POST", headers: bearer(await token("curl")), body: JSON.stringify(body) });
const go = (route: string) => page.evaluate(`location.hash = ${JSON.stringify(route)}`);

beforeAll(async () => {
  // Both browsers start while the engine boots (each start is seconds on a loaded machine).
  await Promise.all([
    startSecureEngine({ CONSOLE_CREDENTIAL }).then((e) => (engine = e)),
    launchChromium().then((c) => (ctx = c)),
    launchChromium().then((c) => (remote = c)),
  ]);
  demoUrl = `${engine.url}/#token=${await token("demo-tab")}`;
  page = await ctx.newPage();
  await page.goto(demoUrl);
  await page.waitForSelector('#status[data-state="connected"]', { timeout: 30_000 });
  greet = `${await page.evaluate("window.iiiConsole.conn.workerName")}::greet`;
});
afterAll(async () => {
  await Promise.allSettled([ctx?.close(), remote?.close()]);
  await engine?.stop();
});

it("takes the token out of the address bar, lists the catalog and this tab among the workers", async () => {
  expect(page.url()).not.toContain("token=");
  await page.waitForSelector("#functions li", { timeout: 10_000 });
  const functions = await page.locator("#functions").textContent();
  expect(functions).toContain("edge::hello"); // a Worker-hosted function, pushed with the catalog
  expect(functions).toContain(greet);
  await page.waitForSelector("#workers tbody tr", { timeout: 10_000 });
  expect(await page.locator("#workers").textContent()).toContain("this tab");
});

it("the tab's own function answers a call made over HTTP, and the page counts it", async () => {
  await go("/tab");
  await page.waitForSelector("#tab-worker-name");
  const res = await invoke({ function_id: greet, payload: { name: "curl" } });
  expect(res.status).toBe(200);
  expect(((await res.json()) as { result: { greeting: string } }).result.greeting).toMatch(/^Hello, curl, from console-/);
  await page.waitForFunction(() => document.getElementById("invoked")?.textContent === "1");
  // Checked against its schema: a bad payload is refused before the handler runs, and logged.
  const bad = await invoke({ function_id: greet, payload: { name: 7 } });
  expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("invalid_input");
  await page.waitForFunction(() => document.querySelector("#call-log tbody tr")?.textContent?.includes("error"));
  // An HTTP caller has no worker id: the log says so.
  expect(await page.locator("#call-log .caller").first().getAttribute("data-caller")).toBe("");
});

it("a function appearing elsewhere shows up in the catalog without a reload", async () => {
  await go("/catalog");
  const other = await ctx.newPage();
  await other.goto(demoUrl);
  await other.waitForSelector('#status[data-state="connected"]', { timeout: 30_000 });
  const otherFn = `${await other.evaluate("window.iiiConsole.conn.workerName")}::greet`;
  await page.waitForSelector(`#functions li[data-function="${otherFn}"]`, { timeout: 10_000 });
  await other.close();
  await page.waitForSelector(`#functions li[data-function="${otherFn}"]`, { state: "detached", timeout: 10_000 });
});

it("the generated form calls a function and shows its result and time taken", async () => {
  expect((await invoke({ function_id: "state::set", payload: { scope: "demo", key: "k", value: 1 } })).status).toBe(200);
  await go("/catalog?fn=state::get");
  await page.waitForSelector('#call-form [data-path="scope"]', { timeout: 10_000 });
  await page.fill('#call-form [data-path="scope"]', "demo");
  await page.fill('#call-form [data-path="key"]', "k");
  await page.click('#call-form button[type="submit"]');
  await page.waitForSelector('#call-result[data-kind="ok"]');
  expect(await page.locator("#call-time").textContent()).toMatch(/^ok in [\d.]+ ms$/);
  expect(await page.locator("#call-value").textContent()).toBe("1");
  // The JSON view edits the same payload.
  await page.click('#call-form .segmented button:has-text("JSON")');
  expect(JSON.parse(await page.locator("#call-form textarea").inputValue())).toEqual({ scope: "demo", key: "k" });
});

it("the page's own requests to /_iii/* carry its token; the engine refuses them without it", async () => {
  const call = (fn: string) =>
    page.evaluate(
      `${fn}("/_iii/invoke", { method: "POST", body: JSON.stringify({ function_id: "state::get", payload: { scope: "demo", key: "k" } }) }).then(async (r) => ({ status: r.status, body: await r.json() }))`,
    );
  expect(await call("window.iiiFetch")).toEqual({ status: 200, body: { result: 1 } });
  expect(await call("fetch")).toMatchObject({ status: 401, body: { error: { code: "unauthorized" } } });
});

it("a refused token is said so, not shown as 'connecting' forever", async () => {
  const forged = await ctx.newPage();
  const good = await token("demo-tab");
  await forged.goto(`${engine.url}/#token=${good.slice(0, -4)}AAAA`);
  await forged.waitForSelector('#status[data-status="refused"]', { timeout: 15_000 });
  expect(await forged.locator("#status").textContent()).toBe("token refused");
  expect(await forged.locator("#stale").textContent()).toMatch(
    /^The engine refused this console's token.*token signature or claims invalid/,
  );
  await forged.close();
});

it("deployed (a client that is not on loopback): the page asks for the console credential, then connects", async () => {
  // The engine Worker reads the client's address from cf-connecting-ip, as on Cloudflare.
  try {
    await remote.setExtraHTTPHeaders({ "cf-connecting-ip": "203.0.113.9" });
    const p = await remote.newPage();
    await p.goto(`${engine.url}/`);
    await p.waitForSelector('#status[data-status="refused"]', { timeout: 15_000 });
    expect(await p.locator("#stale").textContent()).toContain("sign in with the console credential");
    await p.fill('#stale input[type="password"]', "not it");
    await p.click('#stale button[type="submit"]');
    await p.waitForFunction(() => document.getElementById("stale")?.textContent?.includes("wrong console credential"));
    // The page goes on probing the engine (every 2 s) while it is refused: a probe's own answer
    // ("sign in with the console credential") must not replace what the attempt was told. A probe
    // has run to its end once the one after it asks for /healthz.
    await p.waitForResponse((r) => r.url().endsWith("/_console/token"), { timeout: 15_000 });
    await p.waitForRequest((r) => r.url().endsWith("/healthz"), { timeout: 15_000 });
    expect(await p.locator("#stale").textContent()).toContain("wrong console credential");
    await p.fill('#stale input[type="password"]', CONSOLE_CREDENTIAL);
    await p.click('#stale button[type="submit"]');
    await p.waitForSelector('#status[data-status="open"]', { timeout: 30_000 });
    // Its token is the console's narrow one: it may call, and its own functions are registered.
    expect(await p.evaluate("window.iii.trigger({ function_id: 'state::get', payload: { scope: 'demo', key: 'k' } })")).toBe(1);
    expect(await p.evaluate("sessionStorage.getItem('iii-console-credential')")).toBe(CONSOLE_CREDENTIAL);
  } finally {
    await remote.close();
  }
});
