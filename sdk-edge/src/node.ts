// The iii-edge client for Node 22 over its global WebSocket (undici): any harness worker or the
// sandbox host runs as a separate process with the same surface as iii-sdk's `registerWorker`.
import { AsyncLocalStorage } from "node:async_hooks";
import { hostname, platform, release, arch } from "node:os";
import { Client, type ClientOptions, type Connector } from "./client/core.ts";
import type { AmbientTrace, TraceFields } from "./client/trace.ts";
import type { EdgeClient } from "./client/types.ts";

export * from "./client/types.ts";
/** sdk-edge's zod (use it for schemas: one copy, matching types). */
export { z } from "zod";
export { IIIError, toErrorBody } from "@iii-edge/protocol";
export { MAX_BUFFERED_FRAMES, MAX_BUFFERED_BYTES } from "./client/core.ts";

/** iii-sdk's reconnect policy and defaults (protocol/README.md §2.6). */
export interface ReconnectionConfig {
  initialDelayMs: number;
  maxDelayMs: number;
  backoffMultiplier: number;
  /** 0–1: the delay is scaled by a random factor in [1 − j, 1 + j]. */
  jitterFactor: number;
  /** -1 = forever. */
  maxRetries: number;
}
export const DEFAULT_RECONNECTION: ReconnectionConfig = {
  initialDelayMs: 1_000,
  maxDelayMs: 30_000,
  backoffMultiplier: 2,
  jitterFactor: 0.3,
  maxRetries: -1,
};
/** iii-sdk's handshake timeout: a socket that has not opened after 10 s is retried. */
export const CONNECT_TIMEOUT_MS = 10_000;

export interface NodeWorkerOptions extends ClientOptions {
  reconnectionConfig?: Partial<ReconnectionConfig>;
  /** Extra headers on the upgrade request (undici's WebSocket accepts them; browsers cannot). */
  headers?: Record<string, string>;
}

/** Delay before reconnect attempt `attempt` (0-based): base × mult^attempt, capped, ± jitter. */
export function reconnectDelay(attempt: number, cfg: ReconnectionConfig, random: () => number = Math.random): number {
  const base = Math.min(cfg.initialDelayMs * cfg.backoffMultiplier ** attempt, cfg.maxDelayMs);
  return Math.max(0, Math.round(base * (1 + cfg.jitterFactor * (2 * random() - 1))));
}

function nodeAmbient(): AmbientTrace {
  const als = new AsyncLocalStorage<TraceFields>();
  return { run: (fields, fn) => als.run(fields, fn), get: () => als.getStore() };
}

export function webSocketConnector(url: string, options: { reconnectionConfig?: Partial<ReconnectionConfig>; headers?: Record<string, string> } = {}): Connector {
  const cfg: ReconnectionConfig = { ...DEFAULT_RECONNECTION, ...options.reconnectionConfig };
  return (events) => {
    let ws: WebSocket | undefined;
    let attempt = 0;
    let closed = false;
    let retryTimer: ReturnType<typeof setTimeout> | undefined;
    let endCurrent: (() => void) | undefined;
    const connect = () => {
      if (closed) return;
      let opened = false;
      // undici's WebSocket takes `{ headers }` as its second argument (non-standard).
      const init = options.headers ? ({ headers: options.headers } as unknown as string[]) : undefined;
      const socket = new WebSocket(url, init);
      ws = socket;
      socket.binaryType = "arraybuffer";
      let ended = false;
      // undici fires only `error` (no `close`) when the connection cannot be made, and only
      // `close` when an open socket drops, so both end the attempt — once.
      const end = () => {
        if (ended) return;
        ended = true;
        clearTimeout(handshake);
        if (ws !== socket) return;
        if (opened) events.close();
        if (closed) return;
        if (cfg.maxRetries >= 0 && attempt >= cfg.maxRetries) {
          events.failed();
          return;
        }
        retryTimer = setTimeout(connect, reconnectDelay(attempt++, cfg));
      };
      endCurrent = end;
      const handshake = setTimeout(() => {
        socket.close();
        end();
      }, CONNECT_TIMEOUT_MS);
      socket.addEventListener("open", () => {
        clearTimeout(handshake);
        opened = true;
        attempt = 0;
        events.open();
      });
      socket.addEventListener("message", (ev: MessageEvent) => {
        if (typeof ev.data === "string" || ev.data instanceof ArrayBuffer) events.message(ev.data);
      });
      socket.addEventListener("error", () => {
        if (opened) return; // a close event follows on an open socket
        end();
      });
      socket.addEventListener("close", end);
    };
    connect();
    return {
      send: (text) => {
        if (!ws || ws.readyState !== WebSocket.OPEN) throw new Error("socket is not open");
        ws.send(text);
      },
      close: () => {
        closed = true;
        if (retryTimer) clearTimeout(retryTimer);
        ws?.close(1000);
      },
      drop: () => {
        // A silent socket may never finish a close handshake: report the drop now, reconnect.
        try {
          ws?.close(4000, "heartbeat timeout");
        } catch {
          // already closing
        }
        endCurrent?.();
      },
    };
  };
}

/**
 * Connect a Node process to the engine as a worker (same surface as iii-sdk's `registerWorker`).
 * `url`: `ws://host:8787/` (default namespace) or `ws://host:8787/ns/<namespace>`.
 */
export function registerWorker(url: string, options: NodeWorkerOptions = {}): EdgeClient {
  return new Client({
    ...options,
    workerName: options.workerName ?? process.env.III_WORKER_NAME ?? `${hostname()}:${process.pid}`,
    connector: webSocketConnector(url, options),
    runtime: "node",
    pid: process.pid,
    os: `${platform()} ${release()} (${arch()})`,
    ambient: nodeAmbient(),
  });
}

export { nodeHttpListener } from "./http-receiver-node.ts";
export { verifyIIISignature, httpFunctionHandler } from "./http-receiver.ts";
export { channelUrl, openChannelWriter, readChannel, type ChannelWriter } from "./channels.ts";
