// Channels (protocol/README.md §10): one-way pipes with a write end and a read end, each taken once
// by a WebSocket (`/ws/channels/<id>?key=…&dir=read|write`). The hub owns the rules; the Durable
// Object shell (../../channel-sockets.ts) only carries frames in and out (`ChannelSocketPort`).
//
// Two kinds of channel share those rules, differing only in where they are kept (./store.ts):
// * created by `engine::channels::create`: a row plus buffered items in the object's SQLite, so a
//   channel survives hibernation and eviction between frames;
// * request channels of an `http` trigger (`request_body`, `response`): in memory for the life of
//   one request (the in-flight request keeps the object awake), so the HTTP fast path writes no
//   SQLite row. Their engine-side end is the engine itself: `request_body` is filled before the
//   call, `response` is read by the http trigger through a `ChannelSink`.
//
// Back-pressure: a Durable Object cannot pause a WebSocket, so a writer that outruns the buffer is
// closed with CLOSE.bufferFull instead (the items already accepted are still delivered).
import { IIIError, type ChannelDirection, type StreamChannelRef } from "@iii-edge/protocol";
import { defineBuiltin } from "../builtins/define.ts";
import type { EngineApi } from "../api.ts";
import { channelSpan } from "../telemetry/hops.ts";
import type { ActiveSpan } from "../telemetry/telemetry.ts";
import { MemoryChannelStore, newChannelRow, SqlChannelStore, itemBytes } from "./store.ts";
import type { ChannelItem, ChannelRow, ChannelStore } from "./store.ts";

export type { ChannelItem } from "./store.ts";

/** Items held while the reader is not attached, unless `buffer_size` says otherwise (iii: 64). */
export const DEFAULT_CHANNEL_BUFFER_ITEMS = 64;
/** Bytes one channel may hold, whatever its `buffer_size`: 8 buffered MiB per channel keeps a few
 * busy channels well inside a Durable Object's 128 MB of memory and its SQLite budget. */
export const MAX_CHANNEL_BUFFER_BYTES = 8 * 1024 * 1024;
/** Largest item: a DO SQLite row holds at most 2 MB, and workerd's WebSocket messages 1 MiB. */
export const MAX_CHANNEL_ITEM_BYTES = 1024 * 1024;
/** Is the item over MAX_CHANNEL_ITEM_BYTES? Decided by a text's length where that can (a UTF-16 unit
 * is 1–3 UTF-8 bytes): a chunk that goes straight to its reader is not encoded only to be measured. */
const tooLarge = (item: ChannelItem): boolean =>
  item.type === "binary"
    ? item.value.byteLength > MAX_CHANNEL_ITEM_BYTES
    : item.value.length > MAX_CHANNEL_ITEM_BYTES ||
      (item.value.length * 3 > MAX_CHANNEL_ITEM_BYTES && itemBytes(item) > MAX_CHANNEL_ITEM_BYTES);
/** A channel whose ends were not both attached within this time is removed (iii: 5 minutes). */
export const CHANNEL_TTL_MS = 5 * 60_000;
/** How often a channel that is still in use is looked at again by the sweep (iii: 60 s). */
export const CHANNEL_SWEEP_INTERVAL_MS = 60_000;
/** Open channels per object: bounds the table a caller looping on `create` can grow. */
export const MAX_OPEN_CHANNELS = 10_000;
/** The items the engine writes into a streamed `request_body` channel: 64 KiB, the frame size
 * iii-sdk's own channel writer uses (an upload arrives in 4 KiB pieces; each item costs the reader
 * and the object a frame, so they are gathered). */
export const REQUEST_BODY_ITEM_BYTES = 64 * 1024;
/** When the upload pauses this long, what has arrived so far is written anyway: a slow client's
 * bytes reach the function as they come, not once 64 KiB have gathered. */
export const REQUEST_BODY_FLUSH_MS = 5;

