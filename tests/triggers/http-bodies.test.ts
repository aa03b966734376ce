// Large http request bodies through the real front door and Engine object: past the frame bound, a
// body with a Content-Length is streamed through `request_body` as it arrives (the function gets
// `body: null`), a declared length over HTTP_MAX_BODY_BYTES is refused without being read, and an
// upload that fails midway is not answered as if it were whole.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { RawWorker, eventually } from "./raw-worker.ts";

const MiB = 1024 * 1024;
/** wrangler.toml's HTTP_MAX_BODY_BYTES (the default, 16 MiB). */
const MAX_BODY = 16 * MiB;
/** The engine writes a streamed body in items of this size (hub.ts REQUEST_BODY_ITEM_BYTES). */
const ITEM = 64 * 1024;

const post = (path: string, init: RequestInit) => exports.default.fetch(`http://127.0.0.1:8787${path}`, { method: "POST", ...init });
type Ref = { channel_id: string; access_key: string };

/** Attach to a channel's read end and take everything until the engine closes it. */
async function readAll(
  ref: Ref,
  onOpen?: () => void,
): Promise<{ bytes: number; items: number; sum: number; code: number; reason: string }> {
  const res = await exports.default.fetch(`http://127.0.0.1:8787/ws/channels/${ref.channel_id}?key=${ref.access_key}&dir=read`, {
    headers: { Upgrade: "websocket" },
  });
  const ws = res.webSocket;
  if (!ws) throw new Error(`no reader socket: ${res.status}`);
  ws.binaryType = "arraybuffer";
  ws.accept();
  let bytes = 0;
  let items = 0;
  let sum = 0;
  ws.addEventListener("message", (e) => {
    if (typeof e.data === "string") throw new Error(`a text item in request_body: ${e.data.slice(0, 80)}`);
    const b = new Uint8Array(e.data as ArrayBuffer);
    items++;
    bytes += b.byteLength;
    for (let i = 0; i < b.byteLength; i += 4096) sum += b[i]!;
  });
  const done = new Promise<{ bytes: number; items: number; sum: number; code: number; reason: string }>((resolve) =>
    ws.addEventListener("close", (e) => resolve({ bytes, items, sum, code: e.code, reason: e.reason })),
  );
  onOpen?.();
  return done;
}

/** `total` bytes, each 4096th byte its chunk's number; optionally failing after `failAfter` bytes,
 * once `gate` has opened. */
function upload(
  total: number,
  failAfter?: number,
  gate?: Promise<void>,
): { body: ReadableStream<Uint8Array>; pulled: () => number; sum: () => number } {
  let pulled = 0;
  let sum = 0;
  let n = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(c) {
      if (failAfter !== undefined && pulled >= failAfter) {
        await gate;
        return c.error(new Error("client went away"));
      }
      if (pulled >= total) return c.close();
      const chunk = new Uint8Array(Math.min(ITEM, total - pulled)).fill(++n % 251);
      for (let i = 0; i < chunk.byteLength; i += 4096) sum += chunk[i]!;
      pulled += chunk.byteLength;
      c.enqueue(chunk);
    },
  });
  return { body, pulled: () => pulled, sum: () => sum };
}

describe("http request bodies past the frame bound", () => {
  it("stream through request_body item by item: the function gets body null and every byte, then stream_complete", async () => {
    const w = await RawWorker.connect("default");
    const seen: { body: unknown }[] = [];
    w.fn("big::read", async (req) => {
      const r = req as { body: unknown; request_body: Ref };
      seen.push({ body: r.body });
      return { body: await readAll(r.request_body) };
    });
    w.trigger("http", "big::read", { api_path: "/big/read", http_method: "POST" });
    await w.settle();
    const size = 3 * MiB + 17;
    const up = upload(size);
    const res = await post("/big/read", { body: up.body, headers: { "content-type": "application/json", "content-length": String(size) } });
    expect(res.status).toBe(200);
    const got = (await res.json()) as { bytes: number; items: number; sum: number; code: number; reason: string };
    expect(got).toMatchObject({ bytes: size, sum: up.sum(), code: 1000, reason: "stream_complete" });
    // Gathered into 64 KiB items (the upload arrives in smaller pieces).
    expect(got.items).toBe(Math.ceil(size / ITEM));
    // Too large for the invocation frame: not parsed, even with a JSON content type.
    expect(seen[0]?.body).toBeNull();
    await w.close();
  });

  it("an upload that fails before its Content-Length is answered 400, and its reader is told 1011", async () => {
    const w = await RawWorker.connect("default");
    const ends: { code: number; reason: string }[] = [];
    let attached!: () => void;
    const gate = new Promise<void>((r) => (attached = r));
    w.fn("big::slow", async (req) => {
      // The upload fails once the function is reading it.
      const end = await readAll((req as { request_body: Ref }).request_body, attached);
      ends.push(end);
      // A function that answers only later: the failed upload is answered first.
      await new Promise((r) => setTimeout(r, 2_000));
      return { body: { read: end.bytes } };
    });
    w.trigger("http", "big::slow", { api_path: "/big/slow", http_method: "POST" });
    await w.settle();
    const up = upload(4 * MiB, 2 * MiB, gate);
    const t0 = Date.now();
    const res = await post("/big/slow", { body: up.body, headers: { "content-length": String(4 * MiB) } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: "invalid_arguments",
      message: expect.stringMatching(/request body/),
    });
    expect(Date.now() - t0).toBeLessThan(1_500);
    await eventually(() => ends.length === 1, 5_000, "the reader's end");
    expect(ends[0]).toMatchObject({ code: 1011, reason: "request_body_incomplete" });
    await w.close();
  });

  it("a declared length over HTTP_MAX_BODY_BYTES is refused 413 long before it is sent; the function never runs", async () => {
    const w = await RawWorker.connect("default");
    let called = 0;
    w.fn("big::never", () => {
      called++;
      return {};
    });
    w.trigger("http", "big::never", { api_path: "/big/never", http_method: "POST" });
    await w.settle();
    const up = upload(MAX_BODY + 1);
    const res = await post("/big/never", { body: up.body, headers: { "content-length": String(MAX_BODY + 1) } });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: "value_too_large",
      message: expect.stringMatching(/HTTP_MAX_BODY_BYTES/),
    });
    // Dropped up to the inline bound (1 MiB), then cancelled: far from all of it.
    expect(up.pulled()).toBeLessThan(2 * MiB);
    expect(called).toBe(0);
    await w.close();
  });
});
