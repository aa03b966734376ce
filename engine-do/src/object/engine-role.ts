// The role of a namespace's own object (`<ns>`): the engine. Its core (../core) holds the catalog,
// calls, state and schedules; this adapts workerd to it: worker sockets as the core's connections,
// the side sockets (channels, streams, telemetry), a principal's slots over every namespace, the
// alarm, and the RPC methods the front door, Workers and other namespaces call. With
// CONNECTION_SHARDS > 1 it is also the catalog of its shards' sockets (../shards/catalog-side.ts).
import {
  type CallOutcome,
  type RpcTriggerRequest,
  type ShardAttachOutcome,
  type ShardAttachRequest,
  type ShardBatchOutcome,
  type ShardDownBatch,
  type ShardRoute,
  type ShardUpBatch,
  formatIssues,
  grantSchema,
  mayCall,
  mayUseNamespace,
  rpcTriggerRequest,
} from "@iii-edge/protocol";
import { z } from "zod";
import { CLIENT_IP_HEADER, WS_PROTOCOL_HEADER, grantOf } from "../auth.ts";
import { ChannelSockets, channelAttachment } from "../channel-sockets.ts";
import { EngineCore } from "../core/engine.ts";
import { installEngine, type Installed } from "../core/install.ts";
import type { Conn } from "../core/ports.ts";
import type { CloudMessageBody, DeliveryVerdict } from "../core/queues/cloudflare-queue.ts";
import { SocketConn } from "../core/socket-conn.ts";
import type { HttpTriggerRequest, HttpTriggerResponse } from "../core/triggers/http.ts";
import { rbacSessionOf } from "../rbac.ts";
import { CatalogShards } from "../shards/catalog-side.ts";
import { StreamSockets } from "../stream-sockets.ts";
import { acrossNamespaces, connectionLimits, enginePorts, invokeTimeout, openCalls } from "./config.ts";
import { PrincipalSlots } from "./principal-slots.ts";
import { allGone, type Health, type ObjectRole } from "./role.ts";
import { SideSockets } from "./side-sockets.ts";

/** What a socket carries through hibernation; validated before it is trusted. */
const attachment = z.discriminatedUnion("kind", [
  // `sub`: whose slot of MAX_CONNECTIONS_PER_PRINCIPAL_ACROSS_NAMESPACES the socket holds (absent on
  // sockets accepted before it was counted, and on telemetry sockets).
  z.object({ v: z.literal(1), kind: z.enum(["worker", "otel", "stream"]), worker_id: z.string(), sub: z.string().optional() }),
  channelAttachment,
]);
type Attachment = z.infer<typeof attachment>;

/** The catalog of a namespace's connection shards, as the engine uses it. */
type ShardCatalog = Pick<CatalogShards, "restore" | "probe" | "attach" | "frames" | "route" | "counts">;

/** A namespace without connection shards: nothing to restore, attach or route. */
const NO_SHARDS: ShardCatalog = {
  restore: () => [],
  probe: async () => {},
  attach: () => ({ ok: false, error: { code: "invalid_frame", message: "this engine object has no connection shards" } }),
  frames: (batch) => allGone((batch as ShardUpBatch | undefined)?.items),
  route: () => null,
  counts: () => ({}),
};

export class EngineRole implements ObjectRole {
  private readonly ctx: DurableObjectState;
  private readonly core: EngineCore;
  private readonly installed: Installed;
  private readonly streamSockets: StreamSockets;
  private readonly channelSockets: ChannelSockets;
  private readonly sides: SideSockets;
  private readonly slots: PrincipalSlots;
  private readonly shards: ShardCatalog;
  private readonly conns = new WeakMap<WebSocket, SocketConn>();
  private alarmAt: number | null = null;
  private readonly connectionLimits: { perPrincipal?: number; perIp?: number };