/**
 * The key of one end of a channel. A row's `access_key` is two random ids back to back: the reader
 * gets the first half, the writer the second, so whoever is handed one end cannot take the other
 * (a reader cannot write into a stream, a writer cannot read what it is sent back). Each half is
 * one random id (122 random bits).
 */
export function endKey(accessKey: string, dir: ChannelDirection): string {
  const half = Math.floor(accessKey.length / 2);
  return dir === "read" ? accessKey.slice(0, half) : accessKey.slice(half);
}

/** Close codes the engine sends on channel sockets. */
export const CLOSE = {
  /** Reader: the writer ended and every item was delivered. */
  complete: { code: 1000, reason: "stream_complete" },
  /** Writer: the reader went away, nobody will read what it writes. */
  readerClosed: { code: 1000, reason: "reader_closed" },
  /** Either end of an http request channel when the request is over. */
  requestEnded: { code: 1000, reason: "request_ended" },
  /** Sweep: the channel outlived CHANNEL_TTL_MS without both ends attached. */
  expired: { code: 1001, reason: "channel_expired" },
  /** The end was already taken (§10: a second attach gets an immediate close). */
  endTaken: { code: 1008, reason: "channel_end_already_attached" },
  /** Writer: one item over MAX_CHANNEL_ITEM_BYTES. */
  itemTooLarge: { code: 1009, reason: "channel_item_too_large" },
  /** Writer (and then the reader, after the accepted items): the buffer is full. 1013 is
   * "try again later": the engine cannot apply back-pressure, so the stream is cut instead. */
  bufferFull: { code: 1013, reason: "channel_buffer_full" },
  /** Reader of a streamed `request_body`: the upload failed before its last byte (client gone,
   * or fewer bytes than its Content-Length). */
  requestBodyFailed: { code: 1011, reason: "request_body_incomplete" },
} as const;
type Close = { code: number; reason: string };

/** The DO shell's side: the sockets attached to channel ends (found again after hibernation). */
export interface ChannelSocketPort {
  /** Send one item to the reader socket of `channelId`; false when there is none. */
  send(channelId: string, item: ChannelItem): boolean;
  close(channelId: string, dir: ChannelDirection, code: number, reason: string): void;
  isOpen(channelId: string, dir: ChannelDirection): boolean;
}

export type AttachVerdict = "ok" | "not_found" | "taken";

/** What the http trigger hands over as a request's body: its bytes, or (past the inline bound,
 * with a declared length) the upload itself, streamed into `request_body` as it arrives. */
export type RequestBody = Uint8Array | ReadableStream<Uint8Array> | null;

/**
 * The engine as the reader of a request channel (the http trigger's `response`): items are queued
 * in memory (bounded by MAX_CHANNEL_BUFFER_BYTES) until `next()` takes them.
 */
export class ChannelSink {
  private readonly queue: ChannelItem[] = [];
  private bytes = 0;
  private ended: Close | null = null;
  private wake: (() => void) | null = null;
  private attachedResolve!: () => void;
  /** Resolves when the writer socket attaches. */
  readonly writerAttached = new Promise<void>((r) => (this.attachedResolve = r));
  writerSeen = false;

  onWriterAttached(): void {
    this.writerSeen = true;
    this.attachedResolve();
  }
  push(item: ChannelItem): boolean {
    const n = itemBytes(item);
    if (this.bytes + n > MAX_CHANNEL_BUFFER_BYTES) return false;
    this.bytes += n;
    this.queue.push(item);
    this.poke();
    return true;
  }
  end(close: Close): void {
    this.ended ??= close;
    this.poke();
  }
  /** The next item, or null once the writer has ended and everything was taken. */
  async next(): Promise<ChannelItem | null> {
    for (;;) {
      const item = this.queue.shift();
      if (item) {
        this.bytes -= itemBytes(item);
        return item;
      }
      if (this.ended) return null;
      await new Promise<void>((r) => (this.wake = r));
    }
  }
  private poke(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }
}

