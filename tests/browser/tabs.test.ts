// Tabs as workers, in real Chromium, against the real engine (`npm start` on a free port):
// a page registers functions; Node workers (sdk-edge and the official iii-sdk) invoke them
// through the engine; the tab survives an engine restart without a reload; calls made offline
// are delivered once after reconnect and after a reload; a Worker-hosted function is invoked
// from iii-sdk and from the tab, and calls the tab back. The engine runs with auth on: every client
// presents a token (Node: a Bearer header; the tab: `#token=` in its URL, offered as the WebSocket
// subprotocol), and a tab without one, or with one for another namespace, is refused.
import type { BrowserContext, Page } from "playwright-core";
import { registerWorker as iiiSdkWorker, TriggerAction as IIITriggerAction, type IIIClient } from "iii-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerWorker, TriggerAction, type EdgeClient } from "@iii-edge/sdk-edge/node";
import { bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import { launchChromium } from "@iii-edge/test-support/chromium";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { until } from "@iii-edge/test-support/wait";

let engine: EngineServer;
let ctx: BrowserContext;
let page: Page;
let node: EdgeClient;
let iii: IIIClient;
const recorded: unknown[] = [];
let tabToken: string;

const tabStatus = () => page.locator("#status").textContent();
// toolchain P5: vitest rewrites code inside page.evaluate(fn); pass strings.
const inTab = <T>(expr: string) => page.evaluate(expr) as Promise<T>;

async function openTab(): Promise<void> {
  const url = `${engine.url}/test-tab.html?name=tab-a&retryMs=250#token=${tabToken}`;
  // To the same URL (fragment included) goto would only scroll to the fragment: reload instead.
  if (page.url() === url) await page.reload();
  else await page.goto(url);
  await until(async () => (await tabStatus()) === "connected", "tab connected", 20_000);
}

beforeAll(async () => {
  // Chromium starts while the engine boots: neither needs the other until the tab opens.
  await Promise.all([startSecureEngine().then((e) => (engine = e)), launchChromium().then((c) => (ctx = c))]);
  tabToken = await token("tab-a");
  page = ctx.pages()[0] ?? (await ctx.newPage());
  page.on("pageerror", (e) => console.error("[tab] pageerror", e));
  node = registerWorker(`${engine.wsUrl}/`, {
    workerName: "node-e2e",
    headers: bearer(await token("node-e2e")),
    reconnectionConfig: { initialDelayMs: 250, maxDelayMs: 1_000 },
    logger: { warn: () => {}, error: () => {} },
  });
  node.registerFunction("node::record", (data) => {
    recorded.push(data);
    return { recorded: recorded.length };
  });
  // OTel off: iii-sdk's /otel socket sends no headers and would be refused (401) over and over.
  iii = iiiSdkWorker(`${engine.wsUrl}/`, {
    workerName: "iii-sdk-e2e",
    enableMetricsReporting: false,
    otel: { enabled: false },
    headers: bearer(await token("iii-sdk-e2e")),
    reconnectionConfig: { initialDelayMs: 250, maxDelayMs: 1_000 },
  });
  await openTab();
});

afterAll(async () => {
  await ctx?.close();
  await node?.shutdown();
  await iii?.shutdown();
  await engine?.stop();
});

describe("a tab as a worker", () => {
  it("is invoked by a Node worker through the engine (plain and zod-typed functions)", async () => {
    const echo = await until(
      () => node.trigger<unknown, { echoed: unknown; from: string }>({ function_id: "tab::echo", payload: { hi: 1 } }),
      "tab::echo callable",
      10_000,
    );
    expect(echo.from).toBe("tab-a");
    expect(echo.echoed).toMatchObject({ hi: 1 });
    await expect(node.trigger({ function_id: "tab::add", payload: { a: 2, b: 40 } })).resolves.toEqual({ sum: 42 });
    const bad = await node.trigger({ function_id: "tab::add", payload: { a: "2" } }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(bad).toMatchObject({ code: "invalid_input" });
    expect(String((bad as Error).message)).toMatch(/number/);
  });

  it("is invoked by an unmodified iii-sdk worker and publishes its JSON Schema", async () => {
    await expect(iii.trigger({ function_id: "tab::add", payload: { a: 1, b: 2 } })).resolves.toEqual({ sum: 3 });
    const info = await node.trigger<unknown, unknown>({ function_id: "engine::functions::list", payload: {} });
    const text = JSON.stringify(info);
    expect(text).toContain("tab::add");
  });

  it("calls any function from the tab", async () => {
    const r = await inTab<{ recorded: number }>(`window.iii.trigger({ function_id: "node::record", payload: { from: "tab" } })`);
    expect(r.recorded).toBeGreaterThan(0);
  });
});

describe("Worker-hosted functions", () => {
  it("edge::hello is invoked from iii-sdk and from the tab", async () => {
    await expect(iii.trigger({ function_id: "edge::hello", payload: { name: "iii" } })).resolves.toEqual({
      greeting: "Hello, iii! (from a Worker)",
    });
    await expect(inTab(`window.iii.trigger({ function_id: "edge::hello", payload: { name: "tab" } })`)).resolves.toEqual({
      greeting: "Hello, tab! (from a Worker)",
    });
    const bad = await iii.trigger({ function_id: "edge::hello", payload: { name: 5 } }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(bad).toMatchObject({ code: "invalid_input" });
  });

  it("a Worker calls the tab's function through the engine", async () => {
    const before = Number(await page.locator("#count").textContent());
    const r = await node.trigger({ function_id: "edge::call-tab", payload: { function_id: "tab::add", payload: { a: 20, b: 22 } } });
    expect(r).toEqual({ function_id: "tab::add", result: { sum: 42 } });
    expect(Number(await page.locator("#count").textContent())).toBe(before + 1);
  });
});

describe("auth", () => {
  /** Upgrades a refused tab must have tried (and been refused) before it is judged. */
  const REFUSED_ATTEMPTS = 3;
  const workerNames = async () =>
    (await node.trigger<unknown, { workers: { name: string }[] }>({ function_id: "engine::workers::list", payload: {} })).workers.map(
      (w) => w.name,
    );
  /** A second tab on test-tab.html; the console lines Chromium logs about its sockets. */
  async function otherTab(query: string, fragment: string) {
    const p = await ctx.newPage();
    const consoleLines: string[] = [];
    p.on("console", (m) => consoleLines.push(m.text()));
    await p.goto(`${engine.url}/test-tab.html?${query}&retryMs=250${fragment}`);
    return {
      p,
      consoleLines,
      /** Waits until Chromium has logged `n` refused upgrades carrying `text` (one line per attempt). */
      refusals: (text: string, n: number) =>
        until(() => consoleLines.filter((l) => l.includes(text)).length >= n, `${n} refused upgrades (${text})`, 20_000),
      states: () => p.evaluate("window.iiiTest.states") as Promise<string[]>,
      status: () => p.locator("#status").textContent(),
    };
  }

  it("a tab without a token, or with a bad one, is refused: never connected, not in the catalog", async () => {
    const tabs = [await otherTab("name=tab-anon", ""), await otherTab("name=tab-forged", `#token=${tabToken.slice(0, -4)}AAAA`)];
    try {
      // Several 250 ms retries, each refused at the upgrade (401): counted, not waited out.
      await Promise.all(tabs.map((t) => t.refusals("HTTP Authentication failed", REFUSED_ATTEMPTS)));
      for (const t of tabs) {
        expect(await t.states()).not.toContain("connected");
        expect(await t.status()).toBe("connecting");
        // Chromium's words for a 401 answer to the upgrade.
        expect(t.consoleLines.some((l) => l.includes("HTTP Authentication failed"))).toBe(true);
      }
      const names = await workerNames();
      expect(names).not.toContain("tab-anon");
      expect(names).not.toContain("tab-forged");
      expect(names).toContain("tab-a"); // the tab with a token is there all along
    } finally {
      for (const t of tabs) await t.p.close();
    }
  });

  it("a tab whose token is restricted to namespace 'other' cannot connect to the default one (but can to 'other')", async () => {
    const other = await token("tab", { ns: ["other"] });
    const refused = await otherTab("name=tab-ns", `#token=${other}`);
    const allowed = await otherTab("name=tab-ns-other&engine=/ns/other", `#token=${other}`);
    try {
      await until(async () => (await allowed.status()) === "connected", "the tab in namespace other", 20_000);
      await refused.refusals("Unexpected response code: 403", REFUSED_ATTEMPTS);
      expect(await refused.states()).not.toContain("connected");
      expect(refused.consoleLines.some((l) => l.includes("Unexpected response code: 403"))).toBe(true);
      expect(await workerNames()).not.toContain("tab-ns");
    } finally {
      await refused.p.close();
      await allowed.p.close();
    }
  });
});

describe("resilience", () => {
  // The offline calls target the engine's built-in state::update (present the moment the engine
  // is up, unlike a worker that is itself reconnecting) with an increment: a duplicate delivery
  // would show as 2.
  const bump = (key: string, action: string) =>
    `window.iii.trigger({ function_id: "state::update", payload: { scope: "outbox-test", key: "${key}", ops: [{ type: "increment", path: "n", by: 1 }] }, action: ${action} })`;
  const counter = async (key: string) => {
    const v = await node.trigger<unknown, { n?: number } | null | undefined>({
      function_id: "state::get",
      payload: { scope: "outbox-test", key },
    });
    return v?.n ?? 0;
  };

  // An engine restart costs 10–20 s on a loaded machine, so the offline case's restart is also the
  // one the case after it checks the tab survived: the page is marked before the engine stops.
  let marker = "";

  it("delivers void and enqueue calls made offline exactly once after reconnect", async () => {
    marker = await inTab<string>(`(window.__marker = "${Date.now()}")`);
    await engine.stop();
    await until(async () => (await tabStatus()) === "reconnecting", "tab noticed the drop", 10_000);
    await inTab(bump("void-1", `{ type: "void" }`));
    await inTab(`window.__receipt = ${bump("enqueue-1", `{ type: "enqueue", queue: "default" }`)}; 0`);
    await until(() => inTab<number>("window.iii.outbox.size()").then((n) => n === 2), "two calls in the outbox", 5_000);
    await engine.restart();
    await until(async () => (await tabStatus()) === "connected", "tab reconnected", 30_000);
    const receipt = await inTab<{ messageReceiptId: string }>("window.__receipt");
    expect(receipt.messageReceiptId).toEqual(expect.any(String));
    await until(async () => (await counter("void-1")) >= 1 && (await counter("enqueue-1")) >= 1, "both offline calls delivered", 20_000);
    await new Promise((r) => setTimeout(r, 2_000)); // would a duplicate arrive?
    expect(await counter("void-1")).toBe(1);
    expect(await counter("enqueue-1")).toBe(1);
    expect(await inTab<number>("window.iii.outbox.size()")).toBe(0);
  });

  it("survives an engine restart: the tab's functions come back without a reload", async () => {
    expect(marker, "the offline case marked the page before it stopped and restarted the engine").not.toBe("");
    await until(async () => (await tabStatus()) === "connected", "tab reconnected", 30_000);
    await expect(
      until(() => node.trigger({ function_id: "tab::add", payload: { a: 5, b: 6 } }), "tab::add after restart", 20_000),
    ).resolves.toEqual({ sum: 11 });
    expect(await inTab<string>("window.__marker")).toBe(marker); // same page, no reload
  });

  it("keeps offline calls across a reload and delivers them once from the reloaded tab", async () => {
    await engine.stop();
    await until(async () => (await tabStatus()) === "reconnecting", "tab noticed the drop", 10_000);
    await inTab(bump("void-2", `{ type: "void" }`));
    // The enqueue promise is lost with the page; the outbox keeps the call.
    await inTab(`void ${bump("enqueue-2", `{ type: "enqueue", queue: "default" }`)}.catch(() => {}); 0`);
    await until(() => inTab<number>("window.iii.outbox.size()").then((n) => n === 2), "two calls in the outbox", 5_000);
    // Close this page's client so it cannot drain the outbox itself, then bring the engine back
    // and reload: the new page finds the calls in IndexedDB and sends them.
    await inTab("window.iii.shutdown()");
    await engine.restart();
    await openTab();
    await until(
      async () => (await counter("void-2")) >= 1 && (await counter("enqueue-2")) >= 1,
      "both offline calls delivered after the reload",
      20_000,
    );
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await counter("void-2")).toBe(1);
    expect(await counter("enqueue-2")).toBe(1);
    expect(await inTab<number>("window.iii.outbox.size()")).toBe(0);
  });
});

// iii-sdk's TriggerAction and ours build the same frames.
it("TriggerAction builders match iii-sdk", () => {
  expect(TriggerAction.Void()).toEqual(IIITriggerAction.Void());
  expect(TriggerAction.Enqueue({ queue: "q" })).toEqual(IIITriggerAction.Enqueue({ queue: "q" }));
});
