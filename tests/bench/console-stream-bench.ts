// `npm run -s bench:console` (the last part of `npm run bench`): the console's agent screen
// rendering a streamed reply of 1,000 deltas, in Debian's Chromium against exactly `npm start` (the console from demo-app/dist, every
// harness worker built in) and the provider replay (1,000 one-character text deltas, 2 ms apart).
// What a person would notice is the main thread being busy: the page's long tasks (>50 ms,
// PerformanceObserver "longtask") and its animation frames (rAF intervals) while the reply streams.
// Three variants, alternating, each run: the page as shipped (deltas batched per animation frame),
// the same page rendering every event on its own (localStorage "iii-console-flush" = "each", the
// baseline), and the page open on the session with nothing streaming for the same time (the floor).
// Options (env): BENCH_RUNS (3), BENCH_DELTAS (1000), BENCH_DELTA_GAP_MS (2).
// Needs `npm run build` first (demo-app/dist).
import { existsSync } from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { launchChromium } from "@iii-edge/test-support/chromium";
import { repoRoot, startEngine } from "@iii-edge/test-support/engine-server";
import { replyWith, say, startProviderReplay } from "@iii-edge/test-support/provider-replay";
import { fmt, median, pct } from "./stats.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const DELTAS = Number(process.env.BENCH_DELTAS ?? 1000);
const GAP_MS = Number(process.env.BENCH_DELTA_GAP_MS ?? 2);
/** A turn that has not rendered its answer within this is a failed run, not a slow sample. */
const TURN_TIMEOUT_MS = 120_000;
/** A frame longer than this is one a person sees as a stutter (three 60 Hz frames). */
const JANK_FRAME_MS = 50;

if (!existsSync(path.join(repoRoot, "demo-app/dist/index.html"))) throw new Error("demo-app/dist is missing: run `npm run build` first");

// Measures from the first script on: long tasks, and every animation frame's interval.
const PROBE = `(() => {
  window.__lt = [];
  try { new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__lt.push([e.startTime, e.duration]); }).observe({ type: "longtask", buffered: true }); } catch {}
  window.__frames = [];
  let last = performance.now();
  const tick = (t) => { window.__frames.push([t, t - last]); last = t; requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
})();`;

const replay = await startProviderReplay();
const engine = await startEngine({ env: { OPENAI_BASE_URL: replay.openaiBaseUrl, OPENAI_API_KEY: "sk-bench" } });
// The reply: DELTAS one-character pieces (words, so the text wraps like prose).
const words = "the quick brown fox jumps over a lazy dog while streaming tokens keep arriving ".repeat(Math.ceil(DELTAS / 80) + 1);
const text = words.slice(0, DELTAS);

interface Sample {
  variant: string;
  ms: number;
  longTasks: number;
  longTaskMs: number;
  maxLongTaskMs: number;
  frames: number;
  p99FrameMs: number;
  jankFrames: number;
  deltas: number;
  /** When each long task started (ms after Send) and how long it took: where the time went. */
  longTaskAt: string;
}

async function measure(page: Page, t0: number, t1: number, variant: string, deltas: number): Promise<Sample> {
  const { lt, frames } = (await page.evaluate("({ lt: window.__lt, frames: window.__frames })")) as {
    lt: [number, number][];
    frames: [number, number][];
  };
  const inWindow = lt.filter(([s]) => s >= t0 && s <= t1);
  const f = frames.filter(([t]) => t >= t0 && t <= t1).map(([, d]) => d);
  return {
    variant,
    ms: t1 - t0,
    longTasks: inWindow.length,
    longTaskMs: inWindow.reduce((a, [, d]) => a + d, 0),
    maxLongTaskMs: inWindow.reduce((a, [, d]) => Math.max(a, d), 0),
    frames: f.length,
    p99FrameMs: pct(f, 99),
    jankFrames: f.filter((d) => d > JANK_FRAME_MS).length,
    deltas,
    longTaskAt: inWindow.map(([st, d]) => `+${Math.round(st - t0)}:${Math.round(d)}`).join(" "),
  };
}

async function openAgent(ctx: BrowserContext, flushEach: boolean, route = "/agent"): Promise<Page> {
  const page = await ctx.newPage();
  await page.addInitScript(PROBE);
  await page.addInitScript(
    flushEach ? `localStorage.setItem("iii-console-flush", "each")` : `localStorage.removeItem("iii-console-flush")`,
  );
  await page.goto(`${engine.url}/#${route}`);
  await page.waitForSelector('#status[data-status="open"]', { timeout: 30_000 });
  return page;
}

async function countDeltas(sid: string): Promise<number> {
  let n = 0;
  let after: string | null = null;
  for (;;) {
    const res = await fetch(`${engine.url}/api/turns/${sid}/events?limit=1000${after ? `&after=${encodeURIComponent(after)}` : ""}`);
    const page = (await res.json()) as { events: { data: { type: string; llm_event?: { type: string } } }[]; next: string | null };
    n += page.events.filter((e) => e.data.type === "message_update" && e.data.llm_event?.type === "text_delta").length;
    if (page.events.length === 0) return n;
    after = page.next;
  }
}

