// Channels (protocol/README.md §10) on the Engine object: create, attach both ends over the front
// door, items in order with their text/binary type, close propagation, buffering before the reader,
// one attach per end, 404 for a wrong key, overflow, hibernation between writes, the alarm sweep,
// and the http trigger's request_body / streamed response (§8.1).
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { engineStub, evictEngine, sleep, Wires, type Connected } from "./wire.ts";

interface Ref {
  channel_id: string;
  access_key: string;
  direction: "read" | "write";
}
type Item = string | Uint8Array;

/** One channel end: every item received kept in order, plus how the socket closed. */
class End {
  readonly items: Item[] = [];
  closed: { code: number; reason: string } | null = null;
  private wake: (() => void) | null = null;
  readonly ws: WebSocket;
  constructor(ws: WebSocket) {
    this.ws = ws;
    ws.binaryType = "arraybuffer"; // this compatibility date delivers Blobs otherwise
    ws.addEventListener("message", (ev) => {
      this.items.push(typeof ev.data === "string" ? ev.data : new Uint8Array(ev.data as ArrayBuffer));
      this.wake?.();
    });
    ws.addEventListener("close", (ev) => {
      this.closed = { code: ev.code, reason: ev.reason };
      this.wake?.();
    });
  }
  static async attach(ref: Ref, prefix = ""): Promise<End> {
    const res = await dial(ref, prefix);
    if (res.status !== 101 || !res.webSocket) throw new Error(`attach failed: ${res.status} ${await res.text()}`);
    res.webSocket.accept();
    return new End(res.webSocket);
  }
  /** Wait until `pred` holds (items or close), at most `ms`. */
  async until(pred: (e: End) => boolean, ms = 3_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!pred(this) && Date.now() < deadline) await Promise.race([new Promise<void>((r) => (this.wake = r)), sleep(50)]);
    if (!pred(this)) throw new Error(`timed out; items ${this.items.length}, closed ${JSON.stringify(this.closed)}`);
  }
  untilClosed(ms?: number) {
    return this.until((e) => e.closed !== null, ms);
  }
}

const dial = (ref: Ref, prefix = "") =>
  exports.default.fetch(
    `http://localhost${prefix}/ws/channels/${ref.channel_id}?key=${encodeURIComponent(ref.access_key)}&dir=${ref.direction}`,
    { headers: { Upgrade: "websocket" } },
  );
/** Status of a refused upgrade; the body is read so no request stays open in the object. */
const refused = async (ref: Ref, prefix = "") => {
  const res = await dial(ref, prefix);
  await res.text();
  return res.status;
};
const bytes = (...n: number[]) => new Uint8Array(n);
const text = (items: Item[]) => items.map((i) => (typeof i === "string" ? `t:${i}` : `b:${[...i].join(",")}`));

const wires = new Wires();
const ends: End[] = [];
const attach = async (ref: Ref, prefix = "") => {
  const e = await End.attach(ref, prefix);
  ends.push(e);
  return e;
};
afterEach(async () => {
  for (const e of ends.splice(0)) {
    try {
      e.ws.close(1000, "test done");
    } catch {
      // closed
    }
  }
  await wires.closeAll();
});

async function create(w: Connected, buffer_size?: number): Promise<{ writer: Ref; reader: Ref }> {
  return (await w.ok("engine::channels::create", buffer_size === undefined ? {} : { buffer_size })) as { writer: Ref; reader: Ref };
}

