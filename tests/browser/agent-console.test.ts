// The console's agent screen in real Chromium against `npm start` (every harness worker built in)
// and the provider replay server: a turn started from the page streams its reply into it; a
// function call that needs approval shows Approve / Deny in a *second* browser (its own profile)
// watching the same session; approving there resumes the turn and the final answer renders in
// both. Then stop (a parked turn ends, the call never runs) and fork-from-here (a new session
// holding the path up to the entry, linked to its source), steering mid-turn, a budget's spent and
// remaining, a sub-agent shown under its parent, and a provider failover (the switch, and which
// model served the reply).
import { existsSync, mkdtempSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { registerWorker, type IIIClient } from "iii-sdk";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { launchChromium } from "@iii-edge/test-support/chromium";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import {
  callAgentTrigger,
  rateLimited,
  reply,
  replyWith,
  say,
  startProviderReplay,
  type ReplayServer,
} from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";

/** One turn end to end on the shared 2-core box (several durable queue hops per round). */
const TURN_MS = 45_000;
/** A scenario: a few turns, two browsers. */
const SCENARIO_MS = 120_000;
const SCREENSHOTS = path.join(repoRoot, "tests/browser/screenshots");

// Everything is allowed for the model except mail::send, which waits for a person.
const PERMISSIONS = `version: 1
rules:
  - '!approval::*'
  - 'weather::*'
  - 'harness::spawn'
  - 'slow::*'
# anything else (mail::send) waits for a person
`;

let replay: ReplayServer;
let engine: EngineServer;
let apps: IIIClient;
let ctxA: BrowserContext;
let ctxB: BrowserContext;
let pageA: Page;
let pageB: Page;
const mails: unknown[] = [];
let releaseSlow: (() => void) | undefined;

// ------------------------------------------------------------------ the page

/** The console as `npm start` serves it: demo-app/dist, built by `npm run build` (Vite). */
function assertConsoleBuilt(): void {
  if (!existsSync(path.join(repoRoot, "demo-app/dist/index.html")))
    throw new Error("demo-app/dist is missing: run `npm run build` first (npm test does)");
}

async function openConsole(page: Page, route: string): Promise<void> {
  await page.goto(`${engine.url}/#${route}`);
  // A hash-only change does not reload: make sure the screen reads its route afresh.
  await page.reload();
  await page.waitForSelector('#status[data-status="open"]', { timeout: 30_000 });
}

const sessionOf = (page: Page) => new URLSearchParams(new URL(page.url()).hash.split("?")[1] ?? "").get("session_id") ?? "";

async function startTurn(page: Page, text: string): Promise<string> {
  await openConsole(page, "/agent");
  // The settings pick the one configured provider and its first model by themselves.
  await until(async () => (await page.locator("#agent-provider").inputValue()) === "openai", "openai selected");
  await page.selectOption("#agent-model", "gpt-4o");
  await page.fill("#agent-input", text);
  await page.click("#agent-send");
  await until(() => sessionOf(page), "the page to open the new session", 10_000);
  return sessionOf(page);
}

const finalTexts = (page: Page) => page.locator('#agent-transcript .ac-msg-assistant[data-final="true"] .ac-text').allTextContents();

// ------------------------------------------------------------------ setup

beforeAll(async () => {
  replay = await startProviderReplay();
  const dir = mkdtempSync(path.join(tmpdir(), "agent-console-"));
  const rules = path.join(dir, "iii-permissions.yaml");
  writeFileSync(rules, PERMISSIONS);
  assertConsoleBuilt();
  // The browsers start while the engine boots (each start is seconds on a loaded machine).
  const browsers = Promise.all([launchChromium().then((c) => (ctxA = c)), launchChromium().then((c) => (ctxB = c))]);
  const booted = startEngine({
    env: { OPENAI_BASE_URL: replay.openaiBaseUrl, OPENAI_API_KEY: "sk-console-test", III_PERMISSIONS_PATH: rules },
  }).then((e) => (engine = e));
  await Promise.all([booted, browsers]);
  apps = registerWorker(engine.wsUrl, { workerName: "console-apps", otel: { enabled: false } });
  apps.registerFunction(
    "mail::send",
    async (a: Record<string, unknown>) => {
      mails.push(a);
      return { sent: true, to: a.to };
    },
    { description: "Send an e-mail.", request_format: { type: "object", properties: { to: { type: "string" } }, required: ["to"] } },
  );
  apps.registerFunction(
    "slow::wait",
    async () => {
      await new Promise<void>((r) => (releaseSlow = r));
      return { waited: true };
    },
    { description: "Waits until released (a long-running call)." },
  );
  await until(async () => (await fetch(`${engine.url}/api/turns/none`)).status === 404 || undefined, "the harness routes", 30_000, 200);
  [pageA, pageB] = await Promise.all([ctxA.newPage(), ctxB.newPage()]);
  mkdirSync(SCREENSHOTS, { recursive: true });
});

afterAll(async () => {
  await Promise.allSettled([ctxA?.close(), ctxB?.close(), apps?.shutdown()]);
  await engine?.stop();
  await replay?.close();
});

beforeEach(() => {
  replay.reset();
});

// ------------------------------------------------------------------ scenarios

let firstSession = "";

describe("an agent turn in the console", () => {
  it(
    "provider failover: the transcript shows the switch and which model served the reply",
    async () => {
      // gpt-4o is rate-limited on each of its attempts; the run's fallback, gpt-4o-mini, answers.
      replay.enqueue("openai", rateLimited({ ms: 10 }), rateLimited({ ms: 10 }), rateLimited({ ms: 10 }), reply(say("from the fallback")));
      const sid = `console-failover-${Date.now().toString(36)}`;
      const res = await fetch(`${engine.url}/api/turns`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          payload: {
            session_id: sid,
            provider: "openai",
            model: "gpt-4o",
            messages: [{ role: "user", content: "hello" }],
            options: { fallback_models: ["openai:gpt-4o-mini"] },
          },
        }),
      });
      expect(res.status, await res.clone().text()).toBe(200);
      await until(
        async () => ((await (await fetch(`${engine.url}/api/turns/${sid}`)).json()) as { state?: string }).state === "stopped" || undefined,
        "the turn to end",
        TURN_MS,
      );
      await openConsole(pageA, `/agent?session_id=${sid}`);
      const notice = pageA.locator(
        '#agent-transcript .ac-failover[data-failover-from="openai:gpt-4o"][data-failover-to="openai:gpt-4o-mini"]',
      );
      await notice.waitFor({ timeout: TURN_MS });
      expect(await notice.getAttribute("data-reason")).toBe("rate_limited");
      expect(await notice.textContent()).toContain("openai:gpt-4o was rate-limited; openai:gpt-4o-mini takes this step");
      const served = pageA.locator('#agent-transcript .ac-msg-assistant [data-served-by="openai:gpt-4o-mini"]');
      await served.waitFor({ timeout: TURN_MS });
      expect(await finalTexts(pageA)).toContain("from the fallback");
    },
    SCENARIO_MS,
  );

  it(
    "streams the reply into the page; the approval shows in another browser; approving there resumes the turn; the answer renders in both",
    async () => {
      const intro = "Let me send that mail for you right away, one moment please.";
      replay.enqueue(
        "openai",
        // Small pieces, spaced out: the page must show the reply growing, not only its end.
        replyWith({ pieceChars: 3, chunkDelayMs: 40 }, say(intro), callAgentTrigger("mail::send", { to: "ada@example.com" }, "m-1")),
        reply(say("Sent the mail to Ada.")),
      );
      const sid = await startTurn(pageA, "mail ada please");
      firstSession = sid;

      // Tokens stream in: a partial of the reply is on screen before the whole of it.
      const partial = await until(
        async () => {
          // Read at once (a locator would wait for the element and miss the stream).
          const t = (await pageA.evaluate(`document.querySelector('[data-streaming="true"] .ac-text')?.textContent ?? null`)) as
            | string
            | null;
          return t && t.length > 0 && t.length < intro.length ? t : undefined;
        },
        "a partial reply on screen",
        TURN_MS,
        10,
      );
      expect(intro.startsWith(partial)).toBe(true);

      // The second browser follows the same session and gets the approval buttons.
      await openConsole(pageB, `/agent?session_id=${sid}`);
      await pageB.waitForSelector('button[data-approve="m-1"]', { timeout: TURN_MS });
      await pageA.waitForSelector('button[data-approve="m-1"]', { timeout: TURN_MS });
      expect(await pageB.locator('[data-call-id="m-1"] .ac-fn').textContent()).toBe("mail::send");
      expect(await pageB.locator('[data-call-id="m-1"]').textContent()).toContain("ada@example.com");
      expect(mails).toHaveLength(0);
      // The approvals panel: the session's mode, and the waiting call with its age and deadline.
      await pageB.waitForSelector('#agent-approvals[data-mode="manual"] [data-pending="m-1"]', { timeout: TURN_MS });
      expect(await pageB.locator('[data-pending="m-1"] .ac-pending-age').textContent()).toMatch(/^waiting \d+ s, expires in (29|30) min$/);
      await pageB.screenshot({ path: path.join(SCREENSHOTS, "agent-approval.png"), fullPage: true });

      await pageB.click('button[data-approve="m-1"]');
      for (const page of [pageA, pageB]) {
        await until(async () => (await finalTexts(page)).includes("Sent the mail to Ada."), "the final answer", TURN_MS);
        await page.waitForSelector('#agent-state[data-state="stopped"]', { timeout: TURN_MS });
        // The call ran, its result is shown, and the buttons are gone.
        await page.waitForSelector('[data-call-id="m-1"][data-status="done"]', { timeout: TURN_MS });
        expect(await page.locator('button[data-approve="m-1"]').count()).toBe(0);
        // Each message once, although it was seen live and then read back from storage.
        expect((await finalTexts(page)).filter((t) => t === intro)).toHaveLength(1);
      }
      expect(mails).toEqual([expect.objectContaining({ to: "ada@example.com" })]);
      await pageA.screenshot({ path: path.join(SCREENSHOTS, "agent-console.png"), fullPage: true });
      // Phone width: one column, every control still there.
      await pageA.setViewportSize({ width: 390, height: 844 });
      expect(await pageA.locator("#agent-input").isVisible()).toBe(true);
      await pageA.screenshot({ path: path.join(SCREENSHOTS, "agent-console-phone.png"), fullPage: true });
      await pageA.setViewportSize({ width: 1280, height: 720 });
    },
    SCENARIO_MS,
  );

  it(
    "stop: a turn parked on an approval ends, and the call never runs",
    async () => {
      replay.enqueue("openai", reply(callAgentTrigger("mail::send", { to: "eve@example.com" }, "k-1")));
      const sid = await startTurn(pageA, "mail eve");
      await pageA.waitForSelector('button[data-approve="k-1"]', { timeout: TURN_MS });
      await pageA.waitForSelector('#agent-pending [data-pending="k-1"]', { timeout: TURN_MS });
      await pageA.click("#agent-stop");
      await pageA.waitForSelector('#agent-state[data-state="stopped"]', { timeout: TURN_MS });
      await until(async () => (await pageA.locator('button[data-approve="k-1"]').count()) === 0, "the buttons gone", TURN_MS);
      await until(async () => (await pageA.locator('#agent-pending [data-pending="k-1"]').count()) === 0, "the inbox emptied", TURN_MS);
      // A person changes the session's mode from the panel; the panel shows what was stored.
      await pageA.selectOption("#agent-permission-mode", "full");
      await pageA.waitForSelector('#agent-approvals[data-mode="full"]', { timeout: TURN_MS });
      expect(await pageA.locator("#agent-mode-help").textContent()).toMatch(/except the harness's own functions/);
      expect(sid).not.toBe(firstSession);
      expect(mails.filter((m) => (m as { to?: string }).to === "eve@example.com")).toHaveLength(0);
    },
    SCENARIO_MS,
  );

  it(
    "fork from here: a new session with the path up to the entry, linked to its source",
    async () => {
      await openConsole(pageA, `/agent?session_id=${firstSession}`);
      const forkButtons = pageA.locator("#agent-transcript [data-fork-entry]");
      await until(async () => (await forkButtons.count()) >= 2, "forkable entries", TURN_MS);
      // Fork at the first user message: the copy holds that one entry.
      await forkButtons.first().click();
      await until(() => (sessionOf(pageA) && sessionOf(pageA) !== firstSession ? true : undefined), "the fork opened", TURN_MS);
      const fork = sessionOf(pageA);
      await pageA.waitForSelector("#agent-origin", { timeout: TURN_MS });
      expect(await pageA.locator("#agent-origin").textContent()).toContain(firstSession);
      await until(async () => (await pageA.locator("#agent-tree [data-entry-id]").count()) === 1, "the fork's tree: one entry", TURN_MS);
      expect(await pageA.locator("#agent-transcript .ac-msg-user .ac-text").allTextContents()).toEqual(["mail ada please"]);
      expect(await finalTexts(pageA)).toEqual([]);
      // The new session is listed beside its source.
      await until(
        async () => (await pageA.locator(`.ac-sessions button[title="${fork}"]`).count()) === 1,
        "the fork in the session list",
        TURN_MS,
      );
    },
    SCENARIO_MS,
  );

  it(
    "steering: a message sent while a call runs joins the turn and the next round answers it",
    async () => {
      releaseSlow = undefined;
      replay.enqueue("openai", reply(callAgentTrigger("slow::wait", {}, "w-1")), reply(say("Including Paris as well.")));
      await startTurn(pageA, "check the weather");
      await pageA.waitForSelector('[data-call-id="w-1"][data-status="running"]', { timeout: TURN_MS });
      await until(() => releaseSlow, "the slow call to start", TURN_MS);
      expect(await pageA.locator("#agent-send").textContent()).toBe("Steer");
      await pageA.fill("#agent-input", "also check Paris");
      await pageA.click("#agent-send");
      await until(async () => (await pageA.locator("#agent-input").inputValue()) === "", "the steering message sent");
      releaseSlow!();
      await until(async () => (await finalTexts(pageA)).includes("Including Paris as well."), "the steered answer", TURN_MS);
      expect(await pageA.locator("#agent-transcript .ac-msg-user .ac-text").allTextContents()).toEqual([
        "check the weather",
        "also check Paris",
      ]);
      const second = replay.requestsFor("openai")[1];
      expect(JSON.stringify(second?.body?.messages)).toContain("also check Paris");
    },
    SCENARIO_MS,
  );

  it(
    "budget: a run charged to a new budget shows what it spent and what remains",
    async () => {
      replay.enqueue("openai", replyWith({ usage: { input: 1000, output: 500 } }, say("Cheap answer.")));
      await openConsole(pageA, "/agent");
      await until(async () => (await pageA.locator("#agent-provider").inputValue()) === "openai", "openai selected");
      await pageA.selectOption("#agent-model", "gpt-4o");
      await pageA.click("text=New $5 budget");
      await until(async () => (await pageA.locator("#agent-budget").inputValue()) || undefined, "the new budget selected");
      await pageA.fill("#agent-input", "something cheap");
      await pageA.click("#agent-send");
      await until(async () => (await finalTexts(pageA)).includes("Cheap answer."), "the answer", TURN_MS);
      // gpt-4o at the catalog's $2.50 / $10 per 1M tokens: 1000 in + 500 out = $0.0075.
      const spent = await until(
        async () => Number(await pageA.evaluate(`document.querySelector("[data-budget-spent]")?.dataset.budgetSpent ?? 0`)) || undefined,
        "the spend shown",
        TURN_MS,
      );
      expect(spent).toBeCloseTo(0.0075, 6);
      expect(Number(await pageA.locator("[data-budget-remaining]").getAttribute("data-budget-remaining"))).toBeCloseTo(5 - 0.0075, 6);
      await pageA.selectOption("#agent-budget", ""); // later runs are not charged
    },
    SCENARIO_MS,
  );

  it(
    "sub-agents: a child the model spawns is listed under its parent with its state, and opens to its own session",
    async () => {
      // The parent spawns a child, then both answer in text (the replay serves whichever asks first).
      replay.enqueue(
        "openai",
        reply(callAgentTrigger("harness::spawn", { task: "count the sheep" }, "sp-1")),
        reply(say("one sheep")),
        reply(say("spawned a helper")),
      );
      const parent = await startTurn(pageA, "delegate the counting");
      const child = pageA.locator("#agent-children [data-child]");
      await child.first().waitFor({ timeout: TURN_MS });
      expect(await child.first().textContent()).toContain("count the sheep");
      await until(async () => ((await child.first().textContent()) ?? "").includes("stopped"), "the child's run to end", TURN_MS);
      const childId = (await child.first().getAttribute("data-child"))!;
      await child.first().locator("button").first().click();
      await until(() => (sessionOf(pageA) === childId ? true : undefined), "the child's session opened", TURN_MS);
      await until(
        async () => /sub-agent of\s*(.*)$/.exec((await pageA.locator(".ac-session-head").textContent()) ?? "")?.[1]?.includes(parent),
        "the link back to the parent",
        TURN_MS,
      );
      await until(
        async () =>
          (await pageA.locator("#agent-transcript .ac-msg-user .ac-text").allTextContents()).some((t) => t.includes("count the sheep")),
        "the child's task as its first message",
        TURN_MS,
      );
    },
    SCENARIO_MS,
  );

  it(
    "a key stored from the page goes to the credentials worker and never comes back: the page shows only that one is configured",
    async () => {
      const secret = "sk-ant-console-0123456789-secret";
      await openConsole(pageA, "/agent");
      await until(
        async () => (await pageA.locator("#agent-provider option").allTextContents()).includes("anthropic (no key)"),
        "anthropic listed without a key",
      );
      await pageA.selectOption("#agent-provider", "anthropic");
      await pageA.fill('input[type="password"]', secret);
      await pageA.click("text=Store key");
      await pageA.waitForSelector("text=stored by the credentials worker", { timeout: TURN_MS });
      await until(
        async () => ((await pageA.locator("#agent-key-status").textContent()) ?? "").includes("key configured (stored"),
        "the stored key's status",
        TURN_MS,
      );
      expect(await pageA.locator('input[type="password"]').inputValue()).toBe("");
      expect(await pageA.content()).not.toContain(secret);
      const status = (await (
        await fetch(`${engine.url}/_iii/invoke`, {
          method: "POST",
          body: JSON.stringify({ function_id: "auth::status", payload: { provider: "anthropic" } }),
        })
      ).json()) as { result: { configured: boolean; source: string } };
      expect(status.result).toMatchObject({ configured: true, source: "stored" });
      await pageA.selectOption("#agent-provider", "openai");
    },
    SCENARIO_MS,
  );
});
