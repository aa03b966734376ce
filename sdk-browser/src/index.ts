// iii-edge in the browser: a tab becomes a worker. Functions it registers are invoked by the
// backend like any other; it binds triggers and calls any function. Over partysocket (reconnect
// with jittered backoff), with reattach and replay of every registration on reconnect, an
// IndexedDB outbox for `void`/`enqueue` calls made offline, zod-typed functions and W3C trace
// context. Same surface as iii-sdk's `registerWorker`.
import ReconnectingWebSocket from "partysocket/ws";
import { Client, type ClientOptions, type Connector } from "@iii-edge/sdk-edge/client";
import type { EdgeClient } from "@iii-edge/sdk-edge/client";
import { idbOutbox, type IdbOutbox } from "./outbox.ts";
import { WS_BEARER_PREFIX, WS_PROTOCOL } from "@iii-edge/protocol";

export * from "@iii-edge/sdk-edge/client";
export { IIIError, toErrorBody, ERROR_CODES, type ErrorCode, type ErrorBody } from "@iii-edge/protocol";
export { MAX_BUFFERED_FRAMES, MAX_BUFFERED_BYTES } from "@iii-edge/sdk-edge/client";
/** The bundle's zod, so a page needs no second copy for its schemas. */
export { z } from "zod";
export { MAX_OUTBOX_ENTRIES, idbOutbox, type IdbOutbox } from "./outbox.ts";

export interface BrowserReconnection {
  /** First retry delay (default 1000 ms), scaled by ±`jitterFactor` each time. */
  initialDelayMs: number;
  /** Cap (default 30 000 ms, as iii-sdk). */
  maxDelayMs: number;
  /** Growth per failed attempt (default 2, as iii-sdk). */
  backoffMultiplier: number;
  /** 0–1 (default 0.3). */
  jitterFactor: number;
}
export const DEFAULT_BROWSER_RECONNECTION: BrowserReconnection = { initialDelayMs: 1_000, maxDelayMs: 30_000, backoffMultiplier: 2, jitterFactor: 0.3 };
/** A socket that has not opened after this long is retried (iii-sdk uses 10 s too). */
export const CONNECT_TIMEOUT_MS = 10_000;

export interface BrowserWorkerOptions extends ClientOptions {
  reconnectionConfig?: Partial<BrowserReconnection>;
  /** Keep offline `void`/`enqueue` calls in IndexedDB (default true). `false` keeps them in the
   * bounded in-memory buffer instead (lost on reload). */
  outbox?: boolean;
  /**
   * A token for an engine that requires one (AUTH_SECRET). Browsers cannot set headers on a
   * WebSocket, so it travels as the subprotocol `iii.bearer.<token>` beside `iii` — in a header,
   * out of URLs and the access logs that record them. A function is asked again on every
   * reconnect, so a short-lived token can be refreshed (e.g. fetched from your app's backend).
   */
  token?: string | (() => string | Promise<string>);
}

export interface BrowserClient extends EdgeClient {
  /** The offline outbox (undefined when disabled). */
  readonly outbox: IdbOutbox | undefined;
}

/** `ws(s)://…` as given; `http(s)://…` or a path (`/`, `/ns/demo`) resolved against the page. */
export function engineUrl(url: string): string {
  const base = typeof location !== "undefined" ? location.href : "http://localhost/";
  const u = new URL(url, base);
  if (u.protocol === "http:") u.protocol = "ws:";
  else if (u.protocol === "https:") u.protocol = "wss:";
  return u.toString();
}

/** The subprotocols that carry `token` (see BrowserWorkerOptions.token). */
export async function tokenProtocols(token: BrowserWorkerOptions["token"]): Promise<string[]> {
  if (token === undefined) return [];
  const t = typeof token === "function" ? await token() : token;
  return t ? [WS_PROTOCOL, `${WS_BEARER_PREFIX}${t}`] : [];
}

export function partySocketConnector(url: string, reconnection: Partial<BrowserReconnection> = {}, token?: BrowserWorkerOptions["token"]): Connector {
  const cfg = { ...DEFAULT_BROWSER_RECONNECTION, ...reconnection };
  return (events) => {
    const rws = new ReconnectingWebSocket(engineUrl(url), () => tokenProtocols(token), {
      // partysocket grows the delay exponentially but adds no jitter; it reads the options on
      // every retry, so a getter gives each retry its own jittered base (no thundering herd of
      // tabs after an engine redeploy).
      get minReconnectionDelay() {
        return cfg.initialDelayMs * (1 + cfg.jitterFactor * (2 * Math.random() - 1));
      },
      maxReconnectionDelay: cfg.maxDelayMs,
      reconnectionDelayGrowFactor: cfg.backoffMultiplier,
      connectionTimeout: CONNECT_TIMEOUT_MS,
      // partysocket's own buffer is bypassed (0): the client core keeps the bounded buffer and
      // the replay order, and only sends on an open socket.
      maxEnqueuedMessages: 0,
      minUptime: 2_000,
    });
    let opened = false;
    rws.addEventListener("open", () => {
      opened = true;
      events.open();
    });
    rws.addEventListener("message", (ev) => {
      const data: unknown = ev.data;
      if (typeof data === "string" || data instanceof ArrayBuffer) events.message(data);
    });
    rws.addEventListener("close", () => {
      if (!opened) return; // a failed attempt, not a drop
      opened = false;
      events.close();
    });
    rws.binaryType = "arraybuffer";
    return {
      send(text) {
        if (rws.readyState !== rws.OPEN || !rws.send(text)) throw new Error("socket is not open");
      },
      close() {
        rws.close(1000, "shutdown");
      },
      drop() {
        rws.reconnect(4000, "heartbeat timeout");
      },
    };
  };
}

/**
 * Turn this tab into a worker. `url`: `ws://host:8787/`, `/` (this page's origin) or
 * `/ns/<namespace>`.
 *
 *   const iii = registerWorker("/", { workerName: "my-tab" });
 *   iii.registerFunction("tab::add", ({ a, b }) => ({ sum: a + b }),
 *     { input: z.object({ a: z.number(), b: z.number() }) });
 */
export function registerWorker(url: string, options: BrowserWorkerOptions = {}): BrowserClient {
  const workerName = options.workerName ?? "browser-tab";
  const outbox = options.outbox === false || typeof indexedDB === "undefined" ? undefined : idbOutbox(workerName);
  const client = new Client({
    ...options,
    workerName,
    connector: partySocketConnector(url, options.reconnectionConfig, options.token),
    runtime: "browser",
    os: typeof navigator !== "undefined" ? navigator.userAgent : undefined,
    outbox,
  });
  return Object.assign(client, { outbox }) as BrowserClient;
}
