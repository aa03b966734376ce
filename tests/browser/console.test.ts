// The console (demo-app) in real Chromium against `npm start` with auth on. The page gets
// its token from the engine Worker's `/_console/token` route (loopback: no credential), as a
// person opening http://127.0.0.1:8787/ would. Two browser contexts (two people):
// - tab A's functions appear in tab B's catalog; B calls one from the form generated from its
//   schema (checked before sending) and gets A's answer; A's log names B as the caller;
// - B asks A to confirm: A's person answers in a dialog, B gets the answer;
// - a dead letter redriven from the page reaches its handler; a state value a Node worker writes
//   appears without a reload;
// - a screenshot of every screen lands in tests/browser/screenshots/ (gitignored).
import { mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerWorker, TriggerAction, type EdgeClient } from "@iii-edge/sdk-edge/node";
import { bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import { launchChromium } from "@iii-edge/test-support/chromium";
import { configuredQueues, type EngineServer } from "@iii-edge/test-support/engine-server";
import { until } from "@iii-edge/test-support/wait";

const SHOTS = path.join(path.dirname(fileURLToPath(import.meta.url)), "screenshots");
/** The queue this suite dead-letters into: durable, one attempt, no wait. */
const TEST_QUEUE = "console-e2e";

let engine: EngineServer;
let ctxA: BrowserContext;
let ctxB: BrowserContext;
let pageA: Page;
let pageB: Page;
let node: EdgeClient;
let nameA: string;
const flaky = { failing: true, handled: [] as unknown[] };

/** The engine's QUEUES plus this suite's queue (the harness queues stay as configured). */
function queuesWithTestQueue(): string {
  const queues = JSON.parse(configuredQueues()) as Record<string, unknown>;
  queues[TEST_QUEUE] = { backend: "durable", max_retries: 0, backoff_ms: 10 };
  return JSON.stringify(queues);
}

async function openConsole(ctx: BrowserContext, route: string): Promise<Page> {
  const page = await ctx.newPage();
  page.on("pageerror", (e) => console.error("[console] pageerror", e));
  // Opened as `npm start` prints the console's URL: with this run's console code.
  await page.goto(`${engine.url}/#${route}${route.includes("?") ? "&" : "?"}code=${engine.consoleCode}`);
  await page.waitForSelector('#status[data-status="open"]', { timeout: 30_000 });
  return page;
}

/** `console-<name>.png` (the agent and traces suites write their own names beside these). */
async function shot(page: Page, name: string): Promise<void> {
  await page.evaluate("window.scrollTo(0, 0)"); // the sticky header at the top of a full-page shot
  await page.screenshot({ path: path.join(SHOTS, `console-${name}.png`), fullPage: true });
}

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  // The catalog's call form reaches this suite's own functions too (CONSOLE_CALL: beyond the
  // functions the console's screens call, a console token calls only what the operator lists).
  // The browsers start while the engine boots (each start is seconds on a loaded machine).
  await Promise.all([
    startSecureEngine({ QUEUES: queuesWithTestQueue(), CONSOLE_CALL: "e2e::*,edge::*" }).then((e) => (engine = e)),
    launchChromium().then((c) => (ctxA = c)),
    launchChromium().then((c) => (ctxB = c)),
  ]);
  node = registerWorker(`${engine.wsUrl}/`, {
    workerName: "node-console-e2e",
    headers: bearer(await token("node-console-e2e")),
    logger: { warn: () => {}, error: () => {} },
  });
  node.registerFunction(
    "e2e::flaky",
    (data) => {
      if (flaky.failing) throw new Error("flaky is failing on purpose");
      flaky.handled.push(data);
      return { handled: true };
    },
    { description: "fails until the test says otherwise" },
  );
  pageA = await openConsole(ctxA, "/tab");
  nameA = (await pageA.locator("#tab-worker-name").textContent())!;
  pageB = await openConsole(ctxB, "/catalog");
});
afterAll(async () => {
  await ctxA?.close();
  await ctxB?.close();
  await node?.shutdown();
  await engine?.stop();
});

