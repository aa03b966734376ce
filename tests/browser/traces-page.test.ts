// The console's traces screen (the waterfall page) in real Chromium against `npm start` with the
// engine's trace store: a turn started from the agent screen opens through its "trace" link; its
// waterfall nests the spans by parent (run::start → invoke_agent → steps → the provider's `chat`
// span), colours them by service, and a span opens to its attributes; while the turn waits for an
// approval the waterfall is live and grows when the
// turn goes on. `#/traces?function_id=…` (the catalog's link) lists the traces of that function.
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { registerWorker, type IIIClient } from "iii-sdk";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "@iii-edge/test-support/chromium";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { callAgentTrigger, reply, say, startProviderReplay, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";

const TURN_MS = 45_000;
const SCENARIO_MS = 120_000;
const SCREENSHOTS = path.join(repoRoot, "tests/browser/screenshots");

let replay: ReplayServer;
let engine: EngineServer;
let apps: IIIClient;
let ctx: BrowserContext;
let page: Page;

async function openConsole(route: string): Promise<void> {
  await page.goto(`${engine.url}/#${route}`);
  await page.reload(); // a hash-only change does not reload
  await page.waitForSelector('#status[data-status="open"]', { timeout: 30_000 });
}

const sessionOf = () => new URLSearchParams(new URL(page.url()).hash.split("?")[1] ?? "").get("session_id") ?? "";

/** Rows of the waterfall as the page shows them. */
const rows = () =>
  page.evaluate(
    `[...document.querySelectorAll("#traces-waterfall > li")].map((li) => ({ id: li.dataset.spanId, parent: li.dataset.parentSpanId ?? null, depth: Number(li.dataset.depth), name: li.querySelector(".tr-span-name")?.textContent ?? "" }))`,
  ) as Promise<{ id: string; parent: string | null; depth: number; name: string }[]>;

beforeAll(async () => {
  if (!existsSync(path.join(repoRoot, "demo-app/dist/index.html")))
    throw new Error("demo-app/dist is missing: run `npm run build` first (npm test does)");
  replay = await startProviderReplay();
  const dir = mkdtempSync(path.join(tmpdir(), "traces-page-"));
  const rules = path.join(dir, "iii-permissions.yaml");
  writeFileSync(rules, "version: 1\nrules:\n  - '!approval::*'\n# anything else waits for a person\n");
  // Chromium starts while the engine boots (each start is seconds on a loaded machine).
  await Promise.all([
    startEngine({
      env: { OPENAI_BASE_URL: replay.openaiBaseUrl, OPENAI_API_KEY: "sk-traces-test", III_PERMISSIONS_PATH: rules },
    }).then((e) => (engine = e)),
    launchChromium().then((c) => (ctx = c)),
  ]);
  apps = registerWorker(engine.wsUrl, { workerName: "traces-apps", otel: { enabled: false } });
  apps.registerFunction("notes::save", async (a: Record<string, unknown>) => ({ saved: true, text: a.text }), {
    description: "Save a note.",
  });
  await until(async () => (await fetch(`${engine.url}/api/turns/none`)).status === 404 || undefined, "the harness routes", 30_000, 200);
  page = await ctx.newPage();
  mkdirSync(SCREENSHOTS, { recursive: true });
});

afterAll(async () => {
  await Promise.allSettled([ctx?.close(), apps?.shutdown()]);
  await engine?.stop();
  await replay?.close();
});

describe("the traces screen", () => {
  it(
    "a turn's trace, from the agent screen's link: listed, nested in the waterfall, live while the turn waits, a span's attributes on click",
    async () => {
      replay.enqueue(
        "openai",
        reply(say("Saving it."), callAgentTrigger("notes::save", { text: "buy milk" }, "n-1")),
        reply(say("Saved.")),
      );
      await openConsole("/agent");
      await until(async () => (await page.locator("#agent-provider").inputValue()) === "openai", "openai selected");
      await page.selectOption("#agent-model", "gpt-4o");
      await page.fill("#agent-input", "note: buy milk");
      await page.click("#agent-send");
      await page.waitForSelector('button[data-approve="n-1"]', { timeout: TURN_MS });
      const sid = sessionOf();

      // The turn's "trace" link opens the session's run::start trace straight away.
      await page.click("#agent-trace-link");
      await until(
        () => (/^#\/traces\?trace_id=[0-9a-f]{32}&session_id=/.test(new URL(page.url()).hash) ? true : undefined),
        "the turn's trace",
        TURN_MS,
      );
      await page.waitForSelector("#traces-waterfall > li", { timeout: TURN_MS });

      // While the turn waits, what has ended is there (spans are stored when they end): run::start
      // (it answers at once) and the provider's chat span; the trace is marked live.
      const before = await until(
        async () => {
          const r = await rows();
          return r.some((x) => x.name === "invoke run::start") && r.some((x) => x.name.startsWith("chat ")) ? r : undefined;
        },
        "run::start and the provider's chat span in the waterfall",
        TURN_MS,
      );
      expect(await page.locator("#traces-live").count()).toBe(1);
      // Coloured by service: the legend names the engine and the harness workers.
      expect(await page.locator(".tr-legend").textContent()).toContain("iii-engine");

      // A span's attributes: the provider call in GenAI conventions.
      const chatId = before.find((r) => r.name.startsWith("chat "))!.id;
      await page.locator(`#traces-waterfall > li[data-span-id="${chatId}"] > button.tr-row-btn`).click();
      await page.waitForSelector("#traces-span-detail #traces-attributes", { timeout: 10_000 });
      expect(await page.locator('#traces-attributes tr[data-attr="gen_ai.request.model"] td').textContent()).toBe("gpt-4o");
      expect(await page.locator('#traces-attributes tr[data-attr="gen_ai.operation.name"] td').textContent()).toBe("chat");

      // Live: approving the call (over the harness's HTTP API, as another tab would) lets the turn go
      // on and end; the open waterfall grows by itself into the whole turn, nested by parent: every
      // row but the root names a parent shown above it, one level up — no orphan left.
      const res = await fetch(`${engine.url}/api/approvals`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ session_id: sid, function_call_id: "n-1", decision: "allow" }),
      });
      expect(res.status).toBe(200);
      const after = await until(
        async () => {
          const r = await rows();
          return r.length > before.length &&
            r.some((x) => x.name.startsWith("invoke_agent")) &&
            r.some((x) => x.name.includes("notes::save")) &&
            r.filter((x) => x.parent === null).length === 1 &&
            r.every((x) => x.parent === null || r.some((p) => p.id === x.parent))
            ? r
            : undefined;
        },
        "the waterfall to grow into the whole turn",
        TURN_MS,
      );
      expect(after[0]!.name).toBe("invoke run::start");
      expect(after[0]!.parent).toBeNull();
      const index = new Map(after.map((r, i) => [r.id, i]));
      for (const r of after.slice(1)) {
        const p = index.get(r.parent!);
        expect(p, `${r.name}'s parent is shown`).toBeDefined();
        expect(p!).toBeLessThan(index.get(r.id)!);
        expect(r.depth).toBe(after[p!]!.depth + 1);
      }
      const agent = after.find((r) => r.name.startsWith("invoke_agent"))!;
      const chat = after.find((r) => r.name.startsWith("chat "))!;
      expect(chat.depth).toBeGreaterThan(agent.depth);
      expect(await page.locator('#traces-waterfall > li[data-orphan="true"]').count()).toBe(0);
      // A subtree folds away and back (the agent's whole turn under its span): only the folded
      // span's descendants leave the list.
      const fold = page.locator(`#traces-waterfall > li[data-span-id="${agent.id}"] > button.tr-fold`);
      await fold.click();
      await until(
        async () => {
          const r = await rows();
          const i = r.findIndex((x) => x.id === agent.id);
          return i >= 0 && (r[i + 1] === undefined || r[i + 1]!.depth <= agent.depth) && r.length < after.length;
        },
        "the agent's subtree folded",
        10_000,
      );
      expect(await fold.getAttribute("aria-expanded")).toBe("false");
      await fold.click();
      await until(async () => (await rows()).length >= after.length, "the subtree back", 10_000);
      await page.screenshot({ path: path.join(SCREENSHOTS, "traces-waterfall.png"), fullPage: true });
    },
    SCENARIO_MS,
  );

  it(
    "#/traces?function_id=… (the catalog's link) lists that function's traces, and a click opens one",
    async () => {
      await openConsole("/traces?function_id=run::start");
      const row = page.locator("#traces-list tbody tr").first();
      await row.waitFor({ timeout: TURN_MS });
      expect(await page.locator("#traces-list tbody tr").count()).toBeGreaterThanOrEqual(1);
      expect(await row.textContent()).toContain("run::start");
      await page.screenshot({ path: path.join(SCREENSHOTS, "traces-list.png"), fullPage: true });
      await row.locator("button").click();
      await page.waitForSelector("#traces-waterfall > li", { timeout: TURN_MS });
      expect(new URL(page.url()).hash).toMatch(/trace_id=[0-9a-f]{32}/);
    },
    SCENARIO_MS,
  );
});
