// Channels (protocol/README.md §10) from Node or any runtime with a global WebSocket: attach to one
// end of a channel the engine created (`engine::channels::create`) and stream items through it.
import { streamChannelRef, type StreamChannelRef } from "@iii-edge/protocol";

/** The URL of one end, derived from the engine address as iii's SDKs derive it (by text). */
export function channelUrl(engineUrl: string, ref: StreamChannelRef): string {
  const base = engineUrl.replace(/\/$/, "");
  return `${base}/ws/channels/${encodeURIComponent(ref.channel_id)}?key=${encodeURIComponent(ref.access_key)}&dir=${ref.direction}`;
}

/** How long attaching may take before it is given up. */
export const CHANNEL_CONNECT_TIMEOUT_MS = 10_000;

export interface ChannelWriter {
  /** Text goes as a text item, bytes as a binary item. Throws once the channel is closed. */
  write(item: string | Uint8Array): void;
  /** End the stream: the reader gets every item, then the end. */
  close(): void;
  /** Resolves when the engine closed this end (code 1000 normally; 1013 when its buffer overflowed). */
  readonly closed: Promise<{ code: number; reason: string }>;
}

function attach(engineUrl: string, ref: StreamChannelRef): Promise<WebSocket> {
  const ws = new WebSocket(channelUrl(engineUrl, ref));
  ws.binaryType = "arraybuffer";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      ws.close();
      reject(new Error(`channel ${ref.channel_id}: no answer within ${CHANNEL_CONNECT_TIMEOUT_MS} ms`));
    }, CHANNEL_CONNECT_TIMEOUT_MS);
    ws.addEventListener(
      "open",
      () => {
        clearTimeout(timer);
        resolve(ws);
      },
      { once: true },
    );
    ws.addEventListener(
      "error",
      () => {
        clearTimeout(timer);
        reject(new Error(`channel ${ref.channel_id}: could not attach (wrong id or key, or already taken)`));
      },
      { once: true },
    );
  });
}

/** Attach to the write end of a channel (a ref with `direction: "write"`). */
export async function openChannelWriter(engineUrl: string, ref: StreamChannelRef): Promise<ChannelWriter> {
  const r = streamChannelRef.parse(ref);
  if (r.direction !== "write") throw new Error("openChannelWriter needs the writer ref (direction: write)");
  const ws = await attach(engineUrl, r);
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.addEventListener("close", (e) => resolve({ code: e.code, reason: e.reason }), { once: true }),
  );
  return {
    write(item) {
      if (ws.readyState !== WebSocket.OPEN) throw new Error(`channel ${r.channel_id} is closed`);
      ws.send(typeof item === "string" ? item : new Uint8Array(item)); // an ArrayBuffer-backed copy (send takes no SharedArrayBuffer)
    },
    close() {
      if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close(1000, "stream_complete");
    },
    closed,
  };
}

/** Attach to the read end (`direction: "read"`): every item in order, until the writer ended. */
export async function* readChannel(engineUrl: string, ref: StreamChannelRef): AsyncGenerator<string | Uint8Array> {
  const r = streamChannelRef.parse(ref);
  if (r.direction !== "read") throw new Error("readChannel needs the reader ref (direction: read)");
  const ws = await attach(engineUrl, r);
  yield* socketItems(ws, { close: () => ws.readyState === WebSocket.OPEN && ws.close(1000) });
}

/**
 * The items a reader socket receives, in order, until it closes or fails: the one loop behind every
 * reader (Node's and a Worker's). `start` runs once the listeners are in place (a Worker accepts
 * its socket there); `close` when the reader stops early or the stream ended.
 */
export async function* socketItems(ws: WebSocket, opts: { start?: () => void; close: () => void }): AsyncGenerator<string | Uint8Array> {
  const items: (string | Uint8Array)[] = [];
  let done = false;
  let wake: (() => void) | undefined;
  ws.addEventListener("message", (e: MessageEvent) => {
    items.push(typeof e.data === "string" ? e.data : new Uint8Array(e.data as ArrayBuffer));
    wake?.();
  });
  const end = () => {
    done = true;
    wake?.();
  };
  ws.addEventListener("close", end);
  ws.addEventListener("error", end);
  opts.start?.();
  try {
    for (;;) {
      if (items.length > 0) {
        yield items.shift()!;
        continue;
      }
      if (done) return;
      await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
    }
  } finally {
    opts.close();
  }
}