describe("channels", () => {
  it("creates a pair of refs; text and binary items reach the reader in order; the writer's close ends it", async () => {
    const w = await wires.connect();
    const ch = await create(w);
    // One channel, two ends, two keys: whoever holds one end cannot take the other.
    expect(ch.writer).toMatchObject({ channel_id: ch.reader.channel_id, direction: "write" });
    expect(ch.writer.access_key).not.toBe(ch.reader.access_key);
    expect(ch.reader.direction).toBe("read");
    const reader = await attach(ch.reader);
    const writer = await attach(ch.writer);
    writer.ws.send('{"type":"hello"}');
    writer.ws.send(bytes(1, 2, 3));
    writer.ws.send(bytes(4, 5));
    writer.ws.send("last words");
    writer.ws.close(1000, "stream_complete");
    await reader.untilClosed();
    expect(text(reader.items)).toEqual(['t:{"type":"hello"}', "b:1,2,3", "b:4,5", "t:last words"]);
    expect(reader.closed).toEqual({ code: 1000, reason: "stream_complete" });
  });

  it("buffers items written before the reader attaches, then delivers them and closes", async () => {
    const w = await wires.connect();
    const ch = await create(w);
    const writer = await attach(ch.writer);
    for (let i = 0; i < 5; i++) writer.ws.send(bytes(i));
    writer.ws.close(1000, "stream_complete");
    await writer.untilClosed();
    await sleep(50);
    const reader = await attach(ch.reader);
    await reader.untilClosed();
    expect(text(reader.items)).toEqual(["b:0", "b:1", "b:2", "b:3", "b:4"]);
    expect(reader.closed?.code).toBe(1000);
  });

  it("takes each end once, answers 404 for a wrong key or id, and refuses bad buffer sizes", async () => {
    const w = await wires.connect();
    const ch = await create(w);
    await attach(ch.writer);
    const second = await attach(ch.writer);
    await second.untilClosed();
    expect(second.closed).toEqual({ code: 1008, reason: "channel_end_already_attached" });
    expect(await refused({ ...ch.reader, access_key: "wrong" })).toBe(404);
    // A reader's key does not open the write end, nor a writer's the read end.
    expect(await refused({ ...ch.reader, direction: "write" })).toBe(404);
    expect(await refused({ ...ch.writer, direction: "read" })).toBe(404);
    expect(await refused({ ...ch.reader, channel_id: crypto.randomUUID() })).toBe(404);
    const plain = await exports.default.fetch(`http://localhost/ws/channels/${ch.reader.channel_id}?key=${ch.reader.access_key}&dir=read`);
    expect(plain.status).toBe(426);
    await plain.text();
    const bad = await w.call("engine::channels::create", { buffer_size: 5000 });
    expect(bad.error?.code).toBe("deserialization_error");
  });

  it("closes a writer that overflows the buffer (1013); the reader still gets what was accepted", async () => {
    const w = await wires.connect();
    const ch = await create(w, 2);
    const writer = await attach(ch.writer);
    writer.ws.send("a");
    writer.ws.send("b");
    writer.ws.send("c");
    await writer.untilClosed();
    expect(writer.closed).toEqual({ code: 1013, reason: "channel_buffer_full" });
    const reader = await attach(ch.reader);
    await reader.untilClosed();
    expect(text(reader.items)).toEqual(["t:a", "t:b"]);
    expect(reader.closed).toEqual({ code: 1013, reason: "channel_buffer_full" });
  });

  it("keeps channel state and both sockets across hibernation between writes", async () => {
    const w = await wires.connect();
    const ch = await create(w);
    const writer = await attach(ch.writer);
    writer.ws.send("before reader");
    await sleep(30);
    await evictEngine();
    writer.ws.send(bytes(9));
    await sleep(30);
    await evictEngine();
    const reader = await attach(ch.reader);
    await reader.until((e) => e.items.length === 2);
    await evictEngine();
    writer.ws.send("after reader");
    await reader.until((e) => e.items.length === 3);
    await evictEngine();
    writer.ws.close(1000, "stream_complete");
    await reader.untilClosed();
    expect(text(reader.items)).toEqual(["t:before reader", "b:9", "t:after reader"]);
    expect(reader.closed?.code).toBe(1000);
  });

  it("the alarm sweeps channels past their TTL without both ends attached, and keeps live ones", async () => {
    const w = await wires.connect();
    const stale = await create(w);
    const live = await create(w);
    const staleWriter = await attach(stale.writer);
    const liveReader = await attach(live.reader);
    const liveWriter = await attach(live.writer);
    // Age both past the TTL (five minutes) instead of waiting for it.
    await runInDurableObject(engineStub(), (_i, state) => {
      state.storage.sql.exec(
        "UPDATE channels SET sweep_at = 0, created_at = 0 WHERE id IN (?, ?)",
        stale.writer.channel_id,
        live.writer.channel_id,
      );
    });
    expect(await runDurableObjectAlarm(engineStub())).toBe(true);
    await staleWriter.untilClosed();
    expect(staleWriter.closed).toEqual({ code: 1001, reason: "channel_expired" });
    expect(await refused(stale.reader)).toBe(404);
    liveWriter.ws.send("still here");
    await liveReader.until((e) => e.items.length === 1);
    const left = await runInDurableObject(engineStub(), (_i, state) =>
      state.storage.sql.exec<{ id: string; sweep_at: number }>("SELECT id, sweep_at FROM channels").toArray(),
    );
    expect(left.map((r) => r.id)).toContain(live.writer.channel_id);
    expect(left.find((r) => r.id === live.writer.channel_id)!.sweep_at).toBeGreaterThan(Date.now());
    // A finished channel (writer closed, reader closed by the engine) is removed at once.
    liveWriter.ws.close(1000, "stream_complete");
    await liveReader.untilClosed();
    await sleep(50);
    const after = await runInDurableObject(
      engineStub(),
      (_i, state) =>
        state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM channels WHERE id = ?", live.writer.channel_id).one().n,
    );
    expect(after).toBe(0);
  });

  it("works under a namespace prefix (/ns/<ns>/ws/channels/<id>)", async () => {
    const w = await wires.connect("/ns/chan-ns");
    const ch = await create(w);
    const reader = await attach(ch.reader, "/ns/chan-ns");
    const writer = await attach(ch.writer, "/ns/chan-ns");
    writer.ws.send("x");
    writer.ws.close(1000, "done");
    await reader.untilClosed();
    expect(text(reader.items)).toEqual(["t:x"]);
    expect(await refused(ch.reader)).toBe(404); // not in the default namespace
  });
});