  constructor(ctx: DurableObjectState, env: Env, shardCount: number) {
    this.ctx = ctx;
    const ports = enginePorts(ctx, env, (at) => this.requestAlarm(at));
    const defaultInvokeTimeoutMs = invokeTimeout(env);
    // Spans go to D1 (core/telemetry/store.ts) and, with OTEL_EXPORTER_OTLP_ENDPOINT set, to a collector.
    const telemetry = { vars: env, db: env.DB, fetch: (url: string, init: RequestInit) => fetch(url, init) };
    const openCallBounds = openCalls(env);
    this.core = new EngineCore(
      ports,
      defaultInvokeTimeoutMs === undefined
        ? { telemetry, openCalls: openCallBounds }
        : { defaultInvokeTimeoutMs, telemetry, openCalls: openCallBounds },
    );
    this.connectionLimits = connectionLimits(env);
    this.slots = new PrincipalSlots(ctx, env, ports.log, acrossNamespaces(env, this.connectionLimits.perPrincipal));
    this.shards =
      shardCount > 1
        ? new CatalogShards({
            core: this.core,
            sql: ports.sql,
            shards: shardCount,
            peer: (s) => env.ENGINE.getByName(s),
            limits: this.connectionLimits,
          })
        : NO_SHARDS;
    this.installed = installEngine(this.core, env);
    this.streamSockets = new StreamSockets(ctx, this.installed.streams);
    this.channelSockets = new ChannelSockets(ctx, this.installed.channels);
    this.sides = new SideSockets({
      channels: this.channelSockets,
      streams: this.streamSockets,
      ingest: (frame) => this.core.telemetry.ingest(frame),
      log: ports.log,
    });
    ctx.blockConcurrencyWhile(async () => {
      this.alarmAt = await ctx.storage.getAlarm();
      const live: Conn[] = [];
      for (const ws of ctx.getWebSockets()) {
        const c = this.connFor(ws);
        if (c) live.push(c);
      }
      const remote = this.shards.restore();
      live.push(...remote);
      this.core.start(live);
      // Before any event: ghosts of sockets a restarted shard lost must not keep holding their ids.
      if (remote.length > 0) await this.shards.probe();
    });
  }

  private connFor(ws: WebSocket): SocketConn | undefined {
    let c = this.conns.get(ws);
    if (c) return c;
    const a = attachment.safeParse(ws.deserializeAttachment());
    if (!a.success || a.data.kind !== "worker") return undefined;
    c = new SocketConn(ws, a.data.worker_id);
    this.conns.set(ws, c);
    return c;
  }

