// Floods and hostile frames against `npm start`
// with AUTH_SECRET, every socket with a token: a burst of 4 × 15 000 junk frames, a socket that
// keeps flooding, channel and stream socket floods — /healthz keeps answering, a well-behaved
// worker's calls keep being answered, the flooders are told (`rate_limited`) or closed (1008), the
// engine's memory stays bounded and nothing registered or stored changes. Then a text frame with
// invalid UTF-8 (workerd decodes it) and values nested past MAX_JSON_DEPTH, also over HTTP. A binary
// frame that is not UTF-8 and a call or result over MAX_FRAME_BYTES are engine-core behaviour:
// tests/unit/hostile-frames.test.ts runs them on the engine core in-process.
//
// The engine runs with X_LOCAL_OBSERVABILITY=false: wrangler dev's local trace collector (on by
// default in wrangler 4.156) costs the runtime so much per WebSocket event, before the engine's
// code runs, that a do-nothing Durable Object is stopped by the same burst
// (tests/bench/ws-sink/README.md). That is the runtime's part; what is tested here is the engine's.
import http from "node:http";
import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync, readdirSync, readlinkSync } from "node:fs";
import type { Socket as NetSocket } from "node:net";
import { Worker } from "node:worker_threads";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FLOOD_CLOSE_CODE, MAX_JSON_DEPTH } from "@iii-edge/protocol";
import { TEST_AUTH_SECRET, bearer, token } from "@iii-edge/test-support/auth";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { RawSocket, type Frame } from "@iii-edge/test-support/raw-socket";
import { eventually } from "@iii-edge/test-support/wait";

let engine: EngineServer;
const opened: { close(): Promise<void> | void }[] = [];

/** /healthz (and a well-behaved worker's call) must answer within this during and after every
 * socket that keeps flooding. Measured on the 2-core box: 0.1–1.1 s, and 5 s leaves room for other
 * suites running beside this one. Before the fix nothing answered for over 3 minutes. */
const HEALTH_BOUND_MS = 5_000;
/** The same during the 60 000-frame burst, which the object handles in arrival order: its floor is
 * the runtime's own dispatch of 60 000 messages (a do-nothing object's worst poll: 1.4–2.2 s alone,
 * tests/bench/README.md "Floods"), and with two other suites beside it on the clean-clone run the
 * engine took 5.9 s for the whole burst and its worst poll was 5.4 s. 10 s still fails the class of
 * regression this guards against (minutes without an answer). How far above the floor the engine is
 * is the flood bench's to say, as a ratio to that do-nothing object. */
const BURST_HEALTH_BOUND_MS = 10_000;
/** How much the engine's workerd may grow during a flood (it grew 146 → 1 388 MiB before). */
const RSS_GROWTH_BOUND_MIB = 256;

// ------------------------------------------------------------------ helpers

/** A socket that sends raw text and records everything, including how it was closed. */
class Flooder {
  readonly frames: Frame[] = [];
  closed: { code: number; reason: string } | null = null;
  readonly ws: WebSocket;
  private constructor(ws: WebSocket) {
    this.ws = ws;
    ws.binaryType = "arraybuffer";
    ws.addEventListener("message", (ev) => {
      if (typeof ev.data !== "string") return;
      try {
        this.frames.push(JSON.parse(ev.data) as Frame);
      } catch {
        this.frames.push({ raw: ev.data });
      }
    });
    ws.addEventListener("close", (ev) => (this.closed = { code: ev.code, reason: ev.reason }));
  }
  static async open(path: string, sub: string): Promise<Flooder> {
    const ws = new WebSocket(`${engine.wsUrl}${path}`, { headers: bearer(await token(sub)) } as unknown as string[]);
    const f = new Flooder(ws);
    opened.push({ close: () => f.close() });
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener("open", () => resolve(), { once: true });
      ws.addEventListener("error", () => reject(new Error(`could not open ${path}`)), { once: true });
    });
    return f;
  }
  send(raw: string | ArrayBuffer): boolean {
    if (this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(raw);
    return true;
  }
  /** Everything handed to the socket has left the process. */
  async drained(): Promise<void> {
    await eventually(() => this.ws.readyState !== WebSocket.OPEN || this.ws.bufferedAmount === 0, 30_000, "the send buffer drained", 5);
  }
  rateLimited(): boolean {
    return this.frames.some((f) => f.type === "error" && f.error?.code === "rate_limited");
  }
  close(): void {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.close(1000, "done");
  }
  /** Close and wait until it is closed: under wrangler dev every message a still-open hibernatable
   * socket has received makes each later message of the object dearer (tests/bench/ws-sink), so a
   * burst's sockets are gone before the next flood is measured. */
  async closeAndWait(): Promise<void> {
    this.close();
    await eventually(() => this.closed !== null, 15_000, "the socket closed", 20).catch(() => {});
  }
}

