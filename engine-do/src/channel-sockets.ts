// Channel sockets on the Engine object (protocol/README.md §10): the workerd side of
// core/channels/hub.ts. `GET …/ws/channels/<id>?key=…&dir=read|write` arrives here from the front
// door.
//
// Two kinds of socket, on purpose:
// * a write end is hibernatable: it carries {kind:"channel", channel_id, dir} in a validated
//   attachment and a tag naming its end, so it is found again after the object wakes, and a writer
//   that streams slowly never keeps the object awake. Its normal end is a close the client starts,
//   which workerd completes at once.
// * a read end (and an end refused at attach) is a standard socket, held in memory here. The
//   engine is the one that closes a reader (after the last item), and workerd does not end the TCP
//   connection of a *hibernatable* socket the server closed: after the client's close reply it
//   stays open until the object hibernates (10 s idle) or the client gives up (Node's `ws`: 30 s) —
//   measured under `wrangler dev` with a do-nothing object too, so it is the runtime's, not the
//   engine's. iii-sdk's ChannelReader (`ws`) reports the end of the stream only when TCP closes, so
//   `readAll()` returned 10–30 s late. A standard socket is released as soon as the close handshake
//   completes (measured: the end reaches the reader within milliseconds). The cost: the object stays
//   awake while a reader is attached, which a request channel does anyway (its request keeps it
//   awake) and a created channel does for as long as its stream runs (at most CHANNEL_TTL_MS for one
//   nobody writes to, hub.ts). A standard socket does not survive the object's eviction; nor does
//   the in-memory request channel it reads, and a created channel's buffered items stay in SQLite.
import { z } from "zod";
import { CHANNEL_DIRECTIONS, FLOOD_CLOSE_CODE, type ChannelDirection } from "@iii-edge/protocol";
import { CLOSE, type ChannelHub, type ChannelItem, type ChannelSocketPort } from "./core/channels/hub.ts";
import { CHANNEL_FRAMES, SocketBudget, floodCloseReason } from "./core/socket-budget.ts";

export const channelAttachment = z.object({ v: z.literal(1), kind: z.literal("channel"), channel_id: z.string(), dir: z.enum(CHANNEL_DIRECTIONS) });
const TAG = "channel";
/** One tag per end: `getWebSockets(tag)` finds the socket after hibernation (tags ≤ 256 chars). */
const endTag = (id: string, dir: ChannelDirection) => `ch:${dir}:${id}`;
const CHANNEL_PATH = /\/ws\/channels\/([^/]{1,128})$/;

/** Not closing or closed (a standard socket just accepted may read as CONNECTING while its 101 is
 * on the way; what is sent meanwhile goes out after it, in order). */
const live = (ws: WebSocket) => ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING;

const json = (status: number, code: string, message: string) => Response.json({ error: { code, message } }, { status });

export class ChannelSockets implements ChannelSocketPort {
  private readonly ctx: DurableObjectState;
  private readonly hub: ChannelHub;
  /** Attached read ends by channel id (standard sockets: see the top of this file). */
  private readonly readers = new Map<string, WebSocket>();
  /** Sockets whose 101 response is not out yet, and closes waiting for it. */
  private readonly opening = new Set<WebSocket>();
  private readonly deferredCloses: { ws: WebSocket; code: number; reason: string }[] = [];

  constructor(ctx: DurableObjectState, hub: ChannelHub) {
    this.ctx = ctx;
    this.hub = hub;
    hub.setSockets(this);
    // After a restart, writer sockets of request channels (kept in memory) point at nothing: close them.
    for (const ws of ctx.getWebSockets(TAG)) {
      const end = this.endOf(ws);
      if (end && !hub.exists(end.channel_id)) this.closeSocket(ws, CLOSE.requestEnded.code, "channel_gone");
    }
  }

  static matches(url: URL): boolean {
    return CHANNEL_PATH.test(url.pathname);
  }

  /** The end a hibernatable (writer) socket holds; undefined for any other socket. */
  endOf(ws: WebSocket): { channel_id: string; dir: ChannelDirection } | undefined {
    const a = channelAttachment.safeParse(ws.deserializeAttachment());
    return a.success ? a.data : undefined;
  }

