// Channel sockets on the Engine object (protocol/README.md §10): the workerd side of
// core/channels/hub.ts. `GET …/ws/channels/<id>?key=…&dir=read|write` arrives here from the front
// door. Sockets are hibernatable: each carries {kind:"channel", channel_id, dir} in a validated
// attachment and a tag naming its end, so the reader is found again after the object wakes.
//
// The front door relays a reader's socket (relayReader, below): workerd does not end the TCP
// connection of a hibernatable socket the server closed. After the client's close reply it stays
// open until the object hibernates (10 s idle) or the client gives up (Node's `ws`: 30 s) —
// measured under `wrangler dev` with a do-nothing object as well, so it is the runtime's, not the
// engine's (in workerd's source a WebSocket lets its connection go once it has sent and received a
// close; a hibernatable socket's received close is handled by the hibernation manager, and when the
// server closed first nothing lets it go). The engine is the one that closes a reader (after
// the last item), and iii-sdk's ChannelReader, like any WebSocket client, reports the end of the
// stream only when TCP closes: `readAll()` and every http handler reading `request_body` returned
// 10–30 s late. A writer ends with a close the client starts, which workerd completes at once.
import { z } from "zod";
import { CHANNEL_DIRECTIONS, type ChannelDirection } from "@iii-edge/protocol";
import { CLOSE, type ChannelHub, type ChannelItem, type ChannelSocketPort } from "./core/channels/hub.ts";

export const channelAttachment = z.object({
  v: z.literal(1),
  kind: z.literal("channel"),
  channel_id: z.string(),
  dir: z.enum(CHANNEL_DIRECTIONS),
});
type ChannelEnd = { channel_id: string; dir: ChannelDirection };
const TAG = "channel";
const REFUSED_TAG = "channel-refused";
/** One tag per end: `getWebSockets(tag)` finds the socket after hibernation (tags ≤ 256 chars). */
const endTag = (id: string, dir: ChannelDirection) => `ch:${dir}:${id}`;
const CHANNEL_PATH = /\/ws\/channels\/([^/]{1,128})$/;

const json = (status: number, code: string, message: string) => Response.json({ error: { code, message } }, { status });

/** A close code a socket may be closed with: 1005 (no code given) passes on as 1000, and 1006 / 1015
 * (the other side's connection was lost) as 1011, so a lost stream is not told as a complete one. */
const sendableCode = (code: number) => (code === 1005 ? 1000 : code === 1006 || code === 1015 ? 1011 : code);

/**
 * The front door's half of a reader's socket: the Engine object's 101 (`engine`) is held here and
 * its frames relayed to a socket of the front door's own, a standard one, which workerd ends at
 * once when it is closed. The object's side stays hibernatable (it survives the object's
 * hibernation between items), and its close reaches the client, TCP included, within milliseconds
 * (measured; 10–30 s before). Anything but a 101 is passed on as it is.
 */
export function relayReader(engine: Response): Response {
  const upstream = engine.webSocket;
  if (engine.status !== 101 || !upstream) return engine;
  const pair = new WebSocketPair();
  const [client, server] = [pair[0], pair[1]];
  upstream.accept();
  server.accept();
  upstream.binaryType = "arraybuffer";
  server.binaryType = "arraybuffer";
  const closeQuietly = (ws: WebSocket, code: number, reason: string) => {
    try {
      ws.close(sendableCode(code), reason);
    } catch {
      // already closed
    }
  };
  const pass = (to: WebSocket) => (e: MessageEvent) => {
    try {
      to.send(e.data as string | ArrayBuffer);
    } catch {
      // closing: its close follows
    }
  };
  upstream.addEventListener("message", pass(server));
  server.addEventListener("message", pass(upstream));
  // Either side's close is answered and passed on (with its code and reason), so both handshakes complete.
  upstream.addEventListener("close", (e) => {
    closeQuietly(upstream, e.code, e.reason);
    closeQuietly(server, e.code, e.reason);
  });
  server.addEventListener("close", (e) => {
    closeQuietly(server, e.code, e.reason);
    closeQuietly(upstream, e.code, e.reason);
  });
  upstream.addEventListener("error", () => closeQuietly(server, 1011, "channel_lost"));
  server.addEventListener("error", () => closeQuietly(upstream, 1001, "reader_gone"));
  return new Response(null, { status: 101, webSocket: client });
}

export class ChannelSockets implements ChannelSocketPort {
  private readonly ctx: DurableObjectState;
  private readonly hub: ChannelHub;
  /** Sockets whose 101 response is not out yet, and closes waiting for it. */
  private readonly opening = new Set<WebSocket>();
  private readonly deferredCloses: { ws: WebSocket; code: number; reason: string }[] = [];

  constructor(ctx: DurableObjectState, hub: ChannelHub) {
    this.ctx = ctx;
    this.hub = hub;
    hub.setSockets(this);
    // After a restart, sockets of request channels (kept in memory) point at nothing: close them.
    for (const ws of ctx.getWebSockets(TAG)) {
      const end = this.endOf(ws);
      if (end && !hub.exists(end.channel_id)) this.closeSocket(ws, CLOSE.requestEnded.code, "channel_gone");
    }
  }

