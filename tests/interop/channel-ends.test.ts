// The end of a channel reaches its reader at once under `npm start`, with the unmodified
// iii-sdk@0.22.1. Before: workerd kept the TCP connection of a hibernatable socket the engine had
// closed open until the object hibernated (10 s) or the client gave up (30 s), and iii-sdk's
// `ChannelReader` — like any WebSocket client — reports the end only when TCP closes, so
// `readAll()` and every http handler reading `request_body` waited 10–30 s (engine-do/
// src/channel-sockets.ts). In iii's own suite that made flows outlive their tests, which surfaced
// as errors outside any test: a handler that finally read its body wrote to a response channel
// whose request was over (a 404 on the socket the SDK opened, an `error` event nobody listens to),
// and the suite's shutdown() rejected a coordinator's not-yet-awaited call (an unhandled
// rejection).
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { http } from "@iii-dev/helpers/http";
import type { ChannelReader, ChannelWriter } from "iii-sdk/channel";
import { createChannel } from "iii-sdk/helpers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSecureEngine, token } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { invokeHttp, registered, until, worker, type Worker } from "./sdk.ts";

/** What "at once" means here: well under the keep-alive and hibernation timers that used to end
 * the wait (10–30 s). */
const PROMPT_MS = 1_000;

type Ref = { channel_id: string; access_key: string; direction: "read" | "write" };
const endUrl = (wsUrl: string, ref: Ref, dir: "read" | "write") =>
  `${wsUrl}/ws/channels/${ref.channel_id}?key=${encodeURIComponent(ref.access_key)}&dir=${dir}`;

/** A raw WebSocket (Node's own, undici) and when its `close` event came: after TCP closed. */
function open(
  url: string,
): Promise<{ ws: WebSocket; messages: (string | ArrayBuffer)[]; closed: Promise<{ code: number; reason: string; at: number }> }> {
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  const messages: (string | ArrayBuffer)[] = [];
  ws.addEventListener("message", (e) => messages.push(e.data as string | ArrayBuffer));
  const closed = new Promise<{ code: number; reason: string; at: number }>((r) =>
    ws.addEventListener("close", (e) => r({ code: e.code, reason: e.reason, at: Date.now() })),
  );
  return new Promise((resolve, reject) => {
    ws.addEventListener("open", () => resolve({ ws, messages, closed }), { once: true });
    ws.addEventListener("error", () => reject(new Error(`could not open ${url.replace(/key=[^&]+/, "key=…")}`)), { once: true });
  });
}

