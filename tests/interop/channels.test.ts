// The http trigger's channels (protocol/README.md §8.1) through `npm start`'s engine, driven by the
// unmodified iii-sdk@0.22.1: `@iii-dev/helpers/http`'s streaming `http()` wrapper, and a handler
// reading `request_body`. A channel between two workers (`createChannel`, a reader ref in a
// payload) runs on the engine core in tests/unit/iii-sdk.test.ts.
import { http } from "@iii-dev/helpers/http";
import type { ChannelReader, ChannelWriter } from "iii-sdk/channel";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSecureEngine } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { registered, sleep, until, worker, type Worker } from "./sdk.ts";

/**
 * Measured under `wrangler dev`: when the engine closes a channel socket (a reader at the end of
 * the stream), the close frame arrives at once and is answered, but the TCP connection is kept
 * open (10 s, sometimes until `ws`'s own 30 s close timeout), and Node's `ws` — so
 * `ChannelReader.readAll()` — reports the close only when TCP ends. Tests that wait for a reader's
 * end allow for it. Open issue; see engine-do/README.md "Channels".
 */
const CLOSE_LATENCY_MS = 30_000;
const SLOW = 3 * CLOSE_LATENCY_MS + 15_000;

describe("channels with iii-sdk 0.22.1", () => {
  let engine: EngineServer;
  let a: Worker;
  let b: Worker;

  beforeAll(async () => {
    engine = await startSecureEngine();
    // Longer call deadline than sdk.ts's 10 s: see CLOSE_LATENCY_MS.
    a = await worker(engine.wsUrl, "chan-a", { invocationTimeoutMs: SLOW });
    b = await worker(engine.wsUrl, "chan-b", { invocationTimeoutMs: SLOW });
  });
  afterAll(async () => {
    await a?.shutdown();
    await b?.shutdown();
    await engine?.stop();
  });

  it("an http() handler streams status, headers and a body the client reads while it is written", async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    a.registerFunction(
      "chan-a::stream",
      http(async (_req, res) => {
        res.status(202);
        res.headers({ "content-type": "application/octet-stream", "x-mode": "stream" });
        res.stream.write(Buffer.from("first chunk|"));
        // The result goes back now, before the rest of the body (§8.1: captured from iii).
        void released.then(() => {
          res.stream.write(Buffer.from("second chunk"));
          res.stream.end();
        });
      }),
    );
    a.registerTrigger({ type: "http", function_id: "chan-a::stream", config: { api_path: "chan/stream" } });
    await registered(b, "chan-a::stream");
    const res = await until(async () => {
      const r = await fetch(`${engine.url}/chan/stream`);
      return r.status === 202 ? r : (await r.body?.cancel(), undefined);
    }, "the stream route");
    expect(res.headers.get("x-mode")).toBe("stream");
    // octet-stream: a text/* body is gzip-compressed by the local dev server, which holds the
    // chunks back until the end (measured; the engine itself passes each chunk on as it comes).
    expect(res.headers.get("content-type")).toBe("application/octet-stream");
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let got = "";
    while (!got.includes("|")) {
      const { value, done } = await reader.read();
      if (done) break;
      got += decoder.decode(value, { stream: true });
    }
    // The first chunk arrived while the handler still holds the second: streamed, not buffered.
    expect(got).toBe("first chunk|");
    release();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      got += decoder.decode(value, { stream: true });
    }
    expect(got).toBe("first chunk|second chunk");
  });

  it("the http() wrapper's documented pattern (end + close) answers with its status, headers and body", async () => {
    a.registerFunction(
      "chan-a::hello",
      http(async (_req, res) => {
        res.status(200);
        res.headers({ "content-type": "application/json" });
        res.stream.end(JSON.stringify({ hello: "world" }));
        res.close();
      }),
    );
    a.registerTrigger({ type: "http", function_id: "chan-a::hello", config: { api_path: "chan/hello" } });
    await registered(b, "chan-a::hello");
    const res = await until(async () => {
      const r = await fetch(`${engine.url}/chan/hello`);
      return r.status === 200 ? r : (await r.body?.cancel(), undefined);
    }, "the hello route");
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual({ hello: "world" });
  });

  it(
    "a handler reads the raw POST body from request_body, and writing to response by hand works too",
    async () => {
      a.registerFunction("chan-a::upper", async (req: { request_body: ChannelReader; response: ChannelWriter; body: unknown }) => {
        const text = (await req.request_body.readAll()).toString("utf8");
        req.response.sendMessage(JSON.stringify({ type: "set_status", status_code: 201 }));
        req.response.sendMessage(
          JSON.stringify({ type: "set_headers", headers: { "content-type": "text/plain", "x-length": String(text.length) } }),
        );
        req.response.stream.end(Buffer.from(text.toUpperCase()));
        return undefined;
      });
      a.registerTrigger({
        type: "http",
        function_id: "chan-a::upper",
        config: { api_path: "chan/upper", http_method: "POST", timeout_ms: 2 * SLOW },
      });
      await registered(b, "chan-a::upper");
      await sleep(100);
      const body = "hello from a POST body — ünïcödé";
      const res = await fetch(`${engine.url}/chan/upper`, { method: "POST", headers: { "content-type": "text/plain" }, body });
      expect(res.status).toBe(201);
      expect(res.headers.get("x-length")).toBe(String(body.length));
      expect(await res.text()).toBe(body.toUpperCase());
    },
    SLOW,
  );

  it("a handler that returns a value is answered buffered, as before", async () => {
    // Reads up to content-length, not to the end: see CLOSE_LATENCY_MS (the POST test above waits).
    a.registerFunction("chan-a::plain", async (req: { request_body: ChannelReader; headers: Record<string, string> }) => {
      const want = Number(req.headers["content-length"]);
      let n = 0;
      for await (const chunk of req.request_body.stream) if ((n += (chunk as Buffer).length) >= want) break;
      return { status_code: 200, body: { bytes: n } };
    });
    a.registerTrigger({ type: "http", function_id: "chan-a::plain", config: { api_path: "chan/plain", http_method: "PUT" } });
    await registered(b, "chan-a::plain");
    await sleep(100);
    const res = await fetch(`${engine.url}/chan/plain`, { method: "PUT", body: new Uint8Array(5000).fill(3) });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ bytes: 5000 });
  });
});