async function connect(sub: string): Promise<RawSocket> {
  const s = await RawSocket.open(engine.wsUrl, bearer(await token(sub)));
  opened.push(s);
  return s;
}

async function invokeHttp(function_id: string, payload: unknown): Promise<{ status: number; body: Frame }> {
  const res = await fetch(`${engine.url}/_iii/invoke`, {
    method: "POST",
    headers: { "content-type": "application/json", ...bearer(await token("http-caller")) },
    body: JSON.stringify({ function_id, payload }),
  });
  return { status: res.status, body: (await res.json()) as Frame };
}

/** Polls /healthz every 100 ms while a flood runs; `stop()` gives the slowest answer. */
/** The poller's own thread: the burst's send loop blocks this one for seconds, and a poll that
 * waited for it would measure the test instead of the engine. */
const HEALTH_POLLER = `
const { parentPort, workerData } = require("node:worker_threads");
let running = true, worst = 0, failures = 0, samples = 0;
parentPort.on("message", () => (running = false));
(async () => {
  while (running) {
    const t = Date.now();
    try {
      const res = await fetch(workerData.url, { signal: AbortSignal.timeout(10000) });
      if (!res.ok) failures++;
      await res.arrayBuffer();
    } catch {
      failures++;
    }
    worst = Math.max(worst, Date.now() - t);
    samples++;
    await new Promise((r) => setTimeout(r, 100));
  }
  parentPort.postMessage({ worst, failures, samples });
})();
`;

function watchHealth() {
  const poller = new Worker(HEALTH_POLLER, { eval: true, workerData: { url: `${engine.url}/healthz` } });
  const result = new Promise<{ worst: number; failures: number; samples: number }>((resolve, reject) => {
    poller.once("message", resolve);
    poller.once("error", reject);
  });
  return {
    async stop() {
      poller.postMessage("stop");
      const r = await result;
      await poller.terminate();
      return r;
    },
  };
}

/** The workerd process that runs the engine: wrangler's proxy workerd listens on the port; the
 * engine's runtime is the other workerd of the same process group. Undefined where /proc cannot
 * tell (the RSS assertion is then skipped, saying so). */
function engineWorkerd(): number | undefined {
  try {
    const hex = `:${engine.port.toString(16).toUpperCase().padStart(4, "0")}`;
    const inodes = new Set<string>();
    for (const f of ["/proc/net/tcp", "/proc/net/tcp6"]) {
      for (const line of readFileSync(f, "utf8").split("\n").slice(1)) {
        const p = line.trim().split(/\s+/);
        if (p[1]?.endsWith(hex) && p[3] === "0A" && p[9]) inodes.add(p[9]);
      }
    }
    const pids = readdirSync("/proc")
      .filter((d) => /^\d+$/.test(d))
      .map(Number);
    const stat = (pid: number) => readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    const isWorkerd = (pid: number) => readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "workerd";
    const proxy = pids.find((pid) => {
      try {
        return (
          isWorkerd(pid) &&
          readdirSync(`/proc/${pid}/fd`).some((fd) => inodes.has(/socket:\[(\d+)\]/.exec(readlinkSafe(`/proc/${pid}/fd/${fd}`))?.[1] ?? ""))
        );
      } catch {
        return false;
      }
    });
    if (proxy === undefined) return undefined;
    const group = stat(proxy)[2];
    return pids.find((pid) => {
      try {
        return pid !== proxy && isWorkerd(pid) && stat(pid)[2] === group;
      } catch {
        return false;
      }
    });
  } catch {
    return undefined;
  }
}
function readlinkSafe(p: string): string {
  try {
    return readlinkSync(p);
  } catch {
    return "";
  }
}
const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN) / 1024;

