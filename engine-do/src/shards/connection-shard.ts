// A connection shard (`<ns>#shard-<k>`): an Engine object that only holds worker sockets. It admits
// a socket through the catalog object (`<ns>`), relays what the worker sends to the catalog in
// ordered batches, and writes to the socket what the catalog sends back. It keeps no catalog, no
// state and no calls of its own: everything a worker does is decided by the catalog's core. Each
// socket carries its worker id in its attachment and as its tag, so a hibernated shard wakes
// knowing its sockets.
import {
  grantSchema,
  shardDownBatch,
  type ShardAttachOutcome,
  type ShardAttachRequest,
  type ShardBatchOutcome,
  type ShardDownBatch,
  type ShardInvokeOutcome,
  type ShardInvokeRequest,
  type ShardRoute,
  type ShardUpBatch,
} from "@iii-edge/protocol";
import { z } from "zod";
import { CLIENT_IP_HEADER, WS_PROTOCOL_HEADER, grantOf } from "../auth.ts";
import type { Clock, Log, Timers } from "../core/ports.ts";
import { BatchSender, frameSize } from "./batch-sender.ts";
import { DirectCalls } from "./direct-calls.ts";

/** What a shard calls on its catalog object (the Engine object's RPC methods, engine-object.ts). */
export interface CatalogPeer {
  shardAttach(req: ShardAttachRequest): Promise<ShardAttachOutcome>;
  shardFrames(batch: ShardUpBatch): Promise<ShardBatchOutcome>;
  shardRoute(functionId: string): Promise<ShardRoute>;
}

/** What a shard calls on another shard of its namespace (direct calls, direct-calls.ts). */
export interface ShardPeer {
  shardInvoke(req: ShardInvokeRequest): Promise<ShardInvokeOutcome>;
}

export interface ConnectionShardOptions {
  /** This object's name, `<ns>#shard-<k>`. */
  name: string;
  catalog(): CatalogPeer;
  shard(name: string): ShardPeer;
  log: Log;
  /** The object's clock, timers and ids (the engine core's ports): the direct calls' deadlines. */
  clock: Clock;
  timers: Timers;
  newId(): string;
  /** The deadline of a call that names none (INVOKE_TIMEOUT_MS, as the catalog's core has it). */
  defaultInvokeTimeoutMs?: number;
}

type UpItem = ShardUpBatch["items"][number];
type DownItem = ShardDownBatch["items"][number];

/** A shard socket's attachment: validated before it is trusted, like the engine's own. */
const shardAttachment = z.object({
  v: z.literal(1),
  kind: z.literal("shard-worker"),
  worker_id: z.string(),
  grant: grantSchema.optional(),
});
/** An attachment is at most 2,048 bytes (workerd); a grant bigger than this stays in memory only, and
 * after a wake that socket's calls all go through the catalog (which has its grant). */
const MAX_ATTACHED_GRANT_CHARS = 1_500;
/** Close codes: 1011 when the catalog no longer knows the connection (the SDK reconnects and replays
 * its registrations), 1013 when this shard's backlog to the catalog is full (try again later). */
const GONE_CLOSE_CODE = 1011;
const BUSY_CLOSE_CODE = 1013;

export class ConnectionShard {
  private readonly ctx: DurableObjectState;
  private readonly name: string;
  private readonly log: Log;
  private readonly catalogPeer: () => CatalogPeer;
  private catalog: CatalogPeer | undefined;
  /** Worker id → its socket (a cache of the tag lookup, rebuilt after hibernation). */
  private readonly sockets = new Map<string, WebSocket>();
  private readonly workerIds = new WeakMap<WebSocket, string>();
  /** Sockets being admitted: what the catalog sends them before the socket is accepted. */
  private readonly admitting = new Map<string, DownItem[]>();
  private readonly up: BatchSender<UpItem>;
  /** Frames of each socket queued for, or in flight to, the catalog: a direct call waits its turn. */
  private readonly upCount = new Map<string, number>();
  private readonly direct: DirectCalls;
  private readonly shardPeers = new Map<string, ShardPeer>();