  private requestAlarm(at: number): void {
    if (this.alarmAt !== null && this.alarmAt <= at && this.alarmAt > Date.now() - 1000) return;
    this.alarmAt = at;
    void this.ctx.storage.setAlarm(at);
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname.endsWith("/_iii/streams")) {
      // A stream socket is a connection of its principal like a worker's (the front door checked
      // its grant): it takes a slot of the principal's connections over every namespace.
      const g = grantOf(request);
      const id = crypto.randomUUID();
      if (g && request.headers.get("Upgrade")?.toLowerCase() === "websocket") {
        const refused = await this.slots.reserve(g.sub, id);
        if (refused) return Response.json({ error: refused }, { status: 429 });
      }
      return this.streamSockets.accept(request, id, g?.sub);
    }
    if (ChannelSockets.matches(url)) return this.channelSockets.accept(request);
    if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket") {
      if (url.pathname.endsWith("/_iii/health"))
        return Response.json({
          ok: true,
          namespace: this.core.ports.namespace,
          workers: this.core.conns.size,
          functions: this.core.catalog.functions.size,
        });
      return Response.json({ error: { code: "not_found", message: "Not Found" } }, { status: 404 });
    }
    // Who this is was decided by the front door (auth.ts); a request without its grant did not
    // come through it and is refused (fail closed).
    const grant = grantOf(request);
    if (!grant)
      return Response.json({ error: { code: "unauthorized", message: "no grant: connect through the engine Worker" } }, { status: 401 });
    const ip = request.headers.get(CLIENT_IP_HEADER) ?? undefined;
    const isOtel = url.pathname.endsWith("/otel");
    if (!isOtel) {
      const full = this.core.admitConnection(grant, ip, this.connectionLimits);
      if (full) return Response.json({ error: full }, { status: 429 });
    }
    const workerId = crypto.randomUUID();
    if (!isOtel) {
      const refused = await this.slots.reserve(grant.sub, workerId);
      if (refused) return Response.json({ error: refused }, { status: 429 });
      // Other upgrades ran while the slot was reserved: the per-namespace bounds are checked again,
      // and from here to connect() nothing else runs, so they hold exactly.
      const full = this.core.admitConnection(grant, ip, this.connectionLimits);
      if (full) {
        this.slots.release(grant.sub, workerId);
        return Response.json({ error: full }, { status: 429 });
      }
    }
    const pair = new WebSocketPair();
    const [client, server] = [pair[0], pair[1]];
    const a: Attachment = isOtel
      ? { v: 1, kind: "otel", worker_id: workerId }
      : { v: 1, kind: "worker", worker_id: workerId, sub: grant.sub };
    this.ctx.acceptWebSocket(server, [a.kind]);
    server.serializeAttachment(a);
    if (!isOtel) {
      const conn = new SocketConn(server, workerId);
      this.conns.set(server, conn);
      // A connection of iii's RBAC listener carries its session (rbac.ts); set by the front door only.
      const rbac = rbacSessionOf(request);
      this.core.connect(conn, crypto.randomUUID(), rbac ? { grant, ip, rbac } : { grant, ip });
    }
    // A browser that sent its token as a subprotocol must get one of its offers back.
    const protocol = request.headers.get(WS_PROTOCOL_HEADER);
    return new Response(null, { status: 101, webSocket: client, headers: protocol ? { "Sec-WebSocket-Protocol": protocol } : {} });
  }

  // Not async: nothing here awaits, and in a flood each message is its own event: a promise per
  // message would be work for nothing.
  webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): void {
    const side = this.sides.known(ws);
    if (side === undefined) {
      const conn = this.connFor(ws);
      if (conn) return this.core.message(conn, message);
    }
    this.sides.message(ws, message, side);
  }

  webSocketClose(ws: WebSocket, code: number): void {
    this.gone(ws);
    try {
      ws.close(code === 1005 || code === 1006 ? 1000 : code, "closing");
    } catch {
      // already closed
    }
  }

  webSocketError(ws: WebSocket): void {
    this.gone(ws);
  }

  /** A socket closed or errored: its slot goes back, and its worker or side socket ends. */
  private gone(ws: WebSocket): void {
    this.releaseSlot(ws);
    const conn = this.connFor(ws);
    if (conn) this.core.disconnect(conn.workerId);
    else this.sides.closed(ws);
  }

  /** A socket that held a slot is gone: give it back (once; a second close finds nothing). */
  private releaseSlot(ws: WebSocket): void {
    const a = attachment.safeParse(ws.deserializeAttachment());
    if (!a.success || a.data.kind === "channel" || a.data.sub === undefined) return;
    this.slots.release(a.data.sub, a.data.worker_id);
  }

  /** Which of these sockets (worker or stream socket ids) this object still holds: the principal
   * counter's check of leases an object that restarted could not release. */
  async liveConnections(ids: string[]): Promise<string[]> {
    if (!Array.isArray(ids)) return [];
    return ids.filter((id) => typeof id === "string" && (this.core.conns.has(id) || this.streamSockets.holds(id)));
  }

  async alarm(): Promise<void> {
    this.alarmAt = null;
    await this.core.alarm();
  }

  /** Call a function from a Worker or DO without a socket (protocol's `EngineRpc`). Never throws
   * for call failures. The request comes from another object, Worker or the front door: its type
   * is what callers promise, the schema what is trusted. */
  async trigger(sent: RpcTriggerRequest): Promise<CallOutcome> {
    const loose = sent as { function_id?: unknown; grant?: unknown } | null | undefined;
    if (!loose || typeof loose.function_id !== "string" || !loose.function_id) {
      return { ok: false, error: { code: "invalid_frame", message: "function_id is required" } };
    }
    // A grant read back from another object or the front door is validated before it is trusted.
    if (loose.grant !== undefined && !grantSchema.safeParse(loose.grant).success)
      return { ok: false, error: { code: "unauthorized", message: "malformed grant" } };
    const parsed = rpcTriggerRequest.safeParse(sent);
    if (!parsed.success) {
      return {
        ok: false,
        error: {
          code: "invalid_frame",
          message: `trigger: ${formatIssues(parsed.error, { root: "request" })}`,
        },
      };
    }
    const req = parsed.data;
    const grant = req.grant;
    if (grant && !mayUseNamespace(grant, this.core.ports.namespace)) {
      return { ok: false, error: { code: "forbidden", message: `'${grant.sub}' may not use namespace '${this.core.ports.namespace}'` } };
    }
    if (req.action?.type === "enqueue") {
      if (grant && !mayCall(grant, req.function_id))
        return { ok: false, error: { code: "forbidden", message: `'${grant.sub}' may not call ${req.function_id}` } };
      // The caller's principal is stamped now: the delivery runs without its grant.
      const payload =
        req.payload !== null && typeof req.payload === "object" && !Array.isArray(req.payload)
          ? this.core.stampPrincipal(req.payload as Record<string, unknown>, req.function_id, grant)
          : (req.payload ?? null);
      return this.core.enqueue({
        queue: req.action.queue,
        function_id: req.function_id,
        data: payload,
        idempotency_key: req.action.idempotency_key,
        traceparent: req.traceparent,
        baggage: req.baggage,
        ...(grant ? { principal: grant.sub } : {}),
      });
    }
    const call = this.core.invokeFrom({
      function_id: req.function_id,
      data: req.payload ?? null,
      metadata: req.metadata,
      traceparent: req.traceparent,
      baggage: req.baggage,
      timeoutMs: req.timeout_ms,
      grant,
      stampCaller: req.caller,
    });
    if (req.action?.type === "void") {
      this.ctx.waitUntil(call);
      return { ok: true };
    }
    return call;
  }

  /** Telemetry from Worker-hosted code (protocol's `EngineRpc`): one `/otel` frame, as a socket
   * worker sends it. A malformed frame is dropped and counted (iii.telemetry.frames.refused). */
  async telemetry(frame: string | ArrayBuffer): Promise<void> {
    if (typeof frame === "string" || frame instanceof ArrayBuffer) this.core.telemetry.ingest(frame);
  }

  /** HTTP-trigger routes (core/triggers/http.ts), forwarded by the front door (http-routes.ts). */
  async httpRequest(req: HttpTriggerRequest): Promise<HttpTriggerResponse> {
    return this.installed.http.handle(req);
  }

  /** One Cloudflare Queues delivery, handed back by the Worker's queue() handler (queue-consumer.ts). */
  async deliverQueued(body: CloudMessageBody, attempts: number): Promise<DeliveryVerdict> {
    return this.installed.queues.deliverCloud(body, attempts);
  }

  /** For the front door (HTTP triggers and the engine API): the core, in this object. */
  async health(): Promise<Health> {
    return {
      ok: true,
      namespace: this.core.ports.namespace,
      workers: this.core.conns.size,
      functions: this.core.catalog.functions.size,
      ...(this.shards === NO_SHARDS ? {} : { shards: this.shards.counts() }),
    };
  }

  // ------------------------------------------------------------------ the catalog of its shards

  /** A connection shard admits a socket through its catalog object (this one). */
  async shardAttach(req: ShardAttachRequest): Promise<ShardAttachOutcome> {
    return this.shards.attach(req);
  }

  /** What a connection shard's sockets sent, in order. */
  async shardFrames(batch: ShardUpBatch): Promise<ShardBatchOutcome> {
    return this.shards.frames(batch);
  }

  /** Where a function's worker is, for a shard's direct calls (null: call through this object). */
  async shardRoute(functionId: string): Promise<ShardRoute> {
    return this.shards.route(functionId);
  }

  // What only a connection shard answers: this object holds none of its sockets.
  async shardDeliver(batch: ShardDownBatch): Promise<ShardBatchOutcome> {
    return allGone(batch?.items);
  }
  async shardInvoke(): Promise<{ stale: true }> {
    return { stale: true };
  }
  async shardAlive(workerIds: string[]): Promise<ShardBatchOutcome> {
    return { gone: Array.isArray(workerIds) ? workerIds : [] };
  }
}
