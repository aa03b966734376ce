// `npm run screenshots`: every console screen at desktop (1280×800) and phone (390×844) width,
// into demo-app/docs/screens/, with something of a user's in them: the scenario of the browser
// suites (tests/browser/console-scenario.ts) — a "shop" worker with functions, an http route and a
// state trigger, two agent sessions a scripted model ran, their traces. Debian's Chromium through
// playwright-core, as the suites use it. Needs demo-app/dist (the npm script builds it first).
import { mkdirSync, statSync } from "node:fs";
import path from "node:path";
import type { Page } from "playwright-core";
import { repoRoot } from "@iii-edge/test-support/engine-server";
import { until } from "@iii-edge/test-support/wait";
import { openConsole, orderTurn, startScenario, type Scenario } from "../tests/browser/console-scenario.ts";

const OUT = path.join(repoRoot, "demo-app/docs/screens");
const VIEWPORTS = { desktop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } } as const;

/** How each screen is brought to a state worth showing, once its route is open. */
type Stage = (page: Page, s: Scenario, ctx: { session: string }) => Promise<void>;

const SCREENS: { name: string; route: (ctx: { session: string }) => string; stage: Stage }[] = [
  {
    name: "catalog",
    route: () => "/catalog?fn=orders%3A%3Aget",
    stage: async (page) => {
      await page.waitForSelector('#functions li[data-function="orders::get"]');
      await page.fill('#call-form [data-path="id"]', "42");
      await page.click('#call-form button[type="submit"]');
      await page.waitForSelector('#call-result[data-kind="ok"]');
    },
  },
  {
    name: "agent",
    route: ({ session }) => `/agent?session_id=${encodeURIComponent(session)}`,
    stage: async (page) => {
      await page.waitForSelector('#agent-state[data-state="stopped"]');
      await page.waitForSelector('#agent-sessions li [data-state="stopped"]');
    },
  },
  {
    name: "traces",
    route: ({ session }) => `/traces?session_id=${encodeURIComponent(session)}&open=turn`,
    stage: async (page) => {
      await until(
        async () => ((await page.locator("#traces-waterfall > li").count()) > 5 ? true : undefined),
        "the turn's waterfall",
        30_000,
      );
    },
  },
  {
    name: "traces-list",
    route: () => "/traces",
    stage: async (page) => {
      await page.waitForSelector("#traces-list tbody tr");
    },
  },
  {
    name: "queues",
    route: () => "/queues",
    stage: async (page) => {
      await page.locator('#state-scopes li[data-scope="turn_state"] button').click();
      await page.waitForSelector("#state-values tbody tr");
    },
  },
  {
    name: "tab",
    route: () => "/tab",
    stage: async (page) => {
      await page.waitForSelector("#tab-worker-name");
    },
  },
];

async function main(): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  const s = await startScenario();
  try {
    const session = await orderTurn(s, "Where is order 42?");
    await orderTurn(s, "Where is order 42?"); // a second session, the same first text
    await s.shop.trigger({ function_id: "orders::create", payload: { item: "teapot", qty: 1 } });
    for (const [vp, size] of Object.entries(VIEWPORTS)) {
      await s.page.setViewportSize(size);
      for (const screen of SCREENS) {
        await openConsole(s.page, s.engine, screen.route({ session }));
        await screen.stage(s.page, s, { session });
        await s.page.evaluate("window.scrollTo(0, 0)");
        const file = path.join(OUT, `${screen.name}-${vp}.png`);
        await s.page.screenshot({ path: file, animations: "disabled" });
        console.log(`${path.relative(repoRoot, file)}  ${(statSync(file).size / 1024).toFixed(0)} kB`);
      }
    }
  } finally {
    await s.close();
  }
}

await main();
