// The Engine Durable Object: a thin shell that adapts workerd (hibernatable WebSockets, SQLite,
// the alarm, RPC) to the plain core in ./core. One object per iii namespace.
import { DurableObject } from "cloudflare:workers";
import { z } from "zod";
import {
  grantSchema,
  mayCall,
  mayUseNamespace,
  rpcTriggerRequest,
  type CallOutcome,
  type ErrorBody,
  type EngineRpc,
  type RpcTriggerRequest,
  formatIssues,
} from "@iii-edge/protocol";
import { CLIENT_IP_HEADER, WS_PROTOCOL_HEADER, grantOf } from "./auth.ts";
import { rbacSessionOf } from "./rbac.ts";
import { EngineCore } from "./core/engine.ts";
import { httpFunctionsPort } from "./core/http-invoke.ts";
import { installEngine, type Installed } from "./core/install.ts";
import type { CloudMessageBody, DeliveryVerdict } from "./core/queues/cloudflare-queue.ts";
import type { HttpTriggerRequest, HttpTriggerResponse } from "./core/triggers/http.ts";
import { ChannelSockets, channelAttachment } from "./channel-sockets.ts";
import { StreamSockets } from "./stream-sockets.ts";
import { FLOOD_CLOSE_CODE, isReservedSub } from "@iii-edge/protocol";
import {
  CHANNEL_FRAMES,
  CONTROL_FRAMES,
  STREAM_SOCKET_FRAMES,
  SocketBudget,
  floodCloseReason,
  type FrameLimits,
} from "./core/socket-budget.ts";
import { PrincipalBudgets } from "./core/principal-budgets.ts";

/** A side socket's frame budget, by the kind in its attachment (telemetry: a worker's). */
const sideFrames = (kind: string): FrameLimits =>
  kind === "channel" ? CHANNEL_FRAMES : kind === "stream" ? STREAM_SOCKET_FRAMES : CONTROL_FRAMES;
/** A socket that is not a worker connection, as the object keeps it between its frames. */
interface SideSocket {
  kind: string;
  budget: SocketBudget;
  /** Whose shared budget it spends: undefined until its first frame asks, null for nobody's. */
  principal: string | null | undefined;
}
import { edgeHostPort, type EdgeHostBinding, type KeyedObjectsBinding } from "./core/edge-hosts.ts";
import type {
  ShardAttachOutcome,
  ShardAttachRequest,
  ShardBatchOutcome,
  ShardDownBatch,
  ShardInvokeOutcome,
  ShardInvokeRequest,
  ShardRoute,
  ShardUpBatch,
} from "@iii-edge/protocol";
import { CatalogShards } from "./shards/catalog-side.ts";
import { connectionShards, shardOf } from "./shards/config.ts";
import { ConnectionShard } from "./shards/connection-shard.ts";
import type { Conn, EnginePorts } from "./core/ports.ts";
import { SocketConn } from "./core/socket-conn.ts";
import {
  MAX_CONNECTIONS_PER_PRINCIPAL,
  MAX_CONNECTIONS_PER_PRINCIPAL_ACROSS_NAMESPACES,
  openCallLimits,
  type OpenCallLimits,
} from "./core/bounds.ts";

/** What a socket carries through hibernation; validated before it is trusted. */
const attachment = z.discriminatedUnion("kind", [
  // `sub`: whose slot of MAX_CONNECTIONS_PER_PRINCIPAL_ACROSS_NAMESPACES the socket holds (absent on
  // sockets accepted before it was counted, and on telemetry sockets).
  z.object({ v: z.literal(1), kind: z.enum(["worker", "otel", "stream"]), worker_id: z.string(), sub: z.string().optional() }),
  channelAttachment,
]);
type Attachment = z.infer<typeof attachment>;

/** MAX_CONNECTIONS_PER_* (core/bounds.ts) may be lowered per deployment (tests use small ones). */
function connectionLimits(env: Env): { perPrincipal?: number; perIp?: number } {
  const n = (v: string | undefined) => (v && /^\d+$/.test(v) ? Number(v) : undefined);
  const out: { perPrincipal?: number; perIp?: number } = {};
  const p = n(env.MAX_CONNECTIONS_PER_TOKEN);
  const i = n(env.MAX_CONNECTIONS_PER_IP);
  if (p !== undefined) out.perPrincipal = p;
  if (i !== undefined) out.perIp = i;
  return out;
}