/** Samples the engine's RSS while a flood runs; `stop()` gives the growth over the start. */
function watchMemory() {
  const pid = engineWorkerd();
  if (pid === undefined)
    return {
      async stop() {
        return undefined;
      },
    };
  const start = rssMiB(pid);
  let peak = start;
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssMiB(pid));
    } catch {
      // gone (a crash shows up in the other assertions)
    }
  }, 100);
  return {
    async stop() {
      clearInterval(timer);
      peak = Math.max(peak, rssMiB(pid));
      return { start, peak, growth: peak - start };
    },
  };
}

function assertMemory(m: { start: number; peak: number; growth: number } | undefined, what: string) {
  if (!m) {
    console.log(`${what}: RSS not checked (the engine's workerd was not found in /proc)`);
    return;
  }
  console.log(`${what}: engine RSS ${m.start.toFixed(0)} → peak ${m.peak.toFixed(0)} MiB`);
  expect(m.growth, `${what}: RSS growth`).toBeLessThan(RSS_GROWTH_BOUND_MIB);
}

/** What must not change: the functions, the trigger types and one scope of state. */
async function catalog(s: RawSocket): Promise<unknown> {
  const fns = await s.ok<{ functions: { function_id: string }[] }>("engine::functions::list", { include_internal: true });
  const state = await s.ok("state::list", { scope: "flood" });
  return { functions: fns.functions.map((f) => f.function_id).sort(), state };
}

let good: RawSocket; // a well-behaved worker serving flood::echo
let caller: RawSocket; // and a well-behaved caller
let observer: RawSocket;
let baseline: unknown;

/** The well-behaved pair keeps calling during a flood: every call answered, each within a bound. */
function keepCalling() {
  let running = true;
  let answered = 0;
  let worst = 0;
  const problems: string[] = [];
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const t = Date.now();
      try {
        const r = await caller.call("flood::echo", { i }, {}, 20_000);
        if (r.error || r.result?.i !== i) problems.push(JSON.stringify(r));
        else answered++;
      } catch (e) {
        problems.push(String(e));
      }
      worst = Math.max(worst, Date.now() - t);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { answered, worst, problems };
    },
  };
}

beforeAll(async () => {
  engine = await startEngine({ env: { AUTH_SECRET: TEST_AUTH_SECRET, X_LOCAL_OBSERVABILITY: "false" } });
  good = await connect("good-worker");
  good.serve("flood::echo", (d) => d);
  caller = await connect("good-caller");
  observer = await connect("observer");
  await observer.ok("state::set", { scope: "flood", key: "kept", value: { v: 1 } });
  await eventually(async () => (await caller.call("flood::echo", { i: -1 })).result?.i === -1, 10_000, "flood::echo registered");
  baseline = await catalog(observer);
});
afterAll(async () => {
  for (const s of opened) await Promise.race([s.close(), new Promise((r) => setTimeout(r, 1_000))]);
  await engine?.stop();
});

// ------------------------------------------------------------------ the burst

