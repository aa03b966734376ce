// What the WebSocket benches share: the run settings every one reads from the environment, a
// `ws` socket opener, and the closed-loop caller (N sockets, one invokefunction outstanding on
// each; round trips per second and latency over a recorded window after a warm-up). Used by
// run.mjs, trace-bench.mjs, shards-bench.ts, queue-flood-bench.ts (plain TS, no package imports:
// runs under `node` with or without --conditions=iii-edge-source).
import WebSocket from "ws";
import { pct } from "./stats.ts";

/** Recorded milliseconds per measurement, the warm-up before it, and runs per bench (medians of these). */
export const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 3000);
export const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? 1000);
export const RUNS = Number(process.env.BENCH_RUNS ?? 3);
/** How long the callers may take to see their last answer once the window closed. */
const DRAIN_MS = 5000;
/** How many characters of a failed answer the first-failure warning shows. */
const FAILURE_SNIPPET = 300;

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A `ws` socket (no compression), resolved once open. */
export function openWs(url: string, headers: Record<string, string> = {}): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, headers });
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
  });
}

/** One caller's socket as the loop sees it: send a text frame, hear text frames (binary as ""). */
export interface Channel {
  send(text: string): void;
  onText(fn: (text: string) => void): void;
}

/** A `ws` socket as a Channel; binary frames arrive as "". One listener per socket, whose handler
 * `onText` replaces: the socket can serve one closed-loop window after another. */
export const wsChannel = (ws: WebSocket): Channel => {
  let handler: (text: string) => void = () => {};
  ws.on("message", (raw, isBinary) => handler(isBinary ? "" : raw.toString()));
  return { send: (text) => ws.send(text), onText: (fn) => (handler = fn) };
};

/** Flags a measurement loop reads on every answer. */
export interface Window {
  recording: boolean;
  running: boolean;
}

/**
 * Waits `warmupMs`, records for `durationMs` (sets `w.recording`), then stops the loops
 * (`w.running = false`); the recorded milliseconds.
 */
export async function timedWindow(w: Window, warmupMs: number, durationMs: number): Promise<number> {
  await sleep(warmupMs);
  w.recording = true;
  const t0 = performance.now();
  await sleep(durationMs);
  w.recording = false;
  const elapsed = performance.now() - t0;
  w.running = false;
  return elapsed;
}

export interface ClosedLoopOptions {
  /** The frame caller `i` sends as its `seq`-th call (seq from 1). */
  frame: (i: number, seq: number) => string;
  /** Whether a received text is the answer to the outstanding call; default: an invocationresult. */
  isAnswer?: (text: string) => boolean;
  /** Whether an answer is a failure (counted); default: it carries an "error". */
  isFailure?: (text: string) => boolean;
  /** When set, the first failure is printed as `  <label>: <answer…>`. */
  failureLabel?: string;
  warmupMs?: number;
  durationMs?: number;
}

export interface ClosedLoopResult {
  rps: number;
  p50: number;
  p99: number;
  /** Answers recorded in the window. */
  count: number;
  /** Failed answers, warm-up included. */
  failures: number;
}

const isInvocationResult = (text: string) => text.includes('"invocationresult"');
const carriesError = (text: string) => text.includes('"error"');

/**
 * One call outstanding on each channel (closed loop: the next sent when the answer arrives) for
 * `durationMs` after `warmupMs`. Latency is send → answer. The caller opens and closes the sockets.
 */
export async function closedLoop(channels: Channel[], opts: ClosedLoopOptions): Promise<ClosedLoopResult> {
  const { frame, isAnswer = isInvocationResult, isFailure = carriesError, failureLabel } = opts;
  const w: Window = { recording: false, running: true };
  const latencies: number[] = [];
  let failures = 0;
  const loops = channels.map(
    (ch, i) =>
      new Promise<void>((resolve) => {
        let seq = 0;
        let sentAt = 0;
        const send = () => {
          seq++;
          const text = frame(i, seq);
          sentAt = performance.now();
          ch.send(text);
        };
        ch.onText((text) => {
          if (!isAnswer(text)) return;
          if (isFailure(text) && ++failures === 1 && failureLabel) console.warn(`  ${failureLabel}: ${text.slice(0, FAILURE_SNIPPET)}`);
          if (w.recording) latencies.push(performance.now() - sentAt);
          if (w.running) send();
          else resolve();
        });
        send();
      }),
  );
  const elapsed = await timedWindow(w, opts.warmupMs ?? WARMUP_MS, opts.durationMs ?? DURATION_MS);
  await Promise.race([Promise.all(loops), sleep(DRAIN_MS)]);
  return { rps: (latencies.length / elapsed) * 1000, p50: pct(latencies, 50), p99: pct(latencies, 99), count: latencies.length, failures };
}

/** Runs a bench's `main` and exits 0, or prints the error and exits 1. */
export function runMain(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
