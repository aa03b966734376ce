// A console with something of the user's in it, shared by the "user's system first" suite and the
// screenshot script (scripts/console-screenshots): the engine as `npm start` runs it with the
// provider replay as its model, a user worker ("shop") with functions, a state trigger and an http
// route, and agent sessions started from the page with a scripted model that calls the shop.
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { registerWorker, type IIIClient } from "iii-sdk";
import type { BrowserContext, Page } from "playwright-core";
import { launchChromium } from "@iii-edge/test-support/chromium";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, reply, say, startProviderReplay, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";

/** One turn end to end on a shared 2-core box (several durable queue hops per round). */
export const TURN_MS = 45_000;

/** The model may call the shop; the kernel stays closed to it as always. */
const PERMISSIONS = "version: 1\nrules:\n  - '!approval::*'\n  - 'orders::*'\n";

export const SHOP_FUNCTIONS = ["orders::create", "orders::get", "orders::list", "orders::on_change"];

export interface Scenario {
  engine: EngineServer;
  replay: ReplayServer;
  shop: IIIClient;
  ctx: BrowserContext;
  page: Page;
  /** While on, the shop's state trigger handler waits (its delivery stays in flight). */
  holdOrderChanges(on: boolean): void;
  close(): Promise<void>;
}

export async function startScenario(): Promise<Scenario> {
  if (!existsSync(path.join(repoRoot, "demo-app/dist/index.html")))
    throw new Error("demo-app/dist is missing: run `npm run build` first (npm test does)");
  const replay = await startProviderReplay();
  const dir = mkdtempSync(path.join(tmpdir(), "console-scenario-"));
  const rules = path.join(dir, "iii-permissions.yaml");
  writeFileSync(rules, PERMISSIONS);
  // Chromium starts while the engine boots (each start is seconds on a loaded machine); whichever
  // of the two came up is taken down again if the other did not.
  const [booted, launched] = await Promise.allSettled([
    startEngine({
      env: { OPENAI_BASE_URL: replay.openaiBaseUrl, OPENAI_API_KEY: "sk-console-scenario", III_PERMISSIONS_PATH: rules },
    }),
    launchChromium(),
  ]);
  if (booted.status === "rejected" || launched.status === "rejected") {
    await Promise.allSettled([
      booted.status === "fulfilled" && booted.value.stop(),
      launched.status === "fulfilled" && launched.value.close(),
      replay.close(),
    ]);
    throw booted.status === "rejected" ? booted.reason : (launched as PromiseRejectedResult).reason;
  }
  const engine = booted.value;
  const ctx = launched.value;
  const shop = registerWorker(engine.wsUrl, { workerName: "shop", otel: { enabled: false } });
  let holding = false;
  const orders = new Map<string, { id: string; item: string; qty: number }>([["42", { id: "42", item: "mug", qty: 2 }]]);
  const idSchema = {
    type: "object" as const,
    properties: { id: { type: "string" as const, description: "Order number" } },
    required: ["id"],
  };
  shop.registerFunction("orders::get", async (a: { id: string }) => orders.get(String(a.id)) ?? null, {
    description: "One order by its number.",
    request_format: idSchema,
  });
  shop.registerFunction("orders::list", async () => ({ orders: [...orders.values()] }), { description: "Every order." });
  shop.registerFunction(
    "orders::create",
    async (a: { item: string; qty?: number }) => {
      const o = { id: String(41 + orders.size + 1), item: a.item, qty: a.qty ?? 1 };
      orders.set(o.id, o);
      await shop.trigger({ function_id: "state::set", payload: { scope: "orders", key: o.id, value: o } });
      return o;
    },
    {
      description: "Place an order.",
      request_format: {
        type: "object",
        properties: { item: { type: "string" }, qty: { type: "integer", minimum: 1 } },
        required: ["item"],
      },
    },
  );
  // Holds each delivery until `release()`: while it waits, the engine's queue for the trigger is
  // listed with a message in flight.
  const held: (() => void)[] = [];
  shop.registerFunction(
    "orders::on_change",
    async () => {
      if (holding) await new Promise<void>((r) => held.push(r));
      return { seen: true };
    },
    { description: "Reacts to a changed order." },
  );
  shop.registerTrigger({ type: "state", function_id: "orders::on_change", config: { scope: "orders" } });
  shop.registerTrigger({ type: "http", function_id: "orders::list", config: { api_path: "orders", http_method: "GET" } });
  await until(async () => (await fetch(`${engine.url}/api/turns/none`)).status === 404 || undefined, "the harness routes", 30_000, 200);
  await until(async () => (await fetch(`${engine.url}/orders`)).status === 200 || undefined, "the shop's route", 30_000, 200);
  const page = await ctx.newPage();
  return {
    engine,
    replay,
    shop,
    ctx,
    page,
    holdOrderChanges(on: boolean) {
      holding = on;
      if (!on) for (const r of held.splice(0)) r();
    },
    async close() {
      await Promise.allSettled([ctx.close(), shop.shutdown()]);
      await engine.stop();
      await replay.close();
    },
  };
}

export async function openConsole(page: Page, engine: EngineServer, route: string): Promise<void> {
  await page.goto(`${engine.url}/#${route}`);
  await page.reload(); // a hash-only change does not reload
  await page.waitForSelector('#status[data-status="open"]', { timeout: 30_000 });
}

export const sessionOf = (page: Page) => new URLSearchParams(new URL(page.url()).hash.split("?")[1] ?? "").get("session_id") ?? "";

/** A turn started from the agent screen, the model asking the shop for order 42 and answering;
 * resolves with the session id once the turn has ended. */
export async function orderTurn(s: Scenario, text: string): Promise<string> {
  s.replay.enqueue(
    "openai",
    reply(say("Let me look it up."), callAgentTrigger("orders::get", { id: "42" })),
    reply(say("Order 42: 2 mugs, on their way.")),
  );
  await openConsole(s.page, s.engine, "/agent");
  await until(async () => (await s.page.locator("#agent-provider").inputValue()) === "openai", "openai selected");
  await s.page.selectOption("#agent-model", "gpt-4o");
  await s.page.fill("#agent-input", text);
  await s.page.click("#agent-send");
  await until(() => sessionOf(s.page), "the page to open the new session", 10_000);
  await until(
    async () => ((await s.page.locator("#agent-state").getAttribute("data-state")) === "stopped" ? true : undefined),
    "the turn to end",
    TURN_MS,
    200,
  );
  return sessionOf(s.page);
}