/** 4 sockets × `frames` frames at once, then until every call among them is answered. */
async function burst(sub: string, frames: number, frameOf: (i: number, f: number) => string, calls: Set<string>[]) {
  const flooders = await Promise.all([0, 1, 2, 3].map(() => Flooder.open("/", sub)));
  const health = watchHealth();
  const memory = watchMemory();
  const calling = keepCalling();
  const t0 = Date.now();
  // The frames go out as fast as the sockets take them, with a turn of the event loop every 2,000:
  // the well-behaved caller lives on this thread, and a loop that never yields would time the loop
  // (tens of seconds on a loaded box) instead of the engine's answers.
  for (let i = 0; i < frames; i++) {
    for (let f = 0; f < flooders.length; f++) flooders[f]!.send(frameOf(i, f));
    if (i % 500 === 499) await new Promise((r) => setImmediate(r));
  }
  // A last call on each: when it is answered, the socket's whole burst has been handled.
  for (let f = 0; f < flooders.length; f++) {
    const id = randomUUID();
    calls[f]!.add(id);
    flooders[f]!.send(
      JSON.stringify({ type: "invokefunction", invocation_id: id, function_id: "state::get", data: { scope: "flood", key: "kept" } }),
    );
  }
  await Promise.all(flooders.map((f) => f.drained()));
  const sentMs = Date.now() - t0;
  const answered = (f: number) => flooders[f]!.frames.filter((x) => x.type === "invocationresult" && calls[f]!.has(x.invocation_id)).length;
  await eventually(
    () => flooders.every((fl, f) => fl.closed !== null || answered(f) === calls[f]!.size),
    45_000,
    "every flooder's calls answered",
    50,
  );
  const doneMs = Date.now() - t0;
  await new Promise((r) => setTimeout(r, 500)); // and a little after
  return { flooders, sentMs, doneMs, health: await health.stop(), memory: await memory.stop(), calling: await calling.stop() };
}

describe("a burst of 4 × 15 000 frames", () => {
  it("healthz and a well-behaved worker keep answering; the flooders are told; memory stays bounded; nothing changes", async () => {
    const FRAMES = 15_000;
    const pad = "x".repeat(40);
    /** Each flooder's calls, by invocation id: every one must be answered. */
    const calls = [0, 1, 2, 3].map(() => new Set<string>());
    // ~100-byte frames, as in the finding: refused (not JSON, invalid) and ignored (unknown type),
    // and one in ten a call (to a built-in that refuses its input, or that reads state).
    const frameOf = (i: number, f: number): string => {
      const kind = i % 10;
      if (kind < 3) return `{oops ${pad}${pad}`;
      if (kind < 6) return `{"type":"teleport","pad":"${pad}${pad}"}`;
      if (kind < 9) return `{"type":"registerfunction","id":${i},"pad":"${pad}${pad}"}`;
      const id = randomUUID();
      calls[f]!.add(id);
      return i % 20 === 9
        ? JSON.stringify({ type: "invokefunction", invocation_id: id, function_id: "state::get", data: { scope: "flood", key: "kept" } })
        : JSON.stringify({
            type: "invokefunction",
            invocation_id: id,
            function_id: "state::set",
            data: { scope: 5, key: "x", value: pad },
          });
    };
    const { flooders, sentMs, doneMs, health: h, memory: m, calling: c } = await burst("flooder", FRAMES, frameOf, calls);
    console.log(
      `junk burst: sent in ${sentMs} ms, handled in ${doneMs} ms; healthz worst ${h.worst} ms over ${h.samples}; ${c.answered} well-behaved calls, worst ${c.worst} ms`,
    );

    assertMemory(m, "burst");
    expect(h.failures, "healthz failures").toBe(0);
    expect(h.worst, "slowest healthz").toBeLessThan(BURST_HEALTH_BOUND_MS);
    expect(c.problems).toEqual([]);
    expect(c.answered).toBeGreaterThan(0);
    expect(c.worst, "slowest well-behaved call").toBeLessThan(BURST_HEALTH_BOUND_MS);
    for (const [f, fl] of flooders.entries()) {
      expect(
        fl.rateLimited() || fl.closed?.code === FLOOD_CLOSE_CODE,
        `flooder ${f}: rate_limited or closed 1008 (closed: ${JSON.stringify(fl.closed)})`,
      ).toBe(true);
      if (fl.closed) continue;
      // Every call answered exactly once; state::get with its value, the refused ones with an error.
      const results = fl.frames.filter((x) => x.type === "invocationresult");
      expect(results.length, `flooder ${f}: one answer per call`).toBe(calls[f]!.size);
      for (const r of results) {
        if (r.function_id === "state::get")
          expect(r.error ?? r.result).toEqual(r.error ? expect.objectContaining({ code: "rate_limited" }) : { v: 1 });
        else expect(r.error?.code).toBeTruthy();
      }
    }
    await Promise.all(flooders.map((fl) => fl.closeAndWait()));
    await eventually(
      async () => JSON.stringify(await catalog(observer)) === JSON.stringify(baseline),
      10_000,
      "the catalog and state as before",
      100,
    );
  }, 90_000);
});

