// Browser stream subscriptions on the Engine object (protocol/README.md §8.6): the workerd side of
// core/builtins/streams.ts. Sockets are hibernatable (tag "stream"); each carries its id in a
// validated attachment, and its subscriptions live in SQLite, so both survive hibernation.
import type { StreamSocketPush } from "@iii-edge/protocol";
import { z } from "zod";
import type { StreamSocketPort, Streams } from "./core/builtins/streams.ts";
import { WS_PROTOCOL_HEADER, grantOf } from "./auth.ts";

const streamAttachment = z.object({ v: z.literal(1), kind: z.literal("stream"), worker_id: z.string(), sub: z.string().optional() });
const TAG = "stream";

export class StreamSockets implements StreamSocketPort {
  private readonly ctx: DurableObjectState;
  private readonly streams: Streams;
  private readonly byId = new Map<string, WebSocket>();

  constructor(ctx: DurableObjectState, streams: Streams) {
    this.ctx = ctx;
    this.streams = streams;
    streams.setSockets(this);
    const live = new Set<string>();
    for (const ws of ctx.getWebSockets(TAG)) {
      const id = this.idOf(ws);
      if (id) {
        live.add(id);
        this.byId.set(id, ws);
      }
    }
    // A restart or redeploy dropped sockets without a close event: their subscriptions end.
    streams.forgetSocketsExcept(live);
  }

  idOf(ws: WebSocket): string | undefined {
    const a = streamAttachment.safeParse(ws.deserializeAttachment());
    return a.success ? a.data.worker_id : undefined;
  }

  /** Accept an upgrade as socket `id` (its slot already taken), of principal `sub`. */
  accept(request: Request, id: string = crypto.randomUUID(), sub?: string): Response {
    if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket") {
      return Response.json(
        { error: { code: "invalid_arguments", message: "stream subscriptions need a WebSocket upgrade" } },
        { status: 426 },
      );
    }
    // Who this is was decided by the front door; each join is checked against it (streams.ts).
    const grant = grantOf(request);
    if (!grant)
      return Response.json({ error: { code: "unauthorized", message: "no grant: connect through the engine Worker" } }, { status: 401 });
    const pair = new WebSocketPair();
    const [client, server] = [pair[0], pair[1]];
    this.ctx.acceptWebSocket(server, [TAG]);
    server.serializeAttachment({ v: 1, kind: "stream", worker_id: id, ...(sub === undefined ? {} : { sub }) });
    this.byId.set(id, server);
    this.streams.opened(id, grant);
    // A browser that sent its token as a subprotocol (`iii, iii.bearer.<t>`) must get one of its
    // offers back, or it drops the handshake (the worker socket does the same).
    const protocol = request.headers.get(WS_PROTOCOL_HEADER);
    return new Response(null, { status: 101, webSocket: client, headers: protocol ? { "Sec-WebSocket-Protocol": protocol } : {} });
  }

  send(socketId: string, message: StreamSocketPush): boolean {
    let ws = this.byId.get(socketId);
    if (!ws) {
      ws = this.ctx.getWebSockets(TAG).find((w) => this.idOf(w) === socketId);
      if (!ws) return false;
      this.byId.set(socketId, ws);
    }
    try {
      ws.send(JSON.stringify(message));
      return true;
    } catch {
      return false;
    }
  }

  /** Is the stream socket `id` still open on this object? */
  holds(id: string): boolean {
    if (this.byId.has(id)) return true;
    return this.ctx.getWebSockets(TAG).some((w) => this.idOf(w) === id);
  }

  /** Returns false when `ws` is not a stream socket. */
  message(ws: WebSocket, raw: string | ArrayBuffer): boolean {
    const id = this.idOf(ws);
    if (!id) return false;
    this.byId.set(id, ws);
    this.ctx.waitUntil(this.streams.message(id, raw).catch((e) => console.error("stream socket message failed", e)));
    return true;
  }

  closed(ws: WebSocket): boolean {
    const id = this.idOf(ws);
    if (!id) return false;
    this.byId.delete(id);
    this.streams.closed(id);
    return true;
  }
}