  constructor(ctx: DurableObjectState, opts: ConnectionShardOptions) {
    this.ctx = ctx;
    this.name = opts.name;
    this.catalogPeer = opts.catalog;
    this.log = opts.log;
    this.up = new BatchSender<UpItem>(
      (items) => this.sendUp(items),
      (i) => ("f" in i ? frameSize(i.f) : 0),
    );
    this.direct = new DirectCalls(
      {
        name: opts.name,
        route: (id) =>
          this.peer()
            .shardRoute(id)
            .catch((e: unknown) => {
              this.catalog = undefined;
              throw e;
            }),
        invokeOn: async (shard, req) => {
          let p = this.shardPeers.get(shard);
          if (!p) this.shardPeers.set(shard, (p = opts.shard(shard)));
          try {
            return await p.shardInvoke(req);
          } catch (e) {
            // A broken stub stays broken; the call goes through the catalog instead.
            this.shardPeers.delete(shard);
            throw e;
          }
        },
        viaCatalog: (w, raw) => this.toCatalog(w, raw),
        socketOf: (w) => this.socketOf(w),
      },
      { clock: opts.clock, timers: opts.timers, newId: opts.newId },
      opts.defaultInvokeTimeoutMs,
    );
  }

  /** The direct path's target side: the `shardInvoke` RPC. */
  invoke(req: unknown): Promise<ShardInvokeOutcome> {
    return this.direct.invokeHere(req);
  }

  private toCatalog(w: string, f: string | ArrayBuffer): void {
    if (!this.up.push({ w, f })) {
      this.log.warn("connection shard backlog full; socket closed", { shard: this.name, backlog: this.up.backlog });
      this.closeSocket(w, BUSY_CLOSE_CODE, "the engine is busy: reconnect later");
      return;
    }
    this.upCount.set(w, (this.upCount.get(w) ?? 0) + 1);
  }

  private peer(): CatalogPeer {
    return (this.catalog ??= this.catalogPeer());
  }

  private async sendUp(items: UpItem[]): Promise<void> {
    try {
      await this.sendUpOnce(items);
    } finally {
      for (const i of items) {
        if (!("f" in i)) continue;
        const left = (this.upCount.get(i.w) ?? 1) - 1;
        if (left > 0) this.upCount.set(i.w, left);
        else this.upCount.delete(i.w);
      }
    }
  }

  private async sendUpOnce(items: UpItem[]): Promise<void> {
    try {
      const out = await this.peer().shardFrames({ shard: this.name, items });
      for (const w of out.gone) this.closeSocket(w, GONE_CLOSE_CODE, "the engine no longer knows this connection: reconnect");
    } catch (e) {
      // A broken stub stays broken: the next batch gets a new one. These frames are lost, so their
      // sockets are closed (the SDKs reconnect and replay) rather than left with unanswered frames.
      this.catalog = undefined;
      this.log.warn("catalog object unreachable from its connection shard", { shard: this.name, error: String(e) });
      for (const w of new Set(items.map((i) => i.w)))
        this.closeSocket(w, GONE_CLOSE_CODE, "the engine's catalog was unreachable: reconnect");
    }
  }

  /** A worker upgrade, from the front door (its grant already decided there). */
  async accept(request: Request): Promise<Response> {
    if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket")
      return Response.json({ error: { code: "not_found", message: "a connection shard serves worker sockets only" } }, { status: 404 });
    const grant = grantOf(request);
    if (!grant)
      return Response.json({ error: { code: "unauthorized", message: "no grant: connect through the engine Worker" } }, { status: 401 });
    const ip = request.headers.get(CLIENT_IP_HEADER) ?? undefined;
    const workerId = crypto.randomUUID();
    this.admitting.set(workerId, []);
    let out: ShardAttachOutcome;
    try {
      out = await this.peer().shardAttach(
        ip ? { shard: this.name, worker_id: workerId, grant, ip } : { shard: this.name, worker_id: workerId, grant },
      );
    } catch (e) {
      this.catalog = undefined;
      this.admitting.delete(workerId);
      return Response.json(
        { error: { code: "not_connected", message: `the namespace's catalog object did not answer: ${String(e)}` } },
        { status: 503 },
      );
    }
    const early = this.admitting.get(workerId) ?? [];
    this.admitting.delete(workerId);
    if (!out.ok) return Response.json({ error: out.error }, { status: 429 });
    const pair = new WebSocketPair();
    const [client, server] = [pair[0], pair[1]];
    this.ctx.acceptWebSocket(server, ["shard-worker", workerId]);
    const attached: z.infer<typeof shardAttachment> = { v: 1, kind: "shard-worker", worker_id: workerId };
    if (JSON.stringify(grant).length <= MAX_ATTACHED_GRANT_CHARS) attached.grant = grant;
    server.serializeAttachment(attached);
    this.direct.grants.set(workerId, grant);
    this.sockets.set(workerId, server);
    this.workerIds.set(server, workerId);
    for (const f of out.frames) server.send(f);
    for (const item of early) this.apply(server, item);
    const protocol = request.headers.get(WS_PROTOCOL_HEADER);
    return new Response(null, { status: 101, webSocket: client, headers: protocol ? { "Sec-WebSocket-Protocol": protocol } : {} });
  }