async function streamRun(ctx: BrowserContext, flushEach: boolean): Promise<Sample & { sid: string }> {
  const page = await openAgent(ctx, flushEach);
  await page.waitForFunction(`document.querySelector("#agent-provider")?.value === "openai"`, undefined, { timeout: 30_000 });
  await page.selectOption("#agent-model", "gpt-4o");
  // The default answer, not a queued one: a round the harness retries (a transient failure on a
  // loaded box) gets the same reply instead of "no scenario".
  replay.setDefault("openai", replyWith({ pieceChars: 1, chunkDelayMs: GAP_MS }, say(text)));
  await page.fill("#agent-input", "stream a long answer");
  const t0 = (await page.evaluate("performance.now()")) as number;
  await page.click("#agent-send");
  try {
    await page.waitForFunction(
      `document.getElementById("agent-state")?.dataset.state === "failed" || [...document.querySelectorAll('#agent-transcript [data-final="true"] .ac-text')].some((e) => e.textContent.length === ${text.length})`,
      undefined,
      { timeout: TURN_TIMEOUT_MS, polling: 50 },
    );
  } catch (e) {
    const seen = await page.evaluate(
      `({ url: location.href, mode: document.getElementById("agent-follow-mode")?.textContent, events: document.getElementById("agent-transcript")?.dataset.events, state: document.getElementById("agent-state")?.dataset.state })`,
    );
    throw new Error(
      `the answer was not rendered within ${TURN_TIMEOUT_MS} ms: ${JSON.stringify(seen)}, provider requests so far: ${replay.requests.length}\nengine output (tail): ${engine.output().slice(-3000)}`,
      { cause: e },
    );
  }
  const t1 = (await page.evaluate("performance.now()")) as number;
  if ((await page.evaluate(`document.getElementById("agent-state")?.dataset.state`)) === "failed") {
    const why = await page.locator("#agent-transcript").textContent();
    await page.close();
    throw new Error(`the turn failed: ${why?.slice(-300)}`);
  }
  const sid = new URLSearchParams(new URL(page.url()).hash.split("?")[1] ?? "").get("session_id") ?? "";
  const sample = await measure(page, t0, t1, flushEach ? "each event" : "batched", await countDeltas(sid));
  await page.close();
  return { ...sample, sid };
}

async function idleRun(ctx: BrowserContext, sid: string, ms: number): Promise<Sample> {
  const page = await openAgent(ctx, false, `/agent?session_id=${sid}`);
  await page.waitForSelector('#agent-transcript [data-final="true"]', { timeout: 30_000 });
  const t0 = (await page.evaluate("performance.now()")) as number;
  await page.waitForTimeout(ms); // the floor is "this long with nothing arriving": a fixed wait is the measurement
  const t1 = (await page.evaluate("performance.now()")) as number;
  const sample = await measure(page, t0, t1, "idle", 0);
  await page.close();
  return sample;
}

const samples: Sample[] = [];
let failedTurns = 0;
const ctx = await launchChromium();
try {
  for (let run = 0; run < RUNS; run++) {
    const order = run % 2 === 0 ? [false, true] : [true, false];
    let last: (Sample & { sid: string }) | undefined;
    for (const each of order) {
      // A turn that failed on the loaded box is run again once, and said so.
      last = await streamRun(ctx, each).catch((e: Error) => {
        failedTurns++;
        console.error(`run ${run + 1} ${each ? "each event" : "batched"}: ${e.message}; running it again`);
        return streamRun(ctx, each);
      });
      samples.push(last);
      console.error(
        `run ${run + 1} ${last.variant}: ${fmt(last.ms, 0)} ms, ${last.deltas} deltas, ${last.longTasks} long tasks (${fmt(last.longTaskMs, 0)} ms), ${last.jankFrames} frames > ${JANK_FRAME_MS} ms${last.longTaskAt ? ` [long tasks at ${last.longTaskAt} ms]` : ""}`,
      );
    }
    samples.push(await idleRun(ctx, last!.sid, median(samples.filter((s) => s.variant === "batched").map((s) => s.ms))));
  }
} finally {
  await ctx.close();
  await engine.stop();
  await replay.close();
}

const of = (v: string) => samples.filter((s) => s.variant === v);
const med = (v: string, k: keyof Sample) => median(of(v).map((s) => Number(s[k])));
console.log(`\n## Console: a streamed reply of ${DELTAS} deltas (${GAP_MS} ms apart), medians of ${RUNS} runs\n`);
console.log(
  "| variant | stream → answer rendered | deltas | long tasks | long-task time | longest task | frames | p99 frame | frames > 50 ms |",
);
console.log("|---|--:|--:|--:|--:|--:|--:|--:|--:|");
for (const v of ["batched", "each event", "idle"]) {
  console.log(
    `| ${v} | ${fmt(med(v, "ms"), 0)} ms | ${fmt(med(v, "deltas"), 0)} | ${fmt(med(v, "longTasks"), 0)} | ${fmt(med(v, "longTaskMs"), 0)} ms | ${fmt(med(v, "maxLongTaskMs"), 0)} ms | ${fmt(med(v, "frames"), 0)} | ${fmt(med(v, "p99FrameMs"), 1)} ms | ${fmt(med(v, "jankFrames"), 0)} |`,
  );
}
const ratio = (a: number, b: number) => (b > 0 ? `${fmt(a / b, 2)}×` : a === 0 ? "equal (both 0)" : "∞ (baseline 0)");
if (failedTurns > 0) console.log(`\n${failedTurns} turn(s) failed and were run again.`);
console.log(
  `\nbatched / each event: long-task time ${ratio(med("batched", "longTaskMs"), med("each event", "longTaskMs"))}, p99 frame ${ratio(med("batched", "p99FrameMs"), med("each event", "p99FrameMs"))}; batched / idle p99 frame ${ratio(med("batched", "p99FrameMs"), med("idle", "p99FrameMs"))}`,
);
