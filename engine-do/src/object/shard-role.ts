// The role of a connection-shard object (`<ns>#shard-<k>`, CONNECTION_SHARDS > 1): it holds worker
// sockets and relays them to its namespace's catalog object (../shards/connection-shard.ts). It has
// no core, no catalog and no storage of its own; what only an engine answers goes to the catalog.
import type {
  CallOutcome,
  ShardAttachOutcome,
  ShardBatchOutcome,
  ShardDownBatch,
  ShardInvokeRequest,
  ShardRoute,
  ShardUpBatch,
} from "@iii-edge/protocol";
import type { CloudMessageBody, DeliveryVerdict } from "../core/queues/cloudflare-queue.ts";
import type { HttpTriggerRequest, HttpTriggerResponse } from "../core/triggers/http.ts";
import { ConnectionShard } from "../shards/connection-shard.ts";
import { clock, invokeTimeout, log, newId, timers } from "./config.ts";
import { allGone, type Health, type ObjectRole } from "./role.ts";

export class ShardRole implements ObjectRole {
  private readonly shard: ConnectionShard;
  private readonly name: string;
  private readonly catalog: () => DurableObjectStub<import("../engine-object.ts").Engine>;

  constructor(ctx: DurableObjectState, env: Env, namespace: string) {
    this.name = ctx.id.name!;
    this.catalog = () => env.ENGINE.getByName(namespace);
    const defaultInvokeTimeoutMs = invokeTimeout(env);
    this.shard = new ConnectionShard(ctx, {
      name: this.name,
      catalog: this.catalog,
      shard: (s) => env.ENGINE.getByName(s),
      log,
      clock,
      timers,
      newId,
      ...(defaultInvokeTimeoutMs === undefined ? {} : { defaultInvokeTimeoutMs }),
    });
  }

  fetch(request: Request): Promise<Response> {
    return this.shard.accept(request);
  }
  webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): void {
    this.shard.message(ws, message);
  }
  webSocketClose(ws: WebSocket, code: number): void {
    this.shard.closed(ws, code);
  }
  webSocketError(ws: WebSocket): void {
    this.shard.closed(ws);
  }
  async alarm(): Promise<void> {
    // A shard keeps nothing that would need one.
  }

  async trigger(): Promise<CallOutcome> {
    return { ok: false, error: { code: "function_not_found", message: "a connection shard runs no functions: call its namespace" } };
  }
  // The front door sends these to the namespace's own object, never to a shard: a shard has no
  // routes, and what is sent to it goes on to its catalog object.
  async telemetry(frame: string | ArrayBuffer): Promise<void> {
    await this.catalog().telemetry(frame);
  }
  async httpRequest(_req: HttpTriggerRequest): Promise<HttpTriggerResponse> {
    return { matched: false, status: 404, headers: [], body: null };
  }
  deliverQueued(body: CloudMessageBody, attempts: number): Promise<DeliveryVerdict> {
    return this.catalog().deliverQueued(body, attempts);
  }
  async health(): Promise<Health> {
    return { ok: true, namespace: this.name, workers: 0, functions: 0 };
  }
  /** A shard's sockets take no principal slots (the catalog admits them), so it holds no leases. */
  async liveConnections(): Promise<string[]> {
    return [];
  }

  async shardAttach(): Promise<ShardAttachOutcome> {
    return { ok: false, error: { code: "invalid_frame", message: "this engine object has no connection shards" } };
  }
  async shardFrames(batch: ShardUpBatch): Promise<ShardBatchOutcome> {
    return allGone(batch?.items);
  }
  async shardDeliver(batch: ShardDownBatch): Promise<ShardBatchOutcome> {
    return this.shard.deliver(batch);
  }
  async shardRoute(): Promise<ShardRoute> {
    return null;
  }
  shardInvoke(req: ShardInvokeRequest) {
    return this.shard.invoke(req);
  }
  async shardAlive(workerIds: string[]): Promise<ShardBatchOutcome> {
    return this.shard.alive(workerIds);
  }
}