/** MAX_OPEN_CALLS and MAX_OPEN_CALLS_PER_PRINCIPAL (core/bounds.ts) may be lowered per deployment
 * (tests use small ones); openCallLimits keeps a principal's share below what principals may hold. */
function openCalls(env: Env): OpenCallLimits {
  const n = (v: string | undefined) => (v && /^\d+$/.test(v) ? Number(v) : undefined);
  return openCallLimits(n(env.MAX_OPEN_CALLS), n(env.MAX_OPEN_CALLS_PER_PRINCIPAL));
}

/** How many connections one principal may hold over every namespace: the var, or the default but
 * never below the per-namespace bound (a deployment that raised that one meant more sockets). */
function acrossNamespaces(env: Env, perNamespace: number | undefined): number {
  const v = env.MAX_CONNECTIONS_PER_TOKEN_ACROSS_NAMESPACES;
  if (v && /^\d+$/.test(v) && Number(v) > 0) return Number(v);
  return Math.max(MAX_CONNECTIONS_PER_PRINCIPAL_ACROSS_NAMESPACES, perNamespace ?? MAX_CONNECTIONS_PER_PRINCIPAL);
}

/** Longest deadline INVOKE_TIMEOUT_MS may set: the bound of an `invokefunction`'s `timeout_ms`. */
const MAX_TIMEOUT_MS = 15 * 60_000;

/** INVOKE_TIMEOUT_MS, when it is a deadline a call may have (1…MAX_TIMEOUT_MS). */
function invokeTimeout(env: Env): number | undefined {
  const v = env.INVOKE_TIMEOUT_MS;
  if (!v || !/^\d+$/.test(v)) return undefined;
  const ms = Number(v);
  return ms >= 1 && ms <= MAX_TIMEOUT_MS ? ms : undefined;
}