  private workerOf(ws: WebSocket): string | undefined {
    let w = this.workerIds.get(ws);
    if (w) return w;
    const a = shardAttachment.safeParse(ws.deserializeAttachment());
    if (!a.success) return undefined;
    w = a.data.worker_id;
    if (a.data.grant) this.direct.grants.set(w, a.data.grant);
    this.workerIds.set(ws, w);
    this.sockets.set(w, ws);
    return w;
  }

  socketOf(workerId: string): WebSocket | undefined {
    let ws = this.sockets.get(workerId);
    if (!ws) {
      ws = this.ctx.getWebSockets(workerId)[0];
      if (ws) this.sockets.set(workerId, ws);
    }
    return ws && ws.readyState === WebSocket.OPEN ? ws : undefined;
  }

  /** A frame from a worker: a direct call or its result (direct-calls.ts), else on to the catalog, in order. */
  message(ws: WebSocket, message: string | ArrayBuffer): void {
    const w = this.workerOf(ws);
    if (!w) return;
    if (this.direct.intercept(w, ws, message, !this.upCount.has(w))) return;
    this.toCatalog(w, message);
  }

  /** The socket closed or errored: the catalog cleans up after its worker. */
  closed(ws: WebSocket, code?: number): void {
    const w = this.workerOf(ws);
    if (w) {
      this.sockets.delete(w);
      this.direct.gone(w);
      this.up.push({ w, closed: true }, true);
    }
    try {
      ws.close(code === undefined || code === 1005 || code === 1006 ? 1000 : code, "closing");
    } catch {
      // already closed
    }
  }

  /** Frames and close orders from the catalog; answers the workers it does not hold. */
  deliver(sent: unknown): ShardBatchOutcome {
    const parsed = shardDownBatch.safeParse(sent);
    if (!parsed.success) {
      this.log.warn("malformed batch from the catalog object dropped", { shard: this.name, error: parsed.error.issues[0]?.message });
      return { gone: [] };
    }
    const gone: string[] = [];
    for (const item of parsed.data.items) {
      const ws = this.socketOf(item.w);
      if (ws) this.apply(ws, item);
      else if (this.admitting.has(item.w)) this.admitting.get(item.w)!.push(item);
      else gone.push(item.w);
    }
    return { gone };
  }

  /** Which of `workerIds` this shard no longer holds (the catalog's wake probe). */
  alive(workerIds: unknown): ShardBatchOutcome {
    const ids = z.array(z.string()).safeParse(workerIds);
    if (!ids.success) return { gone: [] };
    return { gone: ids.data.filter((w) => !this.socketOf(w) && !this.admitting.has(w)) };
  }

  private apply(ws: WebSocket, item: DownItem): void {
    try {
      if ("f" in item) ws.send(item.f);
      else ws.close(item.close.code, item.close.reason);
    } catch {
      // closed meanwhile: its close event tells the catalog
    }
  }

  private closeSocket(workerId: string, code: number, reason: string): void {
    const ws = this.socketOf(workerId);
    if (!ws) return;
    // The catalog hears of it now, whether or not the peer's close handshake comes back.
    this.sockets.delete(workerId);
    this.direct.gone(workerId);
    this.up.push({ w: workerId, closed: true }, true);
    try {
      ws.close(code, reason);
    } catch {
      // already closed
    }
  }
}