  static matches(url: URL): boolean {
    return CHANNEL_PATH.test(url.pathname);
  }

  /** Each socket's end, read from its attachment once (it never changes): deserializing and
   * validating it for every chunk cost a writer's flood more than the chunks' own handling. */
  private readonly ends = new WeakMap<WebSocket, ChannelEnd | null>();

  endOf(ws: WebSocket): ChannelEnd | undefined {
    let end = this.ends.get(ws);
    if (end === undefined) {
      const a = channelAttachment.safeParse(ws.deserializeAttachment());
      end = a.success ? { channel_id: a.data.channel_id, dir: a.data.dir } : null;
      this.ends.set(ws, end);
    }
    return end ?? undefined;
  }

  /** Who created the channel `ws` is an end of (its writers share that principal's frame budget). */
  ownerOf(ws: WebSocket): string | undefined {
    const end = this.endOf(ws);
    return end && this.hub.ownerOf(end.channel_id);
  }

  accept(request: Request): Response {
    const url = new URL(request.url);
    let id: string;
    try {
      id = decodeURIComponent(CHANNEL_PATH.exec(url.pathname)?.[1] ?? "");
    } catch {
      return json(400, "invalid_arguments", "the channel id holds a malformed percent-escape");
    }
    const key = url.searchParams.get("key") ?? "";
    const dir = url.searchParams.get("dir");
    if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket")
      return json(426, "invalid_arguments", "channels need a WebSocket upgrade");
    if (dir !== "read" && dir !== "write") return json(400, "invalid_arguments", "dir must be read or write");
    const verdict = this.hub.authorize(id, key, dir);
    if (verdict === "not_found") return json(404, "not_found", "Not Found");
    const pair = new WebSocketPair();
    const [client, server] = [pair[0], pair[1]];
    if (verdict === "taken") {
      // Accepted as hibernatable too: a plain `accept()`ed socket would keep the object from
      // hibernating (and blocks eviction in tests) until its close handshake finishes.
      this.ctx.acceptWebSocket(server, [REFUSED_TAG]);
      server.close(CLOSE.endTaken.code, CLOSE.endTaken.reason);
      return new Response(null, { status: 101, webSocket: client });
    }
    this.ctx.acceptWebSocket(server, [TAG, endTag(id, dir)]);
    server.serializeAttachment({ v: 1, kind: "channel", channel_id: id, dir });
    this.ends.set(server, { channel_id: id, dir });
    // A reader gets what is buffered (and its close, if the writer is done) once the 101 is out:
    // a close sent before the handshake response left workerd's TCP connection open, so Node's
    // `ws` saw the close only after its 30 s close timeout. Frames meanwhile stay buffered in order.
    this.opening.add(server);
    this.hub.attached(id, dir);
    setTimeout(() => {
      this.opening.delete(server);
      for (const c of this.deferredCloses.splice(0)) this.closeSocket(c.ws, c.code, c.reason);
    }, 0);
    return new Response(null, { status: 101, webSocket: client });
  }

  /** Returns false when `ws` is not a channel socket. */
  message(ws: WebSocket, raw: string | ArrayBuffer): boolean {
    const end = this.endOf(ws);
    if (!end) return false;
    if (end.dir === "write") {
      const item: ChannelItem = typeof raw === "string" ? { type: "text", value: raw } : { type: "binary", value: raw };
      this.hub.write(end.channel_id, item);
    }
    return true; // a reader has nothing to say: ignored
  }

  closed(ws: WebSocket): boolean {
    const end = this.endOf(ws);
    if (!end) return false;
    if (end.dir === "read") this.readers.delete(end.channel_id);
    this.hub.closed(end.channel_id, end.dir);
    return true;
  }

  private socket(id: string, dir: ChannelDirection): WebSocket | undefined {
    return this.ctx.getWebSockets(endTag(id, dir))[0];
  }

  /** Reader sockets by channel, once looked up: a writer's every chunk goes to the same one. (Gone
   * with the socket's close; after an eviction, looked up again by tag.) */
  private readonly readers = new Map<string, WebSocket>();

  send(id: string, item: ChannelItem): boolean {
    let ws = this.readers.get(id);
    if (!ws) {
      ws = this.socket(id, "read");
      if (ws) this.readers.set(id, ws);
    }
    if (!ws || ws.readyState !== WebSocket.OPEN) return false;
    try {
      ws.send(item.value);
      return true;
    } catch {
      return false;
    }
  }

  close(id: string, dir: ChannelDirection, code: number, reason: string): void {
    const ws = this.socket(id, dir);
    if (!ws) return;
    if (this.opening.has(ws)) this.deferredCloses.push({ ws, code, reason });
    else this.closeSocket(ws, code, reason);
  }

  isOpen(id: string, dir: ChannelDirection): boolean {
    const ws = this.socket(id, dir);
    return ws !== undefined && ws.readyState === WebSocket.OPEN;
  }

  private closeSocket(ws: WebSocket, code: number, reason: string): void {
    try {
      ws.close(code, reason);
    } catch {
      // already closed
    }
  }
}