/** The two channels of one http-trigger request; `dispose` when the request is over. */
export interface RequestChannels {
  request_body: StreamChannelRef;
  response: StreamChannelRef;
  responseSink: ChannelSink;
  /** Resolves (with why) if a streamed body fails before its end; never otherwise. */
  bodyFailed: Promise<string>;
  dispose(): void;
}

const constantTimeEqual = (a: string, b: string): boolean => {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
};

export class ChannelHub {
  private readonly core: EngineApi;
  private readonly sql: SqlChannelStore;
  private readonly memory = new MemoryChannelStore();
  private readonly sinks = new Map<string, ChannelSink>();
  /** Streamed request bodies waiting for their reader (the buffer is full): woken on attach or end. */
  private readonly bodyWaiters = new Map<string, () => void>();
  private sockets: ChannelSocketPort | null = null;

  constructor(core: EngineApi) {
    this.core = core;
    this.sql = new SqlChannelStore(core.ports.sql);
  }

  setSockets(port: ChannelSocketPort): void {
    this.sockets = port;
  }

  install(): void {
    defineBuiltin(this.core, "engine::channels::create", {
      description: "Create a channel: {buffer_size?=64 (max 1024)} → {writer, reader} channel refs",
      internal: true,
      handler: ({ buffer_size }, ctx) => this.create(buffer_size ?? DEFAULT_CHANNEL_BUFFER_ITEMS, ctx.traceparent, ctx.principal),
    });
    this.core.addAlarmClient({ nextDue: () => this.sql.nextSweep(), run: async (now) => this.sweep(now) });
  }

  /** Spans of created channels, from create to removal (telemetry/hops.ts; in memory: an
   * eviction in between loses the span, never the channel). At most MAX_OPEN_CHANNELS. */
  private readonly spans = new Map<string, ActiveSpan>();

  /** Who created each channel (the caller's principal), for the frame budget its writers share
   * (principal-budgets.ts). In memory like the spans: after an eviction a writer has its own only. */
  private readonly owners = new Map<string, string>();

  ownerOf(id: string): string | undefined {
    return this.owners.get(id);
  }

  private finished(id: string, reason: string): void {
    this.owners.delete(id);
    const span = this.spans.get(id);
    if (!span) return;
    this.spans.delete(id);
    span.set("iii.channel.end", reason).end({ ok: true });
  }

  create(bufferSize: number, traceparent?: string, owner?: string): { writer: StreamChannelRef; reader: StreamChannelRef } {
    if (this.sql.count() >= MAX_OPEN_CHANNELS)
      throw new IIIError("channel_limit", `this engine already has ${MAX_OPEN_CHANNELS} open channels`);
    const now = this.core.ports.clock.now();
    const row = this.newRow(bufferSize, now);
    this.sql.insert(row);
    if (owner !== undefined) this.owners.set(row.id, owner);
    const span = channelSpan(this.core.telemetry, row.id, traceparent);
    if (span) this.spans.set(row.id, span.set("iii.channel.buffer_size", bufferSize));
    this.core.rearmAlarm();
    return {
      writer: { channel_id: row.id, access_key: endKey(row.access_key, "write"), direction: "write" },
      reader: { channel_id: row.id, access_key: endKey(row.access_key, "read"), direction: "read" },
    };
  }

