import { exports } from "cloudflare:workers";
import { afterAll, describe, expect, it } from "vitest";
import {
  BYTE_BURST,
  CHANNEL_FRAME_BURST,
  FLOOD_CLOSE_CODE,
  FLOOD_GRACE_MS,
  FRAME_BURST,
  FRAMES_PER_SECOND,
  MAX_FRAME_BYTES,
  MAX_JSON_DEPTH,
  STREAM_SOCKET_FRAME_BURST,
  STREAM_SOCKET_FRAMES_PER_SECOND,
} from "@iii-edge/protocol";
import { Wires, deliverInOneInstant, engineStub, sleep, uuid, type Frame } from "./wire.ts";

const wires = new Wires();
afterAll(() => wires.closeAll());

/** Hand `frames` to the object's webSocketMessage for the socket whose attachment matches, all in
 * one event. */
/** Frames delivered to the engine object in one instant of its clock (wire.ts). */
const inObject = deliverInOneInstant;

/** A socket opened on `path` that records its frames and its close. */
async function open(path: string) {
  // (localhost: an engine without AUTH_SECRET serves these sockets to loopback clients only)
  const res = await exports.default.fetch(`http://localhost${path}`, { headers: { Upgrade: "websocket" } });
  if (res.status !== 101 || !res.webSocket) throw new Error(`upgrade of ${path} failed: ${res.status}`);
  const ws = res.webSocket;
  ws.accept();
  const s = { ws, items: [] as string[], closed: null as { code: number; reason: string } | null };
  ws.addEventListener("message", (ev) => s.items.push(typeof ev.data === "string" ? ev.data : "(binary)"));
  ws.addEventListener("close", (ev) => (s.closed = { code: ev.code, reason: ev.reason }));
  return s;
}