describe("http trigger channels (§8.1)", () => {
  it("fills request_body with the raw body and streams a response written to the response channel", async () => {
    const w = await wires.connect();
    const seen: Record<string, unknown>[] = [];
    w.serve("chan::stream", async (data) => {
      seen.push(data);
      const body = await End.attach(data.request_body as Ref);
      await body.untilClosed();
      const res = await End.attach(data.response as Ref);
      res.ws.send(JSON.stringify({ type: "set_status", status_code: 201 }));
      res.ws.send(JSON.stringify({ type: "set_headers", headers: { "content-type": "text/plain", "x-chunks": "2" } }));
      // Returning before the body is written: the engine waits for the channel (§8.1, captured).
      setTimeout(() => {
        res.ws.send(new TextEncoder().encode("echo: "));
        res.ws.send(body.items[0] as Uint8Array);
        res.ws.close(1000, "stream_complete");
      }, 50);
      return undefined;
    });
    w.send({
      type: "registertrigger",
      id: "chan-trig-1",
      trigger_type: "http",
      function_id: "chan::stream",
      config: { api_path: "chan/stream", http_method: "POST" },
    });
    await sleep(50);
    const res = await exports.default.fetch("http://localhost/chan/stream", {
      method: "POST",
      headers: { "content-type": "application/octet-stream" },
      body: bytes(104, 105, 0, 255),
    });
    expect(res.status).toBe(201);
    expect(res.headers.get("x-chunks")).toBe("2");
    expect([...new Uint8Array(await res.arrayBuffer())]).toEqual([...new TextEncoder().encode("echo: "), 104, 105, 0, 255]);
    expect(seen[0]).toMatchObject({ body: null, request_body: { direction: "read" }, response: { direction: "write" } });
  });

  it("answers buffered when the function returns a value, and cleans up its request channels", async () => {
    const w = await wires.connect();
    let refs: { request_body: Ref; response: Ref } | undefined;
    w.serve("chan::plain", (data) => {
      refs = data;
      return { body: { ok: true } };
    });
    w.send({
      type: "registertrigger",
      id: "chan-trig-2",
      trigger_type: "http",
      function_id: "chan::plain",
      config: { api_path: "chan/plain" },
    });
    await sleep(50);
    const res = await exports.default.fetch("http://localhost/chan/plain");
    expect(await res.json()).toEqual({ ok: true });
    // The request is over: its channels are gone, and none was written to SQLite.
    expect(await refused(refs!.response)).toBe(404);
    expect(await refused(refs!.request_body)).toBe(404);
    const rows = await runInDurableObject(
      engineStub(),
      (_i, state) =>
        state.storage.sql
          .exec<{ n: number }>(
            "SELECT COUNT(*) AS n FROM channels WHERE id IN (?, ?)",
            refs!.response.channel_id,
            refs!.request_body.channel_id,
          )
          .one().n,
    );
    expect(rows).toBe(0);
  });
});