// ------------------------------------------------------------------ sockets that keep flooding

/** Send `frame` as fast as the socket takes it until the engine closes it (or `ms` pass). */
async function floodUntilClosed(f: Flooder, frame: () => string, ms = 20_000): Promise<number> {
  const end = Date.now() + ms;
  let sent = 0;
  while (!f.closed && Date.now() < end) {
    if (f.ws.bufferedAmount < 8 * 1024 * 1024) for (let i = 0; i < 64 && f.send(frame()); i++) sent++;
    await new Promise((r) => setImmediate(r));
  }
  await eventually(() => f.closed !== null, 10_000, "the flooder closed", 20).catch(() => {});
  return sent;
}

const BIG = "y".repeat(64 * 1024);

describe("a socket that keeps flooding is closed with 1008", () => {
  it("control socket: rate_limited, then closed; healthz and the well-behaved worker unaffected", async () => {
    const f = await Flooder.open("/", "flooder");
    const health = watchHealth();
    const memory = watchMemory();
    const calling = keepCalling();
    const sent = await floodUntilClosed(f, () => `{"type":"pong","pad":"${BIG}"}`);
    const h = await health.stop();
    const c = await calling.stop();
    assertMemory(await memory.stop(), "control flood");
    console.log(`control flood: ${sent} frames of 64 KiB until closed ${JSON.stringify(f.closed)}; healthz worst ${h.worst} ms`);
    expect(f.rateLimited()).toBe(true);
    expect(f.closed).toMatchObject({ code: FLOOD_CLOSE_CODE, reason: expect.stringContaining("flooding") });
    expect(h.failures).toBe(0);
    expect(h.worst).toBeLessThan(HEALTH_BOUND_MS);
    expect(c.problems).toEqual([]);
    expect(await catalog(observer)).toEqual(baseline);
  }, 60_000);

  it("channel writer: closed with 1008 (its reader told the same), nothing else disturbed", async () => {
    const refs = await caller.ok<{ writer: Frame; reader: Frame }>("engine::channels::create", { buffer_size: 64 });
    const path = (r: Frame) => `/ws/channels/${r.channel_id}?key=${encodeURIComponent(r.access_key)}&dir=${r.direction}`;
    // The reader over raw TCP: it sees the close frame itself (under wrangler dev the TCP
    // connection of a channel end the engine closed stays open 10–30 s; engine-do/README.md).
    const reader = await rawSocket(path(refs.reader), "good-caller");
    const writer = await Flooder.open(path(refs.writer), "good-caller");
    const health = watchHealth();
    const calling = keepCalling();
    // 15 000 small chunks (over CHANNEL_FRAME_BURST), then 64 KiB ones if it is still open.
    for (let i = 0; i < 15_000; i++) writer.send(`chunk ${i}`);
    const sent = await floodUntilClosed(writer, () => BIG);
    await eventually(() => reader.closed(), 10_000, "the reader's close frame", 20);
    const h = await health.stop();
    const c = await calling.stop();
    console.log(
      `channel flood: ${sent} big frames after the chunks; writer ${JSON.stringify(writer.closed)}, reader ${JSON.stringify(reader.closed())}; healthz worst ${h.worst} ms`,
    );
    // Over its budget (1008), or — if the reader fell behind first — the channel's buffer (1013).
    expect([FLOOD_CLOSE_CODE, 1013]).toContain(writer.closed?.code);
    expect([FLOOD_CLOSE_CODE, 1013]).toContain(reader.closed()?.code);
    reader.end();
    expect(h.failures).toBe(0);
    expect(h.worst).toBeLessThan(HEALTH_BOUND_MS);
    expect(c.problems).toEqual([]);
  }, 60_000);

  it("browser stream socket: closed with 1008, nothing else disturbed", async () => {
    const s = await Flooder.open("/_iii/streams", "flooder");
    const health = watchHealth();
    const calling = keepCalling();
    for (let i = 0; i < 15_000; i++)
      s.send(
        i % 2 ? `{not json ${i}` : JSON.stringify({ type: "leave", data: { subscriptionId: `s-${i}`, streamName: "fl", groupId: "g" } }),
      );
    const sent = await floodUntilClosed(s, () => BIG);
    const h = await health.stop();
    const c = await calling.stop();
    console.log(`stream flood: ${sent} big frames; closed ${JSON.stringify(s.closed)}; healthz worst ${h.worst} ms`);
    expect(s.closed).toMatchObject({ code: FLOOD_CLOSE_CODE });
    expect(h.failures).toBe(0);
    expect(h.worst).toBeLessThan(HEALTH_BOUND_MS);
    expect(c.problems).toEqual([]);
    expect(await catalog(observer)).toEqual(baseline);
  }, 60_000);
});

