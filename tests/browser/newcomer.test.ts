// A newcomer's first hour, in real Chromium against `npm start`:
// - a tab pointed at a path with no WebSocket endpoint goes `failed` with the engine's message
//   (a browser cannot read a refused handshake: the engine closes with 4404 and a reason instead),
//   and does not retry;
// - the console, during an engine outage, keeps the last catalog, workers and result on screen but
//   marks them stale (since when), says the engine is unreachable, reconnects by itself and clears
//   the marks once fresh data arrives.
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "@iii-edge/test-support/chromium";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { until } from "@iii-edge/test-support/wait";

let engine: EngineServer;
let ctx: BrowserContext;

beforeAll(async () => {
  // Chromium starts while the engine boots (each start is seconds on a loaded machine).
  await Promise.all([startEngine().then((e) => (engine = e)), launchChromium().then((c) => (ctx = c))]);
});
afterAll(async () => {
  await ctx?.close();
  await engine?.stop();
});

// toolchain P5: vitest rewrites code inside page.evaluate(fn); pass strings.
const inPage = <T>(page: Page, expr: string) => page.evaluate(expr) as Promise<T>;

describe("sdk-browser at a wrong URL", () => {
  it("goes failed with the engine's message naming the paths to dial, fails calls at once, and stops", async () => {
    const page = await ctx.newPage();
    await page.goto(`${engine.url}/test-tab.html?engine=/wrong&name=tab-wrong&retryMs=100`);
    await until(async () => (await page.locator("#status").textContent()) === "failed", "tab failed", 10_000);
    const error = await inPage<{ code: string; message: string }>(
      page,
      "({ code: window.iii.connectionError.code, message: window.iii.connectionError.message })",
    );
    expect(error.code).toBe("not_found");
    expect(error.message).toContain(
      `no WebSocket endpoint at /wrong: a worker dials ${engine.wsUrl}/ (namespace "default") or ${engine.wsUrl}/ns/<namespace>`,
    );
    const call = await inPage<{ code: string; ms: number }>(
      page,
      `(async () => { const t = performance.now(); try { await window.iii.trigger({ function_id: "engine::functions::list", payload: {} }); return { code: "resolved", ms: 0 }; } catch (e) { return { code: e.code, ms: performance.now() - t }; } })()`,
    );
    expect(call.code).toBe("not_found");
    expect(call.ms).toBeLessThan(100);
    // Never shown as connected, and no retry after it failed (retryMs=100 would have shown many).
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await inPage<string[]>(page, "window.iiiTest.states")).toEqual(["failed"]);
    await page.close();
  });
});

describe("the console during an outage", () => {
  it("marks the catalog, the workers and the last result stale, says the engine is unreachable, and recovers by itself", async () => {
    const page = await ctx.newPage();
    await page.goto(`${engine.url}/#/catalog?fn=engine::functions::list`);
    await page.waitForSelector('#status[data-state="connected"]', { timeout: 30_000 });
    await page.waitForSelector("#functions li", { timeout: 10_000 });
    await page.waitForSelector("#workers tbody tr", { timeout: 10_000 });
    await page.waitForSelector('#call-form button[type="submit"]');
    await page.click('#call-form button[type="submit"]');
    await page.waitForSelector('#call-result[data-kind="ok"]');
    const stale = () =>
      inPage<{ functions?: string; workers?: string; result?: string; banner: boolean; text: string; status: string }>(
        page,
        `({ functions: document.getElementById("functions-panel").dataset.stale, workers: document.getElementById("workers-panel").dataset.stale, result: document.getElementById("call-result").dataset.stale, banner: !!document.getElementById("stale"), text: document.getElementById("stale")?.textContent ?? "", status: document.getElementById("status").dataset.status })`,
      );
    expect(await stale()).toMatchObject({ functions: undefined, workers: undefined, result: undefined, banner: false, status: "open" });

    await engine.stop();
    // The page asks /healthz why it lost the link, and says so.
    await until(async () => (await stale()).status === "unreachable", "the page calls the engine unreachable", 15_000);
    const during = await stale();
    expect(during).toMatchObject({ functions: "true", workers: "true", result: "true", banner: true });
    expect(during.text).toMatch(
      /^Engine unreachable.*Lost at .+: what is shown below is from before then, marked stale\. The page reconnects by itself\.$/,
    );
    // Still on screen, just marked: the last known catalog is worth seeing.
    expect(await page.locator("#functions li").count()).toBeGreaterThan(0);
    expect(await page.locator("#functions-panel .stale-tag").isVisible()).toBe(true);
    expect(await page.locator("#status").textContent()).toBe("engine unreachable");

    await engine.restart();
    await page.waitForSelector('#status[data-state="connected"]', { timeout: 60_000 });
    await until(
      async () => {
        const s = await stale();
        return !s.banner && !s.functions && !s.workers;
      },
      "fresh lists after the reconnect",
      15_000,
    );
    // The result is still the one from before the outage: it stays marked until the next call.
    expect((await stale()).result).toBe("true");
    await page.click('#call-form button[type="submit"]');
    await page.waitForFunction(
      () => document.getElementById("call-result")?.dataset.kind === "ok" && !document.getElementById("call-result")?.dataset.stale,
    );
    await page.close();
  }, 180_000);
});