  /**
   * Channels for one http request: `request_body` holds the raw body (one binary item, then the
   * end) or, for a stream, is written as the upload arrives (REQUEST_BODY_ITEM_BYTES at a time,
   * holding at most MAX_CHANNEL_BUFFER_BYTES until the reader attaches: the upload waits meanwhile);
   * `response` is read by the returned sink. Cost: four random ids and two small objects in memory
   * — no SQLite.
   */
  openRequest(body: RequestBody, declaredLength?: number): RequestChannels {
    const now = this.core.ports.clock.now();
    const req = this.newRow(1, now);
    const streamed = body instanceof ReadableStream ? body : null;
    req.writer = streamed ? 1 : 2; // the engine is the writer: still writing, or done
    if (streamed) req.buffer_size = Number.MAX_SAFE_INTEGER; // bounded by bytes, not items
    const res = this.newRow(DEFAULT_CHANNEL_BUFFER_ITEMS, now);
    res.reader = 1; // the engine itself
    this.memory.insert(req);
    if (body instanceof Uint8Array && body.byteLength > 0)
      this.memory.append(req.id, { type: "binary", value: body.slice().buffer as ArrayBuffer });
    this.memory.insert(res);
    const sink = new ChannelSink();
    this.sinks.set(res.id, sink);
    let failed!: (why: string) => void;
    const bodyFailed = new Promise<string>((r) => (failed = r));
    const pump = streamed ? this.pumpBody(req.id, streamed, declaredLength, failed) : null;
    return {
      request_body: { channel_id: req.id, access_key: endKey(req.access_key, "read"), direction: "read" },
      response: { channel_id: res.id, access_key: endKey(res.access_key, "write"), direction: "write" },
      responseSink: sink,
      bodyFailed,
      dispose: () => {
        pump?.cancel();
        for (const [row, dir] of [
          [req, "read"],
          [res, "write"],
        ] as const) {
          if (this.sockets?.isOpen(row.id, dir)) this.sockets.close(row.id, dir, CLOSE.requestEnded.code, CLOSE.requestEnded.reason);
          this.memory.remove(row.id);
        }
        this.wakeBody(req.id);
        sink.end(CLOSE.requestEnded);
        this.sinks.delete(res.id);
      },
    };
  }

  /** The engine as the writer of a streamed `request_body`: the upload, in REQUEST_BODY_ITEM_BYTES
   * items; it fails when it is not exactly `declared` bytes long (the client went away). */
  private pumpBody(
    id: string,
    body: ReadableStream<Uint8Array>,
    declared: number | undefined,
    failed: (why: string) => void,
  ): { cancel(): void } {
    const reader = body.getReader();
    const timers = this.core.ports.timers;
    let cancelled = false;
    const stop = (why: string) => {
      if (cancelled) return;
      cancelled = true;
      reader.cancel(why).catch(() => {});
    };
    // Bytes that arrived and are not written yet; all that arrived.
    let pending: Uint8Array[] = [];
    let size = 0;
    let total = 0;
    const take = (n: number): Uint8Array => {
      const out = new Uint8Array(n);
      let at = 0;
      while (at < n) {
        const head = pending[0]!;
        const part = Math.min(head.byteLength, n - at);
        out.set(head.subarray(0, part), at);
        at += part;
        if (part === head.byteLength) pending.shift();
        else pending[0] = head.subarray(part);
      }
      size -= n;
      return out;
    };
    /** Write what is gathered (all of it, or only whole items); false when nobody will read it. */
    const write = async (all: boolean): Promise<boolean> => {
      while (size >= REQUEST_BODY_ITEM_BYTES || (all && size > 0)) {
        const item = take(Math.min(size, REQUEST_BODY_ITEM_BYTES));
        if (!(await this.engineWrite(id, { type: "binary", value: item.buffer as ArrayBuffer }))) return false;
      }
      if (size === 0) pending = [];
      return true;
    };
    const PAUSE = Symbol("pause");
    const run = async () => {
      try {
        for (;;) {
          const next = reader.read();
          next.catch(() => {}); // awaited below, or dropped when the pump stops
          // The read's own type: `ReadableStreamReadResult` is a DOM/workerd global, not Node's, and the
          // core also compiles in the Node-only projects that serve it in-process (tests/support/node-engine.ts).
          let got: Awaited<typeof next> | typeof PAUSE;
          if (size === 0) got = await next;
          else {
            let timer: unknown;
            got = await Promise.race([next, new Promise<typeof PAUSE>((r) => (timer = timers.set(() => r(PAUSE), REQUEST_BODY_FLUSH_MS)))]);
            timers.clear(timer);
            if (got === PAUSE) {
              if (!(await write(true))) return stop("request_body is no longer read");
              got = await next;
            }
          }
          if (cancelled) return;
          if (got.done) break;
          pending.push(got.value);
          size += got.value.byteLength;
          total += got.value.byteLength;
          if (declared !== undefined && total > declared) throw new Error(`more than its Content-Length of ${declared} bytes`);
          // Nobody will read it (the request is over, or its reader left): stop taking the upload.
          if (!(await write(false))) return stop("request_body is no longer read");
        }
        if (declared !== undefined && total !== declared) throw new Error(`ended after ${total} of its ${declared} bytes`);
        if (!(await write(true))) return stop("request_body is no longer read");
        this.endEngineWriter(id, CLOSE.complete);
      } catch (e) {
        if (cancelled) return;
        this.endEngineWriter(id, CLOSE.requestBodyFailed);
        failed(e instanceof Error ? e.message : String(e));
      }
    };
    this.core.ports.background(run());
    return { cancel: () => stop("request over") };
  }