  accept(request: Request): Response {
    const url = new URL(request.url);
    const id = decodeURIComponent(CHANNEL_PATH.exec(url.pathname)?.[1] ?? "");
    const key = url.searchParams.get("key") ?? "";
    const dir = url.searchParams.get("dir");
    if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket") return json(426, "invalid_arguments", "channels need a WebSocket upgrade");
    if (dir !== "read" && dir !== "write") return json(400, "invalid_arguments", "dir must be read or write");
    const verdict = this.hub.authorize(id, key, dir);
    if (verdict === "not_found") return json(404, "not_found", "Not Found");
    const pair = new WebSocketPair();
    const [client, server] = [pair[0], pair[1]];
    // Closes wait for the 101 to be out (frames meanwhile queue behind the handshake, in order).
    this.opening.add(server);
    setTimeout(() => this.opened(server), 0);
    if (verdict !== "ok") {
      // Taken, or a channel that ended: accepted and closed at once with why (a standard socket,
      // so the close reaches the client without delay).
      server.accept();
      this.deferredCloses.push({ ws: server, code: verdict.code, reason: verdict.reason });
      return new Response(null, { status: 101, webSocket: client });
    }
    if (dir === "read") this.acceptReader(server, id);
    else {
      this.ctx.acceptWebSocket(server, [TAG, endTag(id, dir)]);
      server.serializeAttachment({ v: 1, kind: "channel", channel_id: id, dir });
    }
    // A reader gets what is buffered, and its close if the writer is done, once the 101 is out.
    this.hub.attached(id, dir);
    return new Response(null, { status: 101, webSocket: client });
  }

  /** A reader's socket: anything it sends is ignored, within the budget of a channel end (a reader
   * over it is closed, as a flooding writer is). */
  private acceptReader(ws: WebSocket, id: string): void {
    ws.accept();
    this.readers.set(id, ws);
    const budget = new SocketBudget(Date.now(), CHANNEL_FRAMES);
    // Once per socket, whoever closed it (the engine after the last item, the client, an error).
    const gone = () => {
      if (this.readers.get(id) !== ws) return;
      this.readers.delete(id);
      this.hub.closed(id, "read");
    };
    ws.addEventListener("message", (e) => {
      const data = e.data as string | ArrayBuffer;
      if (budget.admit(typeof data === "string" ? data.length : data.byteLength, Date.now()) === "admit") return;
      budget.closed = true;
      this.closeSocket(ws, FLOOD_CLOSE_CODE, floodCloseReason(CHANNEL_FRAMES));
      gone();
    });
    ws.addEventListener("close", gone);
    ws.addEventListener("error", gone);
  }

  /** The 101 for `ws` is out: send the closes that waited for it. */
  private opened(ws: WebSocket): void {
    this.opening.delete(ws);
    const waiting = this.deferredCloses.splice(0);
    for (const c of waiting) {
      if (this.opening.has(c.ws)) this.deferredCloses.push(c);
      else this.closeSocket(c.ws, c.code, c.reason);
    }
  }

  /** Returns false when `ws` is not a (hibernatable) channel socket. */
  message(ws: WebSocket, raw: string | ArrayBuffer): boolean {
    const end = this.endOf(ws);
    if (!end) return false;
    if (end.dir === "write") {
      const item: ChannelItem = typeof raw === "string" ? { type: "text", value: raw } : { type: "binary", value: raw };
      this.hub.write(end.channel_id, item);
    }
    return true;
  }

  closed(ws: WebSocket): boolean {
    const end = this.endOf(ws);
    if (!end) return false;
    this.hub.closed(end.channel_id, end.dir);
    return true;
  }

  private socket(id: string, dir: ChannelDirection): WebSocket | undefined {
    return dir === "read" ? this.readers.get(id) : this.ctx.getWebSockets(endTag(id, dir))[0];
  }

  send(id: string, item: ChannelItem): boolean {
    const ws = this.socket(id, "read");
    if (!ws || !live(ws)) return false;
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
    return ws !== undefined && live(ws);
  }

  private closeSocket(ws: WebSocket, code: number, reason: string): void {
    try {
      ws.close(code, reason);
    } catch {
      // already closed
    }
  }
}
