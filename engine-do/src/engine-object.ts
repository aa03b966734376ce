// The Engine Durable Object: a thin shell over workerd. One object per iii namespace (`<ns>`), and
// with CONNECTION_SHARDS > 1 also its connection shards (`<ns>#shard-<k>`); the object's name picks
// its role, and every event and RPC method goes to that role:
// - object/engine-role.ts: the engine (the core in ./core, its sockets, its RPC), and the catalog of
//   its shards' sockets when it has shards;
// - object/shard-role.ts: a connection shard (./shards/connection-shard.ts).
// The class name and its binding (`ENGINE`) stay as deployed: objects keep their state.
import { DurableObject } from "cloudflare:workers";
import type { CallOutcome, EngineRpc, RpcTriggerRequest, ShardAttachOutcome } from "@iii-edge/protocol";
import type { ShardAttachRequest, ShardBatchOutcome, ShardDownBatch, ShardInvokeOutcome } from "@iii-edge/protocol";
import type { ShardInvokeRequest, ShardRoute, ShardUpBatch } from "@iii-edge/protocol";
import type { CloudMessageBody, DeliveryVerdict } from "./core/queues/cloudflare-queue.ts";
import type { HttpTriggerRequest, HttpTriggerResponse } from "./core/triggers/http.ts";
import { EngineRole } from "./object/engine-role.ts";
import type { Health, ObjectRole } from "./object/role.ts";
import { ShardRole } from "./object/shard-role.ts";
import { connectionShards, shardOf } from "./shards/config.ts";

export class Engine extends DurableObject<Env> implements EngineRpc {
  private readonly role: ObjectRole;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const shardCount = connectionShards(env);
    const asShard = shardCount > 1 ? shardOf(ctx.id.name) : undefined;
    this.role = asShard ? new ShardRole(ctx, env, asShard.namespace) : new EngineRole(ctx, env, shardCount);
    // A JSON ping is answered by the runtime without waking the object (§2.4); protocol-level
    // pings are answered by workerd itself.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair('{"type":"ping"}', '{"type":"pong"}'));
  }

  override fetch(request: Request): Promise<Response> {
    return this.role.fetch(request);
  }
  // Not async: in a flood each message is its own event, and a promise per message is work for nothing.
  override webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): void {
    this.role.webSocketMessage(ws, message);
  }
  override async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    this.role.webSocketClose(ws, code);
  }
  override async webSocketError(ws: WebSocket): Promise<void> {
    this.role.webSocketError(ws);
  }
  override alarm(): Promise<void> {
    return this.role.alarm();
  }

  // ------------------------------------------------------------------ RPC (sdk-edge, front door)

  /** Call a function from a Worker or DO without a socket (protocol's `EngineRpc`). */
  trigger(req: RpcTriggerRequest): Promise<CallOutcome> {
    return this.role.trigger(req);
  }
  /** Telemetry from Worker-hosted code (protocol's `EngineRpc`): one `/otel` frame. */
  telemetry(frame: string | ArrayBuffer): Promise<void> {
    return this.role.telemetry(frame);
  }
  /** HTTP-trigger routes (core/triggers/http.ts), forwarded by the front door (http-routes.ts). */
  httpRequest(req: HttpTriggerRequest): Promise<HttpTriggerResponse> {
    return this.role.httpRequest(req);
  }
  /** One Cloudflare Queues delivery, handed back by the Worker's queue() handler (queue-consumer.ts). */
  deliverQueued(body: CloudMessageBody, attempts: number): Promise<DeliveryVerdict> {
    return this.role.deliverQueued(body, attempts);
  }
  health(): Promise<Health> {
    return this.role.health();
  }
  /** The principal counter's check of leases (principal-connections.ts). */
  liveConnections(ids: string[]): Promise<string[]> {
    return this.role.liveConnections(ids);
  }

  // ------------------------------------------------------------------ connection shards (shards/)

  /** A connection shard admits a socket through its catalog object. */
  shardAttach(req: ShardAttachRequest): Promise<ShardAttachOutcome> {
    return this.role.shardAttach(req);
  }
  /** What a connection shard's sockets sent, in order (to the catalog). */
  shardFrames(batch: ShardUpBatch): Promise<ShardBatchOutcome> {
    return this.role.shardFrames(batch);
  }
  /** What the catalog object sends a connection shard's sockets. */
  shardDeliver(batch: ShardDownBatch): Promise<ShardBatchOutcome> {
    return this.role.shardDeliver(batch);
  }
  /** Where a function's worker is, for a shard's direct calls (null: call through the catalog). */
  shardRoute(functionId: string): Promise<ShardRoute> {
    return this.role.shardRoute(functionId);
  }
  /** A direct call from another shard to a worker on this one (shards/direct-calls.ts). */
  shardInvoke(req: ShardInvokeRequest): Promise<ShardInvokeOutcome> {
    return this.role.shardInvoke(req);
  }
  /** The catalog's wake probe: which of these workers' sockets this shard no longer holds. */
  shardAlive(workerIds: string[]): Promise<ShardBatchOutcome> {
    return this.role.shardAlive(workerIds);
  }
}
