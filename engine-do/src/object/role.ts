// What an Engine object does, whichever role its name gives it (../engine-object.ts picks one): the
// Durable Object's events and the RPC methods of protocol's `EngineRpc` and the shard links.
import type {
  CallOutcome,
  EngineRpc,
  RpcTriggerRequest,
  ShardAttachOutcome,
  ShardAttachRequest,
  ShardBatchOutcome,
  ShardDownBatch,
  ShardInvokeOutcome,
  ShardInvokeRequest,
  ShardRoute,
  ShardUpBatch,
} from "@iii-edge/protocol";
import type { CloudMessageBody, DeliveryVerdict } from "../core/queues/cloudflare-queue.ts";
import type { HttpTriggerRequest, HttpTriggerResponse } from "../core/triggers/http.ts";

export interface Health {
  ok: true;
  namespace: string;
  workers: number;
  functions: number;
  shards?: Record<string, number>;
}

export interface ObjectRole extends EngineRpc {
  fetch(request: Request): Promise<Response>;
  webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): void;
  webSocketClose(ws: WebSocket, code: number): void;
  webSocketError(ws: WebSocket): void;
  alarm(): Promise<void>;
  trigger(req: RpcTriggerRequest): Promise<CallOutcome>;
  telemetry(frame: string | ArrayBuffer): Promise<void>;
  httpRequest(req: HttpTriggerRequest): Promise<HttpTriggerResponse>;
  deliverQueued(body: CloudMessageBody, attempts: number): Promise<DeliveryVerdict>;
  health(): Promise<Health>;
  liveConnections(ids: string[]): Promise<string[]>;
  shardAttach(req: ShardAttachRequest): Promise<ShardAttachOutcome>;
  shardFrames(batch: ShardUpBatch): Promise<ShardBatchOutcome>;
  shardDeliver(batch: ShardDownBatch): Promise<ShardBatchOutcome>;
  shardRoute(functionId: string): Promise<ShardRoute>;
  shardInvoke(req: ShardInvokeRequest): Promise<ShardInvokeOutcome>;
  shardAlive(workerIds: string[]): Promise<ShardBatchOutcome>;
}

/** A batch's workers, all answered as gone: what an object that holds none of them says. */
export const allGone = (items: { w: string }[] | undefined): ShardBatchOutcome => ({ gone: [...new Set((items ?? []).map((i) => i.w))] });