// ------------------------------------------------------------------ hostile frames

/** A raw WebSocket over TCP: what a browser API cannot send (a text frame that is not UTF-8). */
async function rawSocket(
  path: string,
  sub: string,
): Promise<{
  sendText(bytes: Uint8Array): void;
  next(pred: (f: Frame) => boolean, ms?: number): Promise<Frame>;
  closed(): { code: number } | null;
  end(): void;
}> {
  const headers = {
    Connection: "Upgrade",
    Upgrade: "websocket",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": randomBytes(16).toString("base64"),
    ...bearer(await token(sub)),
  };
  const [socket, head] = await new Promise<[NetSocket, Buffer]>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port: engine.port, path, headers });
    req.on("upgrade", (_res, s, h) => resolve([s as NetSocket, h]));
    req.on("response", (res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    req.on("error", reject);
    req.end();
  });
  const frames: Frame[] = [];
  let close: { code: number } | null = null;
  let buf = Buffer.alloc(0);
  const onData = (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      if (buf.length < 2) return;
      const op = buf[0]! & 0x0f;
      let len = buf[1]! & 0x7f;
      let at = 2;
      if (len === 126) [len, at] = [buf.readUInt16BE(2), 4];
      else if (len === 127) [len, at] = [Number(buf.readBigUInt64BE(2)), 10];
      if (buf.length < at + len) return;
      const payload = buf.subarray(at, at + len);
      buf = buf.subarray(at + len);
      if (op === 1) {
        const text = payload.toString("utf8");
        try {
          frames.push(JSON.parse(text) as Frame);
        } catch {
          frames.push({ raw: text });
        }
      }
      if (op === 8) close = { code: payload.length >= 2 ? payload.readUInt16BE(0) : 1005 };
    }
  };
  socket.on("data", onData);
  onData(head); // what came with the 101 (workerregistered, usually)
  opened.push({ close: () => void socket.destroy() });
  const sendText = (bytes: Uint8Array) => {
    const mask = randomBytes(4);
    const head =
      bytes.length < 126
        ? Buffer.from([0x81, 0x80 | bytes.length])
        : Buffer.from([0x81, 0x80 | 126, bytes.length >> 8, bytes.length & 0xff]);
    socket.write(Buffer.concat([head, mask, Buffer.from(bytes.map((b, i) => b ^ mask[i % 4]!))]));
  };
  const next = async (pred: (f: Frame) => boolean, ms = 10_000) => eventually(() => frames.find(pred), ms, "a frame", 10);
  return { sendText, next, closed: () => close, end: () => socket.destroy() };
}

