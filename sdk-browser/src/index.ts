// iii-edge in the browser: a tab becomes a worker. Functions it registers are invoked by the
// backend like any other; it binds triggers and calls any function. Over partysocket (reconnect
// with jittered backoff), with reattach and replay of every registration on reconnect, an
// IndexedDB outbox for `void`/`enqueue` calls made offline, zod-typed functions and W3C trace
// context. Same surface as iii-sdk's `registerWorker`.
import ReconnectingWebSocket from "partysocket/ws";
import { IIIError, relayedCode } from "@iii-edge/protocol";
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
export const DEFAULT_BROWSER_RECONNECTION: BrowserReconnection = {
  initialDelayMs: 1_000,
  maxDelayMs: 30_000,
  backoffMultiplier: 2,
  jitterFactor: 0.3,
};
/** A socket that has not opened after this long is retried (iii-sdk uses 10 s too). */
export const CONNECT_TIMEOUT_MS = 10_000;
/**
 * Close codes that mean "this URL is wrong", never "try again": the engine accepts a browser's
 * upgrade on a path with no WebSocket endpoint only to close it with 4404 and a reason naming the
 * right paths (a browser cannot read a refused handshake's status). The same codes as sdk-edge's
 * FATAL_CLOSE_CODES and the engine's WRONG_PATH_CLOSE_CODE (engine-do/src/socket-paths.ts).
 */
export const FATAL_CLOSE_CODES: readonly number[] = [4404];
/** A socket the engine has not greeted this long after the handshake is reported open anyway (an
 * engine that sends no `workerregistered`); iii-edge greets in the same turn as the handshake. */
export const GREETING_TIMEOUT_MS = 2_000;

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

export function partySocketConnector(
  url: string,
  reconnection: Partial<BrowserReconnection> = {},
  token?: BrowserWorkerOptions["token"],
): Connector {
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
      // A configuration error is not retried (FATAL_CLOSE_CODES).
      shouldReconnectOnClose: (ev: CloseEvent) => !FATAL_CLOSE_CODES.includes(ev.code),
      // partysocket's own buffer is bypassed (0): the client core keeps the bounded buffer and
      // the replay order, and only sends on an open socket.
      maxEnqueuedMessages: 0,
      minUptime: 2_000,
    });
    // The client hears `open` once the engine has greeted the socket (its first frame is always
    // `workerregistered`, §2.5), not at the handshake: a socket the engine accepted only to refuse
    // (a wrong path: one `error` frame, then a fatal close) never shows as connected.
    let opened = false;
    let greeting: ReturnType<typeof setTimeout> | undefined;
    /** The engine's `{"type":"error"}` frame before its greeting: the full message of a refusal. */
    let lastError: { code: string; message: string } | undefined;
    const reportOpen = () => {
      clearTimeout(greeting);
      if (opened || rws.readyState !== rws.OPEN) return;
      opened = true;
      events.open();
    };
    rws.addEventListener("open", () => {
      lastError = undefined;
      greeting = setTimeout(reportOpen, GREETING_TIMEOUT_MS);
    });
    rws.addEventListener("message", (ev) => {
      const data: unknown = ev.data;
      if (typeof data !== "string" && !(data instanceof ArrayBuffer)) return;
      if (!opened) {
        const refusal = typeof data === "string" ? errorFrame(data) : undefined;
        if (refusal) {
          lastError = refusal;
          return;
        }
        reportOpen();
      }
      events.message(data);
    });
    rws.addEventListener("close", (ev) => {
      clearTimeout(greeting);
      const wasOpen = opened;
      opened = false;
      if (wasOpen) events.close(); // else a failed attempt, not a drop
      if (FATAL_CLOSE_CODES.includes(ev.code)) {
        rws.close();
        const message = lastError?.message ?? (ev.reason || `the engine closed the socket with ${ev.code}`);
        events.failed(new IIIError(lastError ? relayedCode(lastError.code) : "not_found", `${message} [${engineUrl(url)}]`));
      }
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

/** The `error` of an engine `{"type":"error","error":{code,message}}` frame, if `text` is one. */
function errorFrame(text: string): { code: string; message: string } | undefined {
  try {
    const f: unknown = JSON.parse(text);
    if (!f || typeof f !== "object" || !("error" in f)) return undefined;
    const e: unknown = (f as { error: unknown }).error;
    if (!e || typeof e !== "object") return undefined;
    const { code, message } = e as { code?: unknown; message?: unknown };
    return typeof code === "string" && typeof message === "string" ? { code, message } : undefined;
  } catch {
    return undefined;
  }
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