export class Engine extends DurableObject<Env> implements EngineRpc {
  private readonly core: EngineCore;
  private readonly installed: Installed;
  private readonly streamSockets: StreamSockets;
  private readonly channelSockets: ChannelSockets;
  private readonly conns = new WeakMap<WebSocket, SocketConn>();
  private alarmAt: number | null = null;
  private readonly connectionLimits: { perPrincipal?: number; perIp?: number };
  /** MAX_CONNECTIONS_PER_PRINCIPAL_ACROSS_NAMESPACES for this deployment (principal-connections.ts). */
  private readonly perPrincipalEverywhere: number;
  /** CONNECTION_SHARDS > 1 (shards/): this object is a connection shard, or the catalog of some. */
  private readonly shard: ConnectionShard | undefined;
  private readonly catalogShards: CatalogShards | undefined;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const shardCount = connectionShards(env);
    const asShard = shardCount > 1 ? shardOf(ctx.id.name) : undefined;
    const sql = ctx.storage.sql;
    const edgeHosts: EnginePorts["edgeHosts"] = {};
    for (const name of (asShard ? "" : (env.EDGE_HOSTS ?? ""))
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean)) {
      // Named by a var, so Env cannot type it: what the binding answers is parsed (core/edge-hosts.ts).
      const binding = (env as unknown as Record<string, unknown>)[name];
      if (binding) edgeHosts[name] = edgeHostPort(name, binding as EdgeHostBinding, (objects) => keyedObjectsOf(env, objects));
    }
    const ports: EnginePorts = {
      namespace: ctx.id.name ?? "default",
      sql: {
        exec: (q, ...b) => sql.exec(q, ...b).toArray() as never,
        transaction: (fn) => ctx.storage.transactionSync(fn),
      },
      clock: { now: () => Date.now() },
      timers: { set: (fn, ms) => setTimeout(fn, ms), clear: (h) => clearTimeout(h as number) },
      alarm: { request: (at) => this.requestAlarm(at) },
      log: {
        info: (msg, fields) => console.log(JSON.stringify({ level: "info", msg, ...fields })),
        warn: (msg, fields) => console.warn(JSON.stringify({ level: "warn", msg, ...fields })),
      },
      newId: () => crypto.randomUUID(),
      background: (p) => ctx.waitUntil(p.catch((e) => console.error("background task failed", e))),
      edgeHosts,
      httpFunctions: httpFunctionsPort(env as unknown as Record<string, unknown>),
      otherNamespace: (ns): EngineRpc => env.ENGINE.getByName(ns),
    };
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
    this.perPrincipalEverywhere = acrossNamespaces(env, this.connectionLimits.perPrincipal);
    this.shard = asShard
      ? new ConnectionShard(ctx, {
          name: ctx.id.name!,
          catalog: () => env.ENGINE.getByName(asShard.namespace),
          shard: (s) => env.ENGINE.getByName(s),
          log: this.core.ports.log,
          clock: this.core.ports.clock,
          timers: this.core.ports.timers,
          newId: () => this.core.ports.newId(),
          defaultInvokeTimeoutMs: this.core.defaultInvokeTimeoutMs,
        })
      : undefined;
    this.catalogShards =
      shardCount > 1 && !asShard
        ? new CatalogShards({
            core: this.core,
            sql: ports.sql,
            shards: shardCount,
            peer: (s) => env.ENGINE.getByName(s),
            limits: this.connectionLimits,
          })
        : undefined;
    this.installed = installEngine(this.core, env);
    this.streamSockets = new StreamSockets(ctx, this.installed.streams);
    this.channelSockets = new ChannelSockets(ctx, this.installed.channels);
    // A JSON ping is answered by the runtime without waking the object (§2.4); protocol-level
    // pings are answered by workerd itself.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair('{"type":"ping"}', '{"type":"pong"}'));
    ctx.blockConcurrencyWhile(async () => {
      this.alarmAt = await ctx.storage.getAlarm();
      const live: Conn[] = [];
      for (const ws of ctx.getWebSockets()) {
        const c = this.connFor(ws);
        if (c) live.push(c);
      }
      const remote = this.catalogShards?.restore() ?? [];
      live.push(...remote);
      this.core.start(live);
      // Before any event: ghosts of sockets a restarted shard lost must not keep holding their ids.
      if (remote.length > 0) await this.catalogShards!.probe();
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

  override async fetch(request: Request): Promise<Response> {
    if (this.shard) return this.shard.accept(request);
    const url = new URL(request.url);
    if (url.pathname.endsWith("/_iii/streams")) {
      // A stream socket is a connection of its principal like a worker's (the front door checked
      // its grant): it takes a slot of the principal's connections over every namespace.
      const g = grantOf(request);
      const id = crypto.randomUUID();
      if (g && request.headers.get("Upgrade")?.toLowerCase() === "websocket") {
        const refused = await this.reserveSlot(g.sub, id);
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
      const refused = await this.reserveSlot(grant.sub, workerId);
      if (refused) return Response.json({ error: refused }, { status: 429 });
      // Other upgrades ran while the slot was reserved: the per-namespace bounds are checked again,
      // and from here to connect() nothing else runs, so they hold exactly.
      const full = this.core.admitConnection(grant, ip, this.connectionLimits);
      if (full) {
        this.giveBack(grant.sub, workerId);
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

  // ------------------------------------------------------------------ socket messages

  /** The sockets that are not worker connections (channel ends, stream and telemetry sockets):
   * what each is (read from its attachment once, not once per frame), its frame/byte budget (a
   * worker connection's is kept by the core, core/admission.ts) and whose shared budget it spends
   * too. One lookup per frame: in a flood most frames are dropped right after it. */
  private readonly sides = new WeakMap<WebSocket, SideSocket>();
  /** What all the channel writers of one principal (the channels' creator) may send together
   * (core/principal-budgets.ts). */
  private readonly sharedBudgets: Record<string, PrincipalBudgets | undefined> = { channel: new PrincipalBudgets(CHANNEL_FRAMES) };

  // Not async: nothing here awaits, and in a flood each message is its own event: a promise per
  // message would be work for nothing.
  override webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): void {
    if (this.shard) return this.shard.message(ws, message);
    let side = this.sides.get(ws);
    if (side === undefined) {
      const conn = this.connFor(ws);
      if (conn) return this.core.message(conn, message);
      side = this.sideOf(ws);
    }
    // A socket closed for flooding: what the runtime still delivers is dropped unseen.
    if (side.budget.closed) return;
    // The budget before anything looks at the frame.
    if (!this.admitSide(ws, side, message)) return;
    if (side.kind === "channel") this.channelSockets.message(ws, message);
    else if (side.kind === "stream") this.streamSockets.message(ws, message);
    // Telemetry (§11): binary frames are stored and exported (core/telemetry); text frames ignored.
    else if (side.kind === "otel" && typeof message !== "string") this.core.telemetry.ingest(message);
    // Else a refused channel end.
  }

  private sideOf(ws: WebSocket): SideSocket {
    const a = ws.deserializeAttachment() as { kind?: unknown } | null;
    const kind = typeof a?.kind === "string" ? a.kind : "none";
    const side: SideSocket = { kind, budget: new SocketBudget(Date.now(), sideFrames(kind)), principal: undefined };
    this.sides.set(ws, side);
    return side;
  }

  /** A side socket's budget (socket-budget.ts): over it, frames are dropped (these protocols have no
   * error frame to warn with), and a socket still over it FLOOD_GRACE_MS later is closed. A channel
   * is a byte stream, where a dropped chunk would corrupt what the reader gets: its end is closed at
   * the first frame over budget instead. */
  private admitSide(ws: WebSocket, side: SideSocket, message: string | ArrayBuffer): boolean {
    const now = Date.now();
    const { kind, budget } = side;
    const size = typeof message === "string" ? message.length : message.byteLength;
    let verdict = budget.admit(size, now);
    const shared = this.sharedBudgets[kind];
    // Within its own budget but not its principal's: as if over its own.
    if (verdict === "admit" && shared && !shared.take(this.sidePrincipal(ws, side), size, now)) verdict = budget.over(now);
    if (verdict === "admit") return true;
    if (verdict === "close" || kind === "channel") {
      budget.closed = true;
      this.closeFlooder(ws, kind, budget);
    } else if (verdict === "warn") {
      const leftOut = budget.log(now);
      if (leftOut !== undefined)
        this.core.ports.log.warn("socket over budget; frames dropped", {
          kind,
          dropped: budget.dropped,
          ...(leftOut > 0 ? { lines_left_out: leftOut } : {}),
        });
    }
    return false;
  }

  /** Whose shared budget the socket spends (null: none), found on its first frame. */
  private sidePrincipal(ws: WebSocket, side: SideSocket): string | undefined {
    if (side.principal === undefined) {
      const who = side.kind === "channel" ? this.channelSockets.ownerOf(ws) : undefined;
      // The open grant (an engine without auth) is every local client: nobody in particular.
      side.principal = typeof who === "string" && !isReservedSub(who) ? who : null;
    }
    return side.principal ?? undefined;
  }

  private closeFlooder(ws: WebSocket, kind: string, budget: SocketBudget): void {
    this.core.ports.log.warn("socket closed for flooding", { kind, dropped: budget.dropped });
    const reason = floodCloseReason(sideFrames(kind));
    // (The attachment is read before the close: a closed socket no longer has one.)
    const end = kind === "channel" ? this.channelSockets.endOf(ws) : undefined;
    try {
      ws.close(FLOOD_CLOSE_CODE, reason);
    } catch {
      // already closed
    }
    // The reader of a cut channel learns it was cut: the writer's close event alone would end the
    // stream as complete.
    if (end?.dir === "write") this.channelSockets.close(end.channel_id, "read", FLOOD_CLOSE_CODE, reason);
  }

  override async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    if (this.shard) return this.shard.closed(ws, code);
    this.releaseSlot(ws);
    const conn = this.connFor(ws);
    if (conn) this.core.disconnect(conn.workerId);
    else if (!this.channelSockets.closed(ws)) this.streamSockets.closed(ws);
    try {
      ws.close(code === 1005 || code === 1006 ? 1000 : code, "closing");
    } catch {
      // already closed
    }
  }

  override async webSocketError(ws: WebSocket): Promise<void> {
    if (this.shard) return this.shard.closed(ws);
    this.releaseSlot(ws);
    const conn = this.connFor(ws);
    if (conn) this.core.disconnect(conn.workerId);
    else if (!this.channelSockets.closed(ws)) this.streamSockets.closed(ws);
  }

  // ------------------------------------------------------------------ connections over every namespace

  /** Take a slot of `sub`'s connections over every namespace (principal-connections.ts) for the
   * socket `id`, or say why not. Without the PRINCIPALS binding (plain workerd test setups) only the
   * per-namespace bound applies; a counter that cannot be reached lets the socket in (the
   * per-namespace bound still holds) rather than locking every client out. */
  private async reserveSlot(sub: string, id: string): Promise<ErrorBody | undefined> {
    if (!this.env.PRINCIPALS) return undefined;
    const limit = this.perPrincipalEverywhere;
    try {
      const out = await this.env.PRINCIPALS.getByName(sub).reserve({ object: this.ctx.id.name ?? "default", id }, limit);
      if (out.ok) return undefined;
      return { code: "too_many_connections", message: `'${sub}' already holds ${limit} connections over all namespaces` };
    } catch (e) {
      this.core.ports.log.warn("principal connection count unreachable; admitted on the per-namespace bound", { sub, error: String(e) });
      return undefined;
    }
  }

  /** A socket that held a slot is gone: give it back (once; a second close finds nothing). */
  private releaseSlot(ws: WebSocket): void {
    const a = attachment.safeParse(ws.deserializeAttachment());
    if (!a.success || a.data.kind === "channel" || a.data.sub === undefined) return;
    this.giveBack(a.data.sub, a.data.worker_id);
  }

  private giveBack(sub: string, id: string): void {
    if (!this.env.PRINCIPALS) return;
    const lease = { object: this.ctx.id.name ?? "default", id };
    this.ctx.waitUntil(
      this.env.PRINCIPALS.getByName(sub)
        .release(lease)
        .catch(() => {}),
    );
  }

  /** Which of these sockets (worker or stream socket ids) this object still holds: the principal
   * counter's check of leases an object that restarted could not release. */
  async liveConnections(ids: string[]): Promise<string[]> {
    if (!Array.isArray(ids)) return [];
    return ids.filter((id) => typeof id === "string" && (this.core.conns.has(id) || this.streamSockets.holds(id)));
  }

  override async alarm(): Promise<void> {
    this.alarmAt = null;
    await this.core.alarm();
  }

  // ------------------------------------------------------------------ RPC (sdk-edge, front door)

  /** Call a function from a Worker or DO without a socket (protocol's `EngineRpc`). Never throws
   * for call failures. The request comes from another object, Worker or the front door: its type
   * is what callers promise, the schema what is trusted. */
  async trigger(sent: RpcTriggerRequest): Promise<CallOutcome> {
    if (this.shard)
      return { ok: false, error: { code: "function_not_found", message: "a connection shard runs no functions: call its namespace" } };
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
  async health(): Promise<{ ok: true; namespace: string; workers: number; functions: number; shards?: Record<string, number> }> {
    const shards = this.catalogShards?.counts();
    return {
      ok: true,
      namespace: this.core.ports.namespace,
      workers: this.core.conns.size,
      functions: this.core.catalog.functions.size,
      ...(shards ? { shards } : {}),
    };
  }

  // ------------------------------------------------------------------ connection shards (shards/)

  /** A connection shard admits a socket through its catalog object (this one). */
  async shardAttach(req: ShardAttachRequest): Promise<ShardAttachOutcome> {
    return (
      this.catalogShards?.attach(req) ?? {
        ok: false,
        error: { code: "invalid_frame", message: "this engine object has no connection shards" },
      }
    );
  }

  /** What a connection shard's sockets sent, in order. */
  async shardFrames(batch: ShardUpBatch): Promise<ShardBatchOutcome> {
    return this.catalogShards?.frames(batch) ?? { gone: [...new Set((batch?.items ?? []).map((i) => i.w))] };
  }

  /** What the catalog object sends a connection shard's sockets (this one). */
  async shardDeliver(batch: ShardDownBatch): Promise<ShardBatchOutcome> {
    return this.shard?.deliver(batch) ?? { gone: [...new Set((batch?.items ?? []).map((i) => i.w))] };
  }

  /** Where a function's worker is, for a shard's direct calls (null: call through this object). */
  async shardRoute(functionId: string): Promise<ShardRoute> {
    return this.catalogShards?.route(functionId) ?? null;
  }

  /** A direct call from another shard to a worker on this one (shards/direct-calls.ts). */
  async shardInvoke(req: ShardInvokeRequest): Promise<ShardInvokeOutcome> {
    return this.shard ? this.shard.invoke(req) : { stale: true };
  }

  /** The catalog's wake probe: which of these workers' sockets this shard no longer holds. */
  async shardAlive(workerIds: string[]): Promise<ShardBatchOutcome> {
    return this.shard?.alive(workerIds) ?? { gone: Array.isArray(workerIds) ? workerIds : [] };
  }
}

/** Bindings a host may not name as its keyed objects: the engine's own classes. */
const ENGINE_BINDINGS = new Set(["ENGINE", "PRINCIPALS"]);

/** A host's `keyed_objects` binding in this Worker's env, when it is a Durable Object namespace
 * (named by another Worker's manifest, so Env cannot type it); undefined sends the call to the host. */
function keyedObjectsOf(env: Env, objects: string): KeyedObjectsBinding | undefined {
  if (ENGINE_BINDINGS.has(objects)) return undefined;
  const b = (env as unknown as Record<string, unknown>)[objects];
  return b && typeof (b as { getByName?: unknown }).getByName === "function" ? (b as KeyedObjectsBinding) : undefined;
}
