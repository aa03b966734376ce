// First load of the console, cold cache, against the local engine (`npm start` on a free port, open):
// bytes over the wire and time to interactive, beside a baseline measured in the same run — the
// plain tab-as-worker page (public/test-tab.html: no UI library, the standalone SDK bundle).
// Interactive: the console shows "connected" and the catalog's function list (a person can pick
// one and call it); the baseline shows "connected". Every run is a fresh Chromium profile (cold
// cache); figures are medians of BENCH_RUNS runs (default 5).
//
//   npm run -s bench:console-load      (after `npm run build`; part of `npm run bench`)
import type { BrowserContext } from "playwright-core";
import { launchChromium } from "@iii-edge/test-support/chromium";
import { startEngine } from "@iii-edge/test-support/engine-server";
import { fmt, median } from "../../tests/bench/stats.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
/** How often the page checks whether it is interactive (bounds the measurement's error). */
const TTI_POLL_MS = 5;
/** One load may take this long on a busy machine before the run counts as failed. */
const LOAD_TIMEOUT_MS = 30_000;

interface Load {
  bytes: number;
  requests: number;
  ttiMs: number;
  dclMs: number;
}

async function measure(ctx: BrowserContext, url: string, ready: string): Promise<Load> {
  const page = await ctx.newPage();
  const cdp = await ctx.newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.setCacheDisabled", { cacheDisabled: true });
  let bytes = 0;
  let requests = 0;
  cdp.on("Network.loadingFinished", (e: { encodedDataLength: number }) => {
    bytes += e.encodedDataLength;
    requests += 1;
  });
  // The page records the moment `ready` (a JS expression) first holds.
  await page.addInitScript(
    `(() => { const t = setInterval(() => { try { if (${ready}) { window.__tti = performance.now(); clearInterval(t); } } catch {} }, ${TTI_POLL_MS}); })()`,
  );
  await page.goto(url);
  await page.waitForFunction("window.__tti !== undefined", undefined, { timeout: LOAD_TIMEOUT_MS, polling: 50 });
  await page.waitForLoadState("networkidle");
  const { tti, dcl } = (await page.evaluate(
    `({ tti: window.__tti, dcl: performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd })`,
  )) as { tti: number; dcl: number };
  await page.close();
  return { bytes, requests, ttiMs: tti, dclMs: dcl };
}

const engine = await startEngine();
const pages = {
  console: {
    url: `${engine.url}/#/catalog`,
    ready: `document.querySelector('#status[data-status="open"]') && document.querySelector("#functions li")`,
  },
  baseline: { url: `${engine.url}/test-tab.html?name=bench-tab`, ready: `document.getElementById("status")?.textContent === "connected"` },
};
const results: Record<keyof typeof pages, Load[]> = { console: [], baseline: [] };
try {
  // One warm-up load of each (the engine object wakes, workerd compiles), not counted.
  for (const p of Object.values(pages)) {
    const ctx = await launchChromium();
    await measure(ctx, p.url, p.ready);
    await ctx.close();
  }
  for (let i = 0; i < RUNS; i++) {
    for (const [name, p] of Object.entries(pages) as [keyof typeof pages, (typeof pages)["console"]][]) {
      const ctx = await launchChromium(); // a fresh profile: a cold cache
      results[name].push(await measure(ctx, p.url, p.ready));
      await ctx.close();
    }
  }
} finally {
  await engine.stop();
}

const med = (name: keyof typeof pages, k: keyof Load) => median(results[name].map((r) => r[k]));
console.log(`console first load, cold cache, local engine — medians of ${RUNS} runs (fresh Chromium profile each)`);
console.log("page                 bytes (wire)  requests  DOMContentLoaded ms  interactive ms");
for (const name of ["console", "baseline"] as const) {
  console.log(
    `${name.padEnd(20)} ${fmt(med(name, "bytes"), 0).padStart(12)}  ${fmt(med(name, "requests"), 0).padStart(8)}  ${fmt(med(name, "dclMs")).padStart(19)}  ${fmt(med(name, "ttiMs")).padStart(14)}`,
  );
}
console.log(
  `ratio console/baseline: bytes ${fmt(med("console", "bytes") / med("baseline", "bytes"), 2)}×, interactive ${fmt(med("console", "ttiMs") / med("baseline", "ttiMs"), 2)}×`,
);
