// The iii-edge client for Node 22 over its global WebSocket (undici): any harness worker or the
// sandbox host runs as a separate process with the same surface as iii-sdk's `registerWorker`.
import { AsyncLocalStorage } from "node:async_hooks";
import { randomBytes } from "node:crypto";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { hostname, platform, release, arch } from "node:os";
import { IIIError, relayedCode } from "@iii-edge/protocol";
import { Client, FATAL_CLOSE_CODES, type ClientOptions, type Connector } from "./client/core.ts";
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

/**
 * Handshake answers that retrying the same request cannot change: a path with no WebSocket
 * endpoint (404) and a malformed one, e.g. an invalid namespace (400). The client then fails with
 * the engine's message instead of reconnecting forever. Everything else (refused connections,
 * 5xx, 401/403 while a token may be rotated, 429) is retried — and so are these once a socket
 * to the address has opened: the path is right then, and a 404 or 400 is the engine restarting or
 * being redeployed under the client, which retrying outlasts.
 */
export const FATAL_HANDSHAKE_STATUSES: readonly number[] = [400, 404];
/** Deadline of the probe that asks why a handshake failed (the engine answers in milliseconds). */
const PROBE_TIMEOUT_MS = 5_000;
/** The most of a refusal's body the probe reads (the engine's JSON error is a few hundred bytes). */
const MAX_PROBE_BODY_BYTES = 8 * 1024;

/** What a WebSocket upgrade to `url` is answered with: the status, and the body of a refusal. */
export async function probeUpgrade(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string } | undefined> {
  const u = new URL(url);
  const secure = u.protocol === "wss:" || u.protocol === "https:";
  u.protocol = secure ? "https:" : "http:";
  const send = secure ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    let done = false;
    const finish = (v: { status: number; body: string } | undefined) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(v);
    };
    const req = send(u, {
      headers: {
        ...headers,
        Connection: "Upgrade",
        Upgrade: "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": randomBytes(16).toString("base64"),
      },
    });
    const timer = setTimeout(() => {
      req.destroy();
      finish(undefined);
    }, PROBE_TIMEOUT_MS);
    req.on("upgrade", (_res, socket) => {
      // Accepted this time: whatever failed before was not the address.
      socket.destroy();
      finish({ status: 101, body: "" });
    });
    req.on("response", (res: IncomingMessage) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        if (body.length < MAX_PROBE_BODY_BYTES) body += chunk;
        else res.destroy();
      });
      const end = () => finish({ status: res.statusCode ?? 0, body: body.slice(0, MAX_PROBE_BODY_BYTES) });
      res.on("end", end);
      res.on("close", end);
    });
    req.on("error", () => finish(undefined));
    req.end();
  });
}

/** The configuration error a fatal handshake answer stands for, in the engine's words when it gave
 * some (`{"error":{"code","message"}}`). */
export function handshakeError(url: string, status: number, body: string): IIIError {
  let engine: { code?: unknown; message?: unknown } | undefined;
  try {
    const parsed: unknown = JSON.parse(body);
    if (parsed && typeof parsed === "object" && "error" in parsed)
      engine = (parsed as { error: { code?: unknown; message?: unknown } }).error;
  } catch {
    // not the engine's JSON: a page, or nothing
  }
  const code = typeof engine?.code === "string" ? relayedCode(engine.code) : status === 404 ? "not_found" : "invalid_arguments";
  const message =
    typeof engine?.message === "string"
      ? engine.message
      : `${url} answered the WebSocket upgrade with HTTP ${status}: nothing accepts workers there (a worker dials ws://<host>/ or ws://<host>/ns/<namespace>)`;
  return new IIIError(code, `${message} [${url}]`);
}

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

export function webSocketConnector(
  url: string,
  options: { reconnectionConfig?: Partial<ReconnectionConfig>; headers?: Record<string, string> } = {},
): Connector {
  const cfg: ReconnectionConfig = { ...DEFAULT_RECONNECTION, ...options.reconnectionConfig };
  return (events) => {
    let ws: WebSocket | undefined;
    let attempt = 0;
    let closed = false;
    let retryTimer: ReturnType<typeof setTimeout> | undefined;
    let endCurrent: (() => void) | undefined;
    /** Whether a socket to this address ever opened (FATAL_HANDSHAKE_STATUSES). */
    let openedBefore = false;
    const connect = () => {
      if (closed) return;
      let opened = false;
      // undici's WebSocket takes `{ headers }` as its second argument (non-standard).
      const init = options.headers ? ({ headers: options.headers } as unknown as string[]) : undefined;
      const socket = new WebSocket(url, init);
      ws = socket;
      socket.binaryType = "arraybuffer";
      let ended = false;
      const retry = () => {
        if (closed) return;
        if (cfg.maxRetries >= 0 && attempt >= cfg.maxRetries) {
          events.failed(new IIIError("not_connected", `gave up after ${cfg.maxRetries} reconnect attempts to ${url}`));
          return;
        }
        retryTimer = setTimeout(connect, reconnectDelay(attempt++, cfg));
      };
      // undici fires only `error` (no `close`) when the connection cannot be made, and only
      // `close` when an open socket drops, so both end the attempt — once.
      const end = (closeCode?: number, closeReason?: string) => {
        if (ended) return;
        ended = true;
        clearTimeout(handshake);
        if (ws !== socket) return;
        if (opened) events.close();
        if (closed) return;
        if (closeCode !== undefined && FATAL_CLOSE_CODES.includes(closeCode)) {
          closed = true;
          events.failed(new IIIError("not_found", `${closeReason || `closed with ${closeCode}`} [${url}]`));
          return;
        }
        if (opened) return retry();
        // The handshake failed, and undici does not say why: ask the address itself. A 404 (no
        // WebSocket endpoint there) or 400 will not change by retrying, so the client fails with the
        // engine's message naming the right paths (unless this address has accepted us before);
        // anything else (down, restarting) is retried.
        void probeUpgrade(url, options.headers).then((answer) => {
          if (closed || ws !== socket) return;
          if (answer && FATAL_HANDSHAKE_STATUSES.includes(answer.status) && !openedBefore) {
            closed = true;
            events.failed(handshakeError(url, answer.status, answer.body));
            return;
          }
          retry();
        });
      };
      endCurrent = end;
      const handshake = setTimeout(() => {
        socket.close();
        end();
      }, CONNECT_TIMEOUT_MS);
      socket.addEventListener("open", () => {
        clearTimeout(handshake);
        opened = true;
        openedBefore = true;
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
      socket.addEventListener("close", (ev) => end(ev.code, ev.reason));
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
        // Waiting out a retry delay: try now.
        if (retryTimer && (!ws || ws.readyState === WebSocket.CLOSED)) {
          clearTimeout(retryTimer);
          retryTimer = undefined;
          connect();
          return;
        }
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
 * `url`: `ws://host:8787/` (default namespace) or `ws://host:8787/ns/<namespace>`. A URL the engine
 * has no WebSocket endpoint at is not retried: the client goes `failed`, with `connectionError`.
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