describe("channel ends under npm start", () => {
  let engine: EngineServer;
  let a: Worker;
  let b: Worker;

  beforeAll(async () => {
    engine = await startSecureEngine();
    a = await worker(engine.wsUrl, "ends-a");
    b = await worker(engine.wsUrl, "ends-b");
  });
  afterAll(async () => {
    await a?.shutdown();
    await b?.shutdown();
    await engine?.stop();
  });

  it("a raw reader sees every item and the close within a second of the writer's close (TCP included)", async () => {
    const created = (await (await invokeHttp(engine.url, { function_id: "engine::channels::create", payload: {} })).json()) as {
      result: { writer: Ref; reader: Ref };
    };
    const reader = await open(endUrl(engine.wsUrl, created.result.reader, "read"));
    const writer = await open(endUrl(engine.wsUrl, created.result.writer, "write"));
    writer.ws.send("a text item");
    writer.ws.send(new Uint8Array([1, 2, 3]));
    await until(() => reader.messages.length === 2, "both items at the reader");
    const closedAt = Date.now();
    writer.ws.close(1000, "stream_complete");
    const end = await reader.closed;
    expect(end).toMatchObject({ code: 1000, reason: "stream_complete" });
    expect(end.at - closedAt).toBeLessThan(PROMPT_MS);
    expect(reader.messages[0]).toBe("a text item");
    expect([...new Uint8Array(reader.messages[1] as ArrayBuffer)]).toEqual([1, 2, 3]);
  });

  it("ChannelReader.readAll() in worker B returns within a second of worker A's writer closing", async () => {
    b.registerFunction("ends::read-all", async (input: { source: ChannelReader }) => {
      const all = await input.source.readAll();
      return { at: Date.now(), length: all.length, head: all.subarray(0, 5).toString() };
    });
    await registered(a, "ends::read-all");
    const ch = await createChannel(a);
    const result = a.trigger({ function_id: "ends::read-all", payload: { source: ch.readerRef } }) as Promise<{
      at: number;
      length: number;
      head: string;
    }>;
    ch.writer.stream.write(Buffer.from("hello"));
    ch.writer.stream.write(Buffer.alloc(200_000, 7)); // several 64 KiB frames
    // The end callback runs once the SDK has closed its socket (`1000 stream_complete`).
    const closedAt = await new Promise<number>((r) => ch.writer.stream.end(() => r(Date.now())));
    const got = await result;
    expect(got).toMatchObject({ length: 200_005, head: "hello" });
    expect(got.at - closedAt).toBeLessThan(PROMPT_MS);
  });

  it("data flows both ways between two workers (a coordinator and a worker on two channels) and both ends finish at once", async () => {
    b.registerFunction("ends::words", async (input: { reader: ChannelReader; writer: ChannelWriter }) => {
      const chunks: Buffer[] = [];
      for await (const chunk of input.reader.stream) {
        chunks.push(chunk as Buffer);
        input.writer.sendMessage(JSON.stringify({ type: "progress", chunks: chunks.length }));
      }
      const words = Buffer.concat(chunks).toString().split(/\s+/).filter(Boolean);
      input.writer.stream.end(Buffer.from(JSON.stringify({ words: words.length })));
      return { status: "done" };
    });
    await registered(a, "ends::words");
    const input = await createChannel(a);
    const output = await createChannel(a);
    const progress: unknown[] = [];
    output.reader.onMessage((m) => progress.push(JSON.parse(m)));
    const started = Date.now();
    const call = a.trigger({ function_id: "ends::words", payload: { reader: input.readerRef, writer: output.writerRef } });
    for (const part of ["The quick ", "brown fox ", "jumps over ", "the lazy dog"]) input.writer.stream.write(Buffer.from(part));
    input.writer.stream.end();
    const back = await output.reader.readAll();
    expect(JSON.parse(back.toString())).toEqual({ words: 9 });
    expect(await call).toEqual({ status: "done" });
    expect(progress.length).toBeGreaterThan(0);
    expect(Date.now() - started).toBeLessThan(2 * PROMPT_MS);
  });

  it("an http handler that reads request_body to its end is answered in well under a second", async () => {
    a.registerFunction(
      "ends::upper",
      http(async (req, res) => {
        const text = (await req.request_body.readAll()).toString();
        res.status(200);
        res.headers({ "content-type": "application/octet-stream" });
        res.stream.end(Buffer.from(text.toUpperCase()));
      }),
    );
    a.registerTrigger({ type: "http", function_id: "ends::upper", config: { api_path: "ends/upper", http_method: "POST" } });
    await until(async () => (await fetch(`${engine.url}/ends/upper`, { method: "POST", body: "warm" })).status === 200, "the upper route");
    for (let i = 0; i < 3; i++) {
      const t0 = Date.now();
      const res = await fetch(`${engine.url}/ends/upper`, {
        method: "POST",
        headers: { "content-type": "text/plain" },
        body: `round ${i}`,
      });
      expect(await res.text()).toBe(`ROUND ${i}`);
      expect(Date.now() - t0).toBeLessThan(PROMPT_MS);
    }
  });

  it("a suite-shaped worker process (flows on channel ends, then shutdown) ends clean: no unhandled rejection, no 404", async () => {
    const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/suite-shape.ts");
    const child = spawn(process.execPath, [fixture, engine.wsUrl, engine.url], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, III_TOKEN: await token("suite-shape") },
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    try {
      const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
      expect(out).toContain("clean");
      expect(code).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  }, 30_000);
});