  /** One item from the engine's own writer: straight to an attached reader, else buffered; with
   * the buffer full, waits for the reader. False when nobody will read it. */
  private async engineWrite(id: string, item: ChannelItem): Promise<boolean> {
    for (;;) {
      const row = this.memory.get(id);
      if (!row || row.reader === 2 || row.writer !== 1) return false;
      if (row.reader === 1 && row.items === 0 && this.sockets?.send(id, item)) return true;
      if (row.bytes + itemBytes(item) <= MAX_CHANNEL_BUFFER_BYTES || row.items === 0) {
        this.memory.append(id, item);
        return true;
      }
      await new Promise<void>((r) => this.bodyWaiters.set(id, r));
    }
  }

  private wakeBody(id: string): void {
    const w = this.bodyWaiters.get(id);
    this.bodyWaiters.delete(id);
    w?.();
  }

  /** The engine's own writer is done (or failed). */
  private endEngineWriter(id: string, close: Close): void {
    const row = this.memory.get(id);
    if (row && row.writer === 1) this.end(this.memory, row, close);
  }

  private newRow(bufferSize: number, now: number): ChannelRow {
    const ids = this.core.ports;
    // Two random ids: the first is the reader's key, the second the writer's (endKey).
    return newChannelRow({
      id: ids.newId(),
      access_key: ids.newId().replace(/-/g, "") + ids.newId().replace(/-/g, ""),
      created_at: now,
      buffer_size: bufferSize,
      sweep_at: now + CHANNEL_TTL_MS,
    });
  }

  private storeOf(id: string): { store: ChannelStore; row: ChannelRow } | undefined {
    const m = this.memory.get(id);
    if (m) return { store: this.memory, row: m };
    const s = this.sql.get(id);
    return s ? { store: this.sql, row: s } : undefined;
  }

  /** May a socket take this end? Wrong id or key → not_found (HTTP 404), taken → immediate close. */
  authorize(id: string, key: string, dir: ChannelDirection): AttachVerdict {
    const found = this.storeOf(id);
    if (!found || !constantTimeEqual(endKey(found.row.access_key, dir), key)) return "not_found";
    return (dir === "read" ? found.row.reader : found.row.writer) === 0 ? "ok" : "taken";
  }

  /** A socket now holds this end (after `authorize` said ok). */
  attached(id: string, dir: ChannelDirection): void {
    const found = this.storeOf(id);
    if (!found) return;
    const { store, row } = found;
    if (dir === "write") {
      store.update(id, { writer: 1 });
      this.sinks.get(id)?.onWriterAttached();
      return;
    }
    store.update(id, { reader: 1 });
    this.flush(store, { ...row, reader: 1 });
    this.wakeBody(id);
  }