describe("two people, two tabs", () => {
  it("tab B sees tab A's function appear, calls it from the generated form and gets A's answer", async () => {
    const greet = `${nameA}::greet`;
    const link = pageB.locator(`#functions li[data-function="${greet}"] a`);
    await link.waitFor({ timeout: 15_000 });
    await link.click();
    const name = pageB.locator('#call-form input[data-path="name"]');
    await name.waitFor({ timeout: 10_000 });
    expect(await name.inputValue()).toBe(""); // the template: the required string, empty
    // Validation before sending: an empty name breaks the schema's minLength, nothing is sent.
    await pageB.click('#call-form button[type="submit"]');
    await pageB.waitForSelector("#call-problems");
    expect(await pageB.locator("#call-problems").textContent()).toContain("name must not be empty");
    expect(await pageA.locator("#invoked").textContent()).toBe("0");

    await name.fill("tab B");
    await pageB.click('#call-form button[type="submit"]');
    await pageB.waitForSelector('#call-result[data-kind="ok"]', { timeout: 10_000 });
    expect(await pageB.locator("#call-time").textContent()).toMatch(/^ok in [\d.]+ ms$/);
    expect(JSON.parse((await pageB.locator("#call-value").textContent())!)).toEqual({ greeting: `Hello, tab B, from ${nameA}` });
    // A logged it, with B's worker id as the caller.
    await pageA.waitForFunction(() => document.getElementById("invoked")?.textContent === "1");
    const idB = await pageB.evaluate("window.iii.workerId");
    expect(await pageA.locator("#call-log .caller").first().getAttribute("data-caller")).toBe(idB);
  });

  it("B asks A to confirm: the person at A answers in a dialog, B gets the answer", async () => {
    const confirm = `${nameA}::confirm`;
    await pageB.goto(`${engine.url}/#/catalog?fn=${encodeURIComponent(confirm)}`);
    const question = pageB.locator('#call-form [data-path="question"]');
    await question.waitFor({ timeout: 15_000 });
    await question.fill("Ship it?");
    await pageB.click('#call-form button[type="submit"]');
    await pageA.waitForSelector("#confirm-dialog[open]", { timeout: 10_000 });
    expect(await pageA.locator("#confirm-dialog .question").textContent()).toBe("Ship it?");
    await shot(pageA, "tab-confirm-dialog");
    await pageA.click("#confirm-yes");
    await pageB.waitForSelector('#call-result[data-kind="ok"]', { timeout: 10_000 });
    expect(JSON.parse((await pageB.locator("#call-value").textContent())!)).toMatchObject({ confirmed: true, answered_by: "person" });
    expect(await pageA.locator("#confirm-dialog[open]").count()).toBe(0);
  });

  it("A draws the chart B sends, and tells B what only A's browser knows", async () => {
    const drawn = await pageB.evaluate(
      `window.iii.trigger({ function_id: "${nameA}::chart", payload: { title: "Deploys", points: [{ label: "mon", value: 3 }, { label: "tue", value: 7 }, { label: "wed", value: 5 }] } })`,
    );
    expect(drawn).toEqual({ drawn: 3, shown_on: nameA });
    await pageA.waitForSelector("#chart svg");
    expect(await pageA.locator("#chart rect.bar").count()).toBe(3);
    const facts = (await pageB.evaluate(`window.iii.trigger({ function_id: "${nameA}::facts", payload: {} })`)) as {
      time_zone: string;
      online: boolean;
      languages: string[];
    };
    expect(facts.time_zone).toBe(await pageA.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone"));
    expect(facts.online).toBe(true);
    expect(facts.languages.length).toBeGreaterThan(0);
    await shot(pageA, "tab");
  });
});

describe("queues and state", () => {
  it("a dead letter redriven from the page reaches its handler", async () => {
    await node.trigger({ function_id: "e2e::flaky", payload: { order: 42 }, action: TriggerAction.Enqueue({ queue: TEST_QUEUE }) });
    await pageB.goto(`${engine.url}/#/queues`);
    const row = pageB.locator(`[data-queue="${TEST_QUEUE}"] button[data-redrive]`);
    await row.first().waitFor({ timeout: 20_000 });
    expect(await pageB.locator(`[data-queue="${TEST_QUEUE}"]`).textContent()).toContain("flaky is failing on purpose");
    await shot(pageB, "queues-dead-letter");
    flaky.failing = false;
    await row.first().click();
    await until(() => flaky.handled.length > 0, "the redriven message handled", 15_000);
    expect(flaky.handled[0]).toMatchObject({ order: 42 });
    await pageB.locator(`[data-queue="${TEST_QUEUE}"]`).waitFor({ state: "detached", timeout: 10_000 });
  });

  it("a dead letter discarded from the page is gone, and its handler never runs it", async () => {
    flaky.failing = true;
    const before = flaky.handled.length;
    await node.trigger({ function_id: "e2e::flaky", payload: { order: 43 }, action: TriggerAction.Enqueue({ queue: TEST_QUEUE }) });
    const discard = pageB.locator(`[data-queue="${TEST_QUEUE}"] button:has-text("Discard")`);
    await discard.first().waitFor({ timeout: 20_000 });
    await discard.first().click();
    await pageB.waitForSelector("dialog[open] #discard-yes");
    await pageB.click("#discard-yes");
    await pageB.locator(`[data-queue="${TEST_QUEUE}"]`).waitFor({ state: "detached", timeout: 10_000 });
    const left = await node.trigger<unknown, { messages: unknown[] }>({
      function_id: "engine::queue::dlq_messages",
      payload: { topic: TEST_QUEUE },
    });
    expect(left.messages).toEqual([]);
    flaky.failing = false;
    expect(flaky.handled.length).toBe(before);
  });

  it("a state value written by a worker appears without a reload", async () => {
    // The screen binds its state trigger on open: wait for it, then write.
    const idB = (await pageB.evaluate("window.iii.workerId")) as string;
    const nameB = (await pageB.evaluate("window.iiiConsole.conn.workerName")) as string;
    await until(
      async () => {
        const r = await node.trigger<unknown, { registered_triggers: { function_id: string }[] }>({
          function_id: "engine::registered-triggers::list",
          payload: { trigger_type: "state" },
        });
        return r.registered_triggers.some((t) => t.function_id === `${nameB}::on-state`);
      },
      "the page's state binding",
      10_000,
    );
    expect(idB).toBeTruthy();
    await node.trigger({ function_id: "state::set", payload: { scope: "console-e2e", key: "greeting", value: { text: "hi" } } });
    const scope = pageB.locator('#state-scopes li[data-scope="console-e2e"] button');
    await scope.waitFor({ timeout: 10_000 });
    await scope.click();
    await pageB.waitForFunction(() => document.querySelector('[data-state-value="greeting"]')?.textContent === '{"text":"hi"}', undefined, {
      timeout: 10_000,
    });
    await node.trigger({ function_id: "state::set", payload: { scope: "console-e2e", key: "greeting", value: { text: "hello again" } } });
    await pageB.waitForFunction(
      () => document.querySelector('[data-state-value="greeting"]')?.textContent === '{"text":"hello again"}',
      undefined,
      { timeout: 10_000 },
    );
    // The scope's listing (state::list, values only) is read again after the change.
    await pageB.waitForFunction(() => document.getElementById("state-values")?.textContent?.includes("hello again"), undefined, {
      timeout: 10_000,
    });
    await shot(pageB, "queues-state");
  });
});

describe("triggers in the catalog", () => {
  it("shows a cron job with its next run, and an http route tried from the page answers", async () => {
    await pageB.goto(`${engine.url}/#/catalog`);
    await pageB.waitForSelector("#cron-panel");
    // Registered while the page is open: it shows up without a reload.
    node.registerFunction("e2e::nightly", () => ({ ran: true }), { description: "a nightly job" });
    node.registerTrigger({ type: "cron", function_id: "e2e::nightly", config: { expression: "0 30 2 * * *" } });
    const job = pageB.locator("#cron tbody tr", { hasText: "e2e::nightly" });
    await job.waitFor({ timeout: 15_000 });
    expect(await job.textContent()).toContain("0 30 2 * * *");
    const next = new Date((await job.locator("time").getAttribute("datetime"))!);
    expect(next.getTime()).toBeGreaterThan(Date.now());
    expect(next.getUTCHours() * 60 + next.getUTCMinutes()).toBe(2 * 60 + 30);

    const route = pageB.locator("#routes tbody tr", { hasText: "/hello/:name" });
    await route.locator('button:has-text("try")').click();
    await route.locator('button[type="submit"]').click();
    await route.locator(".route-result").waitFor({ timeout: 10_000 });
    expect(await route.locator(".route-result").textContent()).toMatch(/^200 in [\d.]+ ms$/);
    expect(await route.locator("pre").textContent()).toContain("Hello, name-example! (from a Worker)");
  });
});

it("every screen renders; screenshots at desktop and phone width", async () => {
  for (const screen of ["catalog", "tab", "queues", "agent", "traces"]) {
    await pageB.goto(`${engine.url}/#/${screen}`);
    await pageB.waitForSelector(`main[data-screen="${screen}"]`);
    await pageB.waitForLoadState("networkidle");
    await shot(pageB, screen === "tab" ? "tab-b" : screen);
    if (screen === "agent" || screen === "traces") continue; // their own suites check their controls
    // Every control has a name a screen reader reads out (a label, aria-label or its text).
    const unnamed =
      await pageB.evaluate(`[...document.querySelectorAll("main input, main select, main textarea, main button, header a, header button")]
      .filter((el) => !(el.labels?.length || el.getAttribute("aria-label") || (el.tagName === "BUTTON" || el.tagName === "A") && el.textContent.trim()))
      .map((el) => el.outerHTML.slice(0, 120))`);
    expect(unnamed, screen).toEqual([]);
  }
  // Keyboard only: from the nav to a function's form and a call.
  await pageB.goto(`${engine.url}/#/catalog`);
  await pageB.locator(`#functions li[data-function="edge::hello"] a`).focus();
  await pageB.keyboard.press("Enter");
  const name = pageB.locator('#call-form [data-path="name"]');
  await name.waitFor();
  await name.focus();
  await pageB.keyboard.type("keys");
  await pageB.keyboard.press("Enter"); // submits the form
  await pageB.waitForSelector('#call-result[data-kind="ok"]');
  expect(await pageB.locator("#call-value").textContent()).toContain("Hello, keys!");
  await pageB.goto(`${engine.url}/#/catalog?fn=edge%3A%3Ahello`);
  await pageB.waitForSelector('#call-form [data-path="name"]');
  await shot(pageB, "catalog-function");
  await pageB.setViewportSize({ width: 390, height: 844 });
  await pageB.waitForTimeout(100); // one layout
  // At phone width nothing overflows sideways.
  expect(await pageB.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")).toBe(true);
  await shot(pageB, "catalog-phone");
});
