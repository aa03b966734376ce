// The console puts the user's system first, in real Chromium against `npm start` with a user worker
// ("shop") and two agent sessions a scripted model runs (tests/browser/console-scenario.ts):
// - the catalog lists the shop's functions; the engine's and the harness's own are in a folded
//   "System" group;
// - two sessions started with the same text are told apart by id, start time and status;
// - the traces list hides discovery and polling behind a toggle; a session's "trace" link opens its
//   turn's waterfall, whose services each have their own colour;
// - the engine's queue for the shop's state trigger is named by the function it feeds, state keys
//   by the session they belong to;
// - at phone width nothing scrolls sideways and every screen's link is in view.
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "@iii-edge/test-support/wait";
import { openConsole, orderTurn, SHOP_FUNCTIONS, startScenario, TURN_MS, type Scenario } from "./console-scenario.ts";

const SCENARIO_MS = 150_000;
/** The harness's and the engine's namespaces: none of them is the user's. */
const SYSTEM_PREFIXES = [
  "approval::",
  "auth::",
  "budget::",
  "engine::",
  "turn::",
  "run::",
  "policy::",
  "session-tree::",
  "state::",
  "stream::",
  "iii::",
  "models::",
  "harness::",
  "provisioning::",
];
const SAME_TEXT = "Where is order 42?";

let s: Scenario;
let page: Page;
const sessions: string[] = [];

const texts = (selector: string) => page.locator(selector).allTextContents();
const attrs = (selector: string, name: string) =>
  page.evaluate(
    `[...document.querySelectorAll(${JSON.stringify(selector)})].map((e) => e.getAttribute(${JSON.stringify(name)}))`,
  ) as Promise<(string | null)[]>;

beforeAll(async () => {
  s = await startScenario();
  page = s.page;
  page.on("pageerror", (e) => console.error("[console] pageerror", e));
  // Two sessions, the same first text, one after the other.
  sessions.push(await orderTurn(s, SAME_TEXT));
  sessions.push(await orderTurn(s, SAME_TEXT));
}, SCENARIO_MS);

afterAll(async () => {
  await s?.close();
});