  /** Deliver what is buffered to the attached reader; close it when the writer has ended. */
  private flush(store: ChannelStore, row: ChannelRow): void {
    const port = this.sockets;
    if (!port) return;
    if (row.items > 0) for (const item of store.drain(row.id)) port.send(row.id, item);
    if (row.writer === 2) port.close(row.id, "read", row.end_code ?? CLOSE.complete.code, row.end_reason ?? CLOSE.complete.reason);
  }

  /** One frame from a writer socket. */
  write(id: string, item: ChannelItem): void {
    const found = this.storeOf(id);
    if (found?.row.writer !== 1) return; // the engine already ended this writer
    const { store, row } = found;
    if (tooLarge(item)) return this.cut(store, row, CLOSE.itemTooLarge);
    const sink = this.sinks.get(id);
    if (sink) {
      if (!sink.push(item)) this.cut(store, row, CLOSE.bufferFull);
      return;
    }
    if (row.reader === 2) return;
    if (row.reader === 1 && row.items === 0 && this.sockets?.send(id, item)) return; // the fast path: straight through
    if (row.items + 1 > row.buffer_size || row.bytes + itemBytes(item) > MAX_CHANNEL_BUFFER_BYTES)
      return this.cut(store, row, CLOSE.bufferFull);
    store.append(id, item);
  }

  /** The engine ends a writer (limits): close its socket, then end the stream with that reason. */
  private cut(store: ChannelStore, row: ChannelRow, close: Close): void {
    this.sockets?.close(row.id, "write", close.code, close.reason);
    this.end(store, row, close);
  }

  private end(store: ChannelStore, row: ChannelRow, close: Close): void {
    store.update(row.id, { writer: 2, end_code: close.code, end_reason: close.reason });
    const sink = this.sinks.get(row.id);
    if (sink) return sink.end(close);
    if (row.reader === 1 && row.items === 0) this.sockets?.close(row.id, "read", close.code, close.reason);
  }

  /** A channel socket closed (or errored). */
  closed(id: string, dir: ChannelDirection): void {
    const found = this.storeOf(id);
    if (!found) return;
    const { store, row } = found;
    if (dir === "write") {
      if (row.writer !== 1) return;
      // Frames that arrived before the close were already handled: workerd delivers a socket's
      // events in order, so "frames right after the close" (§10) need no timer here.
      this.end(store, row, CLOSE.complete);
      if (row.reader === 2) {
        store.remove(id);
        this.finished(id, CLOSE.complete.reason);
      }
      return;
    }
    // The reader is gone: nothing more can be read, so the writer is told and the channel removed.
    if (row.writer === 1) this.sockets?.close(id, "write", CLOSE.readerClosed.code, CLOSE.readerClosed.reason);
    store.remove(id);
    this.finished(id, row.writer === 1 ? CLOSE.readerClosed.reason : (row.end_reason ?? CLOSE.complete.reason));
    this.wakeBody(id);
  }

  /** Alarm: drop channels past their TTL whose ends were not both attached, and finished ones. */
  sweep(now: number): void {
    for (const row of this.sql.due(now)) {
      const both = row.writer !== 0 && row.reader !== 0;
      const live = this.sockets !== null && (this.sockets.isOpen(row.id, "write") || this.sockets.isOpen(row.id, "read"));
      if (both && live) {
        this.sql.update(row.id, { sweep_at: now + CHANNEL_SWEEP_INTERVAL_MS });
        continue;
      }
      for (const dir of ["write", "read"] as const)
        if (this.sockets?.isOpen(row.id, dir)) this.sockets.close(row.id, dir, CLOSE.expired.code, CLOSE.expired.reason);
      this.sql.remove(row.id);
      this.finished(row.id, both ? CLOSE.complete.reason : CLOSE.expired.reason);
    }
  }

  /** For the shell after a restart: does this channel still exist? */
  exists(id: string): boolean {
    return this.storeOf(id) !== undefined;
  }
}

export function installChannels(core: EngineApi): ChannelHub {
  const hub = new ChannelHub(core);
  hub.install();
  return hub;
}