describe("hostile frames", () => {
  it("a text frame with invalid UTF-8 arrives with U+FFFD in its place (the runtime's doing; the engine never sees the bytes)", async () => {
    // workerd decodes text frames with replacement before the object gets them, so the engine
    // cannot tell invalid bytes from a real U+FFFD and cannot close with 1007 (engine-do/README.md
    // "Bad input"). What this shows: the socket stays usable and only valid UTF-8 is stored. If
    // the runtime ever closes such a socket with 1007 itself, this test fails: update the README.
    const s = await rawSocket("/", "utf8-sender");
    await s.next((f) => f.type === "workerregistered");
    const enc = new TextEncoder();
    const head = enc.encode(
      `{"type":"invokefunction","invocation_id":"utf8-1","function_id":"state::set","data":{"scope":"utf8","key":"k","value":"A`,
    );
    const tail = enc.encode(`B"}}`);
    s.sendText(new Uint8Array([...head, 0xff, 0xc0, 0x80, ...tail]));
    const r = await s.next((f) => f.invocation_id === "utf8-1");
    expect(r.error).toBeUndefined();
    expect(s.closed()).toBeNull();
    expect(await observer.ok("state::get", { scope: "utf8", key: "k" })).toBe("A\ufffd\ufffd\ufffdB");
    // Invalid bytes where JSON needs structure: refused like any broken frame, the socket kept.
    s.sendText(new Uint8Array([0x7b, 0xff, 0x7d]));
    expect((await s.next((f) => f.type === "error")).error.code).toBe("invalid_frame");
    expect(s.closed()).toBeNull();
    await observer.ok("state::delete", { scope: "utf8", key: "k" });
    s.end();
  });

  it(`values nested past MAX_JSON_DEPTH (${MAX_JSON_DEPTH}) are refused with a typed error, never a 500`, async () => {
    const s = await connect("deep-sender");
    const deep = (n: number): unknown => {
      let v: unknown = 1;
      for (let i = 0; i < n; i++) v = [v];
      return v;
    };
    // 10 000 deep in a frame: refused where the frame is parsed, the call answered.
    const raw = `{"type":"invokefunction","invocation_id":"deep-1","function_id":"state::set","data":{"scope":"deep","key":"k","value":${"[".repeat(10_000)}1${"]".repeat(10_000)}}}`;
    (s as unknown as { ws: WebSocket }).ws.send(raw);
    const r = await s.next((f) => f.invocation_id === "deep-1");
    expect(r.error).toMatchObject({ code: "invalid_frame", message: expect.stringContaining("MAX_JSON_DEPTH") });
    // Deeper than the limit but shallow enough to travel by HTTP and RPC: refused by state::set.
    const viaHttp = await invokeHttp("state::set", { scope: "deep", key: "k", value: deep(MAX_JSON_DEPTH + 10) });
    expect(viaHttp.status, JSON.stringify(viaHttp.body)).toBe(400);
    expect(viaHttp.body.error).toMatchObject({
      code: expect.stringMatching(/^(invalid_input|invalid_arguments)$/),
      message: expect.stringContaining("nested too deeply"),
    });
    // Within the limit (with the request body and payload around it) it is stored and read back.
    const fits = deep(MAX_JSON_DEPTH - 2);
    expect((await invokeHttp("state::set", { scope: "deep", key: "ok", value: fits })).status).toBe(200);
    const back = await invokeHttp("state::get", { scope: "deep", key: "ok" });
    expect(back.status).toBe(200);
    expect(back.body.result).toEqual(fits);
    // Nothing too deep was stored, so reading never fails.
    const get = await invokeHttp("state::get", { scope: "deep", key: "k" });
    expect(get.status).toBe(200);
    await invokeHttp("state::delete", { scope: "deep", key: "ok" });
  });
});