describe("the user's system first", () => {
  it("catalog: the shop's functions are listed; the engine's and the harness's are folded under System", async () => {
    await openConsole(page, s.engine, "/catalog");
    const mine = await until(
      async () => {
        const ids = (await attrs("#functions li", "data-function")) as string[];
        return SHOP_FUNCTIONS.every((f) => ids.includes(f)) ? ids : undefined;
      },
      "the shop's functions in the catalog",
      15_000,
    );
    expect(mine.filter((id) => SYSTEM_PREFIXES.some((p) => id.startsWith(p)))).toEqual([]);
    // The shop's before this tab's own demo functions.
    const tab = `${await page.evaluate("window.iiiConsole.conn.workerName")}::`;
    const lastShop = Math.max(...SHOP_FUNCTIONS.map((f) => mine.indexOf(f)));
    const firstTab = mine.findIndex((id) => id.startsWith(tab));
    expect(firstTab).toBeGreaterThan(lastShop);
    const system = (await attrs("#system-functions li", "data-function")) as string[];
    for (const id of [
      "approval::resolve",
      "engine::functions::list",
      "run::start",
      "turn::get_state",
      "state::get",
      "session-tree::list",
      "budget::get",
    ])
      expect(system, id).toContain(id);
    expect(system.filter((id) => SHOP_FUNCTIONS.includes(id))).toEqual([]);
    // Folded until asked for.
    expect(await page.locator("#system-functions-group").getAttribute("open")).toBeNull();
    expect(await page.locator('#system-functions li[data-function="run::start"]').isVisible()).toBe(false);
    await page.click("#system-functions-group > summary");
    await page.locator('#system-functions li[data-function="run::start"]').waitFor({ state: "visible" });
    // The shop's worker comes before the harness's in the workers table.
    const workers = await texts("#workers tbody tr");
    const shopRow = workers.findIndex((w) => w.startsWith("shop"));
    expect(shopRow).toBeGreaterThanOrEqual(0);
    expect(workers.slice(0, shopRow).some((w) => w.includes("system"))).toBe(false);
  });

  it("agent: each session shows an id, a start time and a status; two with the same first text look different", async () => {
    await openConsole(page, s.engine, `/agent?session_id=${encodeURIComponent(sessions[1]!)}`);
    const rows = sessions.map((sid) => page.locator(`#agent-sessions li[data-session="${sid}"]`));
    await until(
      async () =>
        (await rows[0]!.locator('[data-state="stopped"]').count()) && (await rows[1]!.locator('[data-state="stopped"]').count())
          ? true
          : undefined,
      "both sessions listed as stopped",
      20_000,
    );
    const shown = [];
    for (const row of rows) {
      const id = (await row.locator(".ac-session-id").textContent()) ?? "";
      const started = (await row.locator("time").getAttribute("datetime")) ?? "";
      shown.push({ title: await row.locator(".ac-session-title").textContent(), id, started, text: await row.textContent() });
      expect(id.length).toBeGreaterThan(3);
      expect(Number.isNaN(Date.parse(started))).toBe(false);
    }
    expect(shown[0]!.title).toBe(SAME_TEXT); // the same first text…
    expect(shown[1]!.title).toBe(SAME_TEXT);
    expect(shown[0]!.id).not.toBe(shown[1]!.id); // …told apart by the id
    expect(shown[0]!.text).not.toBe(shown[1]!.text);
  });

  it(
    "traces: a session's link opens its turn's waterfall, one colour per service; discovery and polling stay behind a toggle",
    async () => {
      const sid = sessions[0]!;
      await openConsole(page, s.engine, `/agent?session_id=${encodeURIComponent(sid)}`);
      await page.waitForSelector('#agent-state[data-state="stopped"]', { timeout: TURN_MS });
      await page.click("#agent-trace-link");
      // Straight to the waterfall of the turn: its root is the run::start this session began with.
      await until(() => (/trace_id=[0-9a-f]{32}/.test(new URL(page.url()).hash) ? true : undefined), "the turn's trace opened", TURN_MS);
      const traceId = new URLSearchParams(new URL(page.url()).hash.split("?")[1]).get("trace_id")!;
      const turnTraces = (await s.shop.trigger({
        function_id: "engine::traces::list",
        payload: { session_id: sid, function_id: "run::start", limit: 50 },
      })) as { spans: { trace_id: string }[] };
      expect(turnTraces.spans.map((x) => x.trace_id)).toContain(traceId);
      await until(
        async () =>
          (await page.locator("#traces-waterfall > li .tr-span-name").first().textContent()) === "invoke run::start" ? true : undefined,
        "the waterfall's root",
        TURN_MS,
      );
      // Back goes to the session's list, not round to the waterfall again.
      await page.goBack();
      await until(() => (new URL(page.url()).hash.includes("trace_id") ? undefined : true), "back to the agent screen");
      await page.goForward();
      await page.waitForSelector("#traces-waterfall > li .tr-span-name");
      // Every service of the turn (engine, harness workers, the shop) in a colour of its own.
      const legend = await until(
        async () => {
          const chips = (await page.evaluate(
            `[...document.querySelectorAll(".tr-legend li")].map((li) => [li.textContent.trim(), getComputedStyle(li.querySelector(".tr-chip")).backgroundColor])`,
          )) as [string, string][];
          return chips.length >= 3 ? chips : undefined;
        },
        "three or more services in the legend",
        TURN_MS,
      );
      expect(new Set(legend.map(([, c]) => c)).size, JSON.stringify(legend)).toBe(legend.length);

      // The unfiltered list: the turns are there, discovery and reads are not until asked for.
      await openConsole(page, s.engine, "/traces");
      await page.waitForSelector("#traces-list tbody tr", { timeout: TURN_MS });
      const noise =
        /^(trigger|invoke) (engine::functions-available|engine::workers::register|engine::workers-available|.*::(list|list_\w+|get|get_\w+|info|tree|messages|events))$/;
      const names = async () => (await texts("#traces-list tbody th button")).map((t) => t.trim());
      // A read stays in view when it failed or fanned out (more than 3 spans): that is work worth
      // seeing. Only a small, clean read or discovery counts as noise in the quiet list.
      const rows = async () =>
        (await page.evaluate(
          `[...document.querySelectorAll("#traces-list tbody tr")].map((tr) => [tr.querySelector("th button").textContent.trim(), Number(tr.children[4].textContent), tr.children[5].textContent.trim()])`,
        )) as [string, number, string][];
      const quiet = await rows();
      expect(quiet.map(([n]) => n)).toContain("invoke run::start");
      const quietNoise = quiet.filter(([n, spans, status]) => noise.test(n) && spans <= 3 && status.startsWith("ok"));
      expect(quietNoise).toEqual([]);
      await page.check("#traces-show-noise");
      const loud = await until(
        async () => {
          const all = await names();
          return all.some((n) => noise.test(n)) ? all : undefined;
        },
        "discovery and polling shown on asking",
        10_000,
      );
      expect(loud.length).toBeGreaterThan(quiet.length);
    },
    SCENARIO_MS,
  );

  it("queues and state: the engine's queue for the shop's trigger and a session's state say whose they are", async () => {
    // A change the shop's state trigger is still handling: its engine queue has it in flight.
    s.holdOrderChanges(true);
    await s.shop.trigger({ function_id: "orders::create", payload: { item: "teapot" } });
    await openConsole(page, s.engine, "/queues");
    await page.check("#queues-panel input[type=checkbox]");
    const queue = page.locator('#queues [data-queue-name^="state:"]', { hasText: "orders::on_change" });
    await queue.first().waitFor({ timeout: 15_000 });
    expect(await queue.first().locator(".owned-label").textContent()).toBe("state changes → orders::on_change");
    expect(await queue.first().textContent()).toContain("shop");
    s.holdOrderChanges(false);
    // turn_state is keyed by session id: each key names its session by its first text.
    await page.locator('#state-scopes li[data-scope="turn_state"] button').click();
    const key = page.locator("#state-values tbody tr", { hasText: sessions[0]! });
    await key.first().waitFor({ timeout: 10_000 });
    expect(await key.first().textContent()).toContain(SAME_TEXT);
  });

  it("at phone width the navigation wraps: nothing scrolls sideways, every screen's link is in view", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    // Each screen with its content in (a wide table is what pushes a page sideways).
    const filled: Record<string, string> = {
      catalog: "#functions li",
      agent: "#agent-sessions li",
      queues: "#state-scopes li",
      traces: "#traces-list tbody tr",
      tab: "#tab-worker-name",
    };
    for (const [screen, content] of Object.entries(filled)) {
      await openConsole(page, s.engine, `/${screen}`);
      await page.waitForSelector(`main[data-screen="${screen}"] ${content}`, { timeout: 15_000 });
      const fit = (await page.evaluate(
        `({ doc: document.scrollingElement.scrollWidth, width: innerWidth, nav: [...document.querySelectorAll("header nav a")].map((a) => { const r = a.getBoundingClientRect(); return r.left >= 0 && r.right <= innerWidth; }) })`,
      )) as { doc: number; width: number; nav: boolean[] };
      expect(fit.doc, screen).toBeLessThanOrEqual(fit.width);
      expect(fit.nav.every(Boolean), screen).toBe(true);
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  });
});