async function until(check: () => boolean, what: string, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const pong = '{"type":"pong"}';
const call = (id: string, data: unknown = { scope: "budget", key: "k" }) =>
  JSON.stringify({ type: "invokefunction", invocation_id: id, function_id: "state::get", data });

describe("a worker connection", () => {
  it("over its frame budget: dropped calls answered, told rate_limited once a second, closed 1008 after FLOOD_GRACE_MS", async () => {
    const w = await wires.connect();
    const mine = (a: Record<string, unknown>) => a.worker_id === w.workerId;
    // The burst is admitted whole; of the 5 000 calls after it most are dropped, and every one of
    // them is answered.
    const ids = Array.from({ length: 5_000 }, () => uuid());
    await inObject(mine, [...Array.from({ length: FRAME_BURST }, () => pong), ...ids.map((id) => call(id))]);
    const results = await Promise.all(ids.map((id) => w.next((f) => f.type === "invocationresult" && f.invocation_id === id)));
    expect(results.filter((r) => r.error?.code === "rate_limited").length).toBeGreaterThan(2_500);
    expect(w.all("error").filter((f) => f.error.code === "rate_limited")).toHaveLength(1);
    // Then it keeps sending twice as fast as it refills (a batch every 500 ms of a second's worth):
    // told again a second later, closed once FLOOD_GRACE_MS have passed since it was first told.
    for (let t = 500; t <= FLOOD_GRACE_MS + 1_000 && !w.closed; t += 500) {
      await sleep(500);
      await inObject(
        mine,
        Array.from({ length: FRAMES_PER_SECOND }, () => pong),
      ).catch(() => {});
    }
    expect(await w.waitClosed(5_000)).toBe(true);
    expect(w.closed).toMatchObject({ code: FLOOD_CLOSE_CODE, reason: expect.stringContaining("flooding") });
    expect(w.all("error").filter((f) => f.error.code === "rate_limited").length).toBeGreaterThanOrEqual(2);
  });

  it("over its byte budget: the calls past BYTE_BURST are dropped and answered", async () => {
    const w = await wires.connect();
    const pad = "p".repeat(MAX_FRAME_BYTES / 2);
    const n = Math.ceil(BYTE_BURST / pad.length) + 5;
    const ids = Array.from({ length: n }, () => uuid());
    await inObject(
      (a) => a.worker_id === w.workerId,
      ids.map((id) => call(id, { scope: "budget", key: "k", pad })),
    );
    const results = await Promise.all(ids.map((id) => w.next((f) => f.type === "invocationresult" && f.invocation_id === id)));
    const limited = results.filter((r) => r.error?.code === "rate_limited").length;
    expect(limited).toBeGreaterThanOrEqual(1);
    expect(limited).toBeLessThanOrEqual(5);
    expect(w.closed).toBeNull();
  });

  it(`a call over MAX_FRAME_BYTES is answered with frame_too_large`, async () => {
    const w = await wires.connect();
    const invocation_id = uuid();
    w.send(
      JSON.stringify({
        type: "invokefunction",
        invocation_id,
        function_id: "state::set",
        data: { scope: "budget", key: "big", value: "z".repeat(MAX_FRAME_BYTES) },
      }),
    );
    const r = await w.next((f: Frame) => f.type === "invocationresult" && f.invocation_id === invocation_id);
    expect(r).toMatchObject({ function_id: "state::set", error: { code: "frame_too_large" } });
    expect((await w.ok("state::get", { scope: "budget", key: "big" })) ?? null).toBeNull();
  });
});

describe("a channel end", () => {
  it(`a writer past CHANNEL_FRAME_BURST (${CHANNEL_FRAME_BURST}) is closed 1008 at once, and its reader with it`, async () => {
    const w = await wires.connect();
    const refs = (await w.ok("engine::channels::create", {})) as { writer: Frame; reader: Frame };
    const path = (r: Frame) => `/ws/channels/${r.channel_id}?key=${encodeURIComponent(r.access_key)}&dir=${r.direction}`;
    const reader = await open(path(refs.reader));
    const writer = await open(path(refs.writer));
    await sleep(20); // the ends are attached once their 101 is out
    await inObject(
      (a) => a.kind === "channel" && a.dir === "write" && a.channel_id === refs.writer.channel_id,
      Array.from({ length: 2 * CHANNEL_FRAME_BURST }, (_, i) => `chunk ${i}`),
    );
    await until(() => writer.closed !== null && reader.closed !== null, "both ends closed");
    expect(writer.closed).toMatchObject({ code: FLOOD_CLOSE_CODE, reason: expect.stringContaining("flooding") });
    expect(reader.closed).toMatchObject({ code: FLOOD_CLOSE_CODE });
    // What was admitted (the burst, and what the clock refilled meanwhile) was delivered in order;
    // nothing after the cut.
    expect(reader.items.length).toBeGreaterThanOrEqual(CHANNEL_FRAME_BURST);
    expect(reader.items.length).toBeLessThan(2 * CHANNEL_FRAME_BURST);
    expect(reader.items.slice(0, 3)).toEqual(["chunk 0", "chunk 1", "chunk 2"]);
  });
});

describe("a browser stream socket", () => {
  it("kept over its budget is closed 1008 after FLOOD_GRACE_MS (no error frame to warn with: dropped until then)", async () => {
    const s = await open("/_iii/streams");
    const mine = (a: Record<string, unknown>) => a.kind === "stream";
    await inObject(
      mine,
      Array.from({ length: STREAM_SOCKET_FRAME_BURST + 50 }, (_, i) => `{junk ${i}`),
    );
    expect(s.closed).toBeNull();
    for (let t = 500; t <= FLOOD_GRACE_MS + 500 && !s.closed; t += 500) {
      await sleep(500);
      await inObject(
        mine,
        Array.from({ length: STREAM_SOCKET_FRAMES_PER_SECOND }, (_, i) => `{junk ${i}`),
      ).catch(() => {});
    }
    await until(() => s.closed !== null, "the stream socket closed");
    expect(s.closed).toMatchObject({ code: FLOOD_CLOSE_CODE, reason: expect.stringContaining("flooding") });
  });
});

describe("nesting", () => {
  const deep = (n: number): unknown => {
    let v: unknown = 1;
    for (let i = 0; i < n; i++) v = [v];
    return v;
  };

  it("a frame nested past MAX_JSON_DEPTH is refused, its call answered", async () => {
    const w = await wires.connect();
    w.send(
      `{"type":"invokefunction","invocation_id":"deep","function_id":"state::set","data":{"scope":"budget","key":"d","value":${"[".repeat(10_000)}1${"]".repeat(10_000)}}}`,
    );
    const r = await w.next((f) => f.type === "invocationresult" && f.invocation_id === "deep");
    expect(r.error).toMatchObject({ code: "invalid_frame", message: expect.stringContaining("MAX_JSON_DEPTH") });
  });

  it("state::set over RPC (no frame in between) refuses a value deeper than MAX_JSON_DEPTH; one at the limit is stored", async () => {
    const tooDeep = await engineStub().trigger({
      function_id: "state::set",
      payload: { scope: "budget", key: "d", value: deep(MAX_JSON_DEPTH + 1) },
    });
    expect(tooDeep).toMatchObject({ ok: false, error: { code: "invalid_input", message: expect.stringContaining("MAX_JSON_DEPTH") } });
    expect(await engineStub().trigger({ function_id: "state::get", payload: { scope: "budget", key: "d" } })).toEqual({
      ok: true,
      result: undefined,
    });
    const atLimit = deep(MAX_JSON_DEPTH);
    expect(await engineStub().trigger({ function_id: "state::set", payload: { scope: "budget", key: "d", value: atLimit } })).toMatchObject(
      { ok: true },
    );
    expect(await engineStub().trigger({ function_id: "state::get", payload: { scope: "budget", key: "d" } })).toEqual({
      ok: true,
      result: atLimit,
    });
    // state::update too.
    const upd = await engineStub().trigger({
      function_id: "state::update",
      payload: { scope: "budget", key: "u", ops: [{ type: "set", path: "", value: deep(MAX_JSON_DEPTH + 1) }] },
    });
    expect(upd).toMatchObject({ ok: false, error: { code: "invalid_input" } });
  });
});
