// Hostile frames and open-call bounds on the engine core served in this process: a binary frame
// that is not UTF-8, a call or a result over MAX_FRAME_BYTES, and one target held by callers
// flooding it. Each is answered with a typed error, at once, and the sockets stay usable.
// tests/security/floods.test.ts keeps the floods (the runtime's dispatch under load, /healthz, the
// workerd process's memory), a text frame's invalid UTF-8 (workerd's decoding) and the depth bound
// over HTTP; tests/security/limits.test.ts keeps the per-caller flood (with /healthz and the queue
// beside it) and the connection bounds of the front door.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_FRAME_BYTES } from "@iii-edge/protocol";
import { MAX_OPEN_CALLS_PER_CALLER, MAX_OPEN_CALLS_PER_TARGET } from "@iii-edge/engine-do/core/bounds.ts";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import { NO_REPLY, RawSocket, flood, type Frame } from "@iii-edge/test-support/raw-socket";
import { eventually } from "@iii-edge/test-support/wait";

let engine: NodeEngine;
const opened: { close(): unknown }[] = [];

async function connect(): Promise<RawSocket> {
  const s = await RawSocket.open(`${engine.wsUrl}/`);
  opened.push(s);
  return s;
}

/** A socket that sends raw bytes and records every text frame it gets back. */
async function rawSocket(): Promise<{ ws: WebSocket; frames: Frame[]; closed: () => boolean }> {
  const ws = new WebSocket(`${engine.wsUrl}/`);
  ws.binaryType = "arraybuffer";
  const frames: Frame[] = [];
  let closed = false;
  ws.addEventListener("message", (ev) => {
    if (typeof ev.data === "string") frames.push(JSON.parse(ev.data) as Frame);
  });
  ws.addEventListener("close", () => (closed = true));
  opened.push({ close: () => ws.close() });
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve(), { once: true });
    ws.addEventListener("error", () => reject(new Error("could not open /")), { once: true });
  });
  return { ws, frames, closed: () => closed };
}

beforeAll(async () => {
  engine = await startNodeEngine();
});
afterAll(async () => {
  for (const s of opened) await Promise.race([s.close(), new Promise((r) => setTimeout(r, 1_000))]);
  await engine?.stop();
});

describe("hostile frames", () => {
  it("a binary frame that is not UTF-8 is refused as invalid_frame", async () => {
    const f = await rawSocket();
    const bytes = new Uint8Array([
      ...new TextEncoder().encode(
        '{"type":"invokefunction","invocation_id":"bin-1","function_id":"state::get","data":{"scope":"x","key":"\u00e9',
      ),
      0xff,
      ...new TextEncoder().encode('"}}'),
    ]);
    f.ws.send(bytes.buffer as ArrayBuffer);
    await eventually(() => f.frames.find((x) => x.type === "error"), 10_000, "an error frame");
    expect(f.frames.find((x) => x.type === "error")?.error).toMatchObject({ code: "invalid_frame", message: "frame is not valid UTF-8" });
    expect(f.closed()).toBe(false);
  });

  it(`a call over MAX_FRAME_BYTES (${MAX_FRAME_BYTES}) gets its invocationresult: frame_too_large`, async () => {
    const s = await connect();
    const invocation_id = randomUUID();
    s.send({
      type: "invokefunction",
      invocation_id,
      function_id: "state::set",
      data: { scope: "flood", key: "big", value: "z".repeat(MAX_FRAME_BYTES + 1_000) },
    });
    const r = await s.next((f) => f.type === "invocationresult" && f.invocation_id === invocation_id);
    expect(r).toMatchObject({ function_id: "state::set", error: { code: "frame_too_large" } });
    expect(await s.ok("state::get", { scope: "flood", key: "big" })).toBeUndefined();
    expect(s.closed).toBe(false);
  });

  it(`a result over MAX_FRAME_BYTES (${MAX_FRAME_BYTES}) ends its call at once with result_too_large, not at the deadline`, async () => {
    const worker = await connect();
    worker.serve("big::answer", () => "z".repeat(MAX_FRAME_BYTES + 1_000));
    const caller = await connect();
    await eventually(
      async () => (await caller.call("engine::functions::info", { function_id: "big::answer" })).result !== undefined,
      10_000,
      "big::answer registered",
      20,
    );
    const started = Date.now();
    // The call's own deadline is 30 s: an answer well inside it is the engine's, not the timer's.
    const r = await caller.call("big::answer", {}, { timeout_ms: 30_000 }, 20_000);
    expect(r.error).toMatchObject({ code: "result_too_large" });
    expect(Date.now() - started).toBeLessThan(10_000);
    // The answering worker is told its frame was refused, and stays connected.
    expect((await worker.next((f) => f.type === "error" && f.error?.code === "frame_too_large")).error.code).toBe("frame_too_large");
    expect(worker.closed).toBe(false);
  });
});

describe("open calls are bounded", () => {
  it("one target collects at most MAX_OPEN_CALLS_PER_TARGET calls from all callers together", async () => {
    const hung = await connect();
    hung.serve("slow::target", () => NO_REPLY);
    const callers = [await connect(), await connect(), await connect()];
    await eventually(
      async () => (await callers[0]!.call("engine::functions::info", { function_id: "slow::target" })).result,
      10_000,
      "slow::target",
    );
    const floods = callers.map((c) => flood(c, "slow::target", MAX_OPEN_CALLS_PER_CALLER));
    await eventually(
      () => {
        const refused = callers.reduce((n, c) => n + c.received.filter((f) => f.error?.code === "too_many_calls").length, 0);
        return refused >= 3 * MAX_OPEN_CALLS_PER_CALLER - MAX_OPEN_CALLS_PER_TARGET;
      },
      30_000,
      "per-target refusals",
    );
    await hung.close();
    const results = (await Promise.all(floods)).flat();
    expect(results.filter((r) => r.error?.code === "invocation_stopped").length).toBe(MAX_OPEN_CALLS_PER_TARGET);
  });
});
