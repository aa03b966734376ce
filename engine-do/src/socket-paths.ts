// The engine's WebSocket endpoints (protocol/README.md §2.1), and the answer to an upgrade on any
// other path: a configuration error the client must be told about, not a 404 it retries forever.
//
// A client that can read a refused upgrade's response (iii-sdk over `ws`, sdk-edge's Node client,
// curl) gets `404 {"error":{"code":"not_found","message":…},"endpoints":{…}}`. A browser cannot: its
// WebSocket API hides the status of a refused handshake behind a bare `error` event. A browser
// (every browser handshake carries `Origin`; Node clients send none) is therefore accepted, sent one
// `{"type":"error"}` frame with the same message, and closed with WRONG_PATH_CLOSE_CODE and a reason
// naming the right paths — what sdk-browser reads as a fatal configuration error.
import type { Context } from "hono";
import { WS_PROTOCOL as III_SUBPROTOCOL } from "@iii-edge/protocol";

/**
 * Paths that take a WebSocket upgrade: the worker socket and its telemetry socket, channel ends and
 * browser stream sockets, iii's RBAC listener (rbac.ts), for `default` and under `/ns/<namespace>`
 * (index.ts, http-routes.ts).
 * A new socket route must be added here, or its upgrades are answered as a wrong path.
 */
export const SOCKET_PATHS: readonly RegExp[] = [
  /^\/$/,
  /^\/otel$/,
  /^\/ws\/channels\/[^/]+$/,
  /^\/_iii\/streams$/,
  /^\/ns\/[^/]+$/,
  /^\/ns\/[^/]+\/otel$/,
  /^\/ns\/[^/]+\/ws\/channels\/[^/]+$/,
  /^\/ns\/[^/]+\/_iii\/streams$/,
  /^\/rbac$/,
  /^\/ns\/[^/]+\/rbac$/,
];

/** Close code for an upgrade on a path with no WebSocket endpoint (4000–4999: the application's;
 * 4404 reads as "404"). sdk-edge and sdk-browser treat it as fatal (their FATAL_CLOSE_CODES). */
export const WRONG_PATH_CLOSE_CODE = 4404;
/** Close reasons are at most 123 bytes (RFC 6455 §5.5: a control frame's payload is ≤ 125 bytes,
 * two of them the code). */
const MAX_CLOSE_REASON_BYTES = 123;
/** How much of the wrong path a close reason repeats (the rest of the reason names the right ones). */
const REASON_PATH_CHARS = 40;

export function isSocketPath(pathname: string): boolean {
  return SOCKET_PATHS.some((p) => p.test(pathname));
}

/** Does this request ask for a WebSocket? */
export const wantsWebSocket = (req: Request): boolean => req.headers.get("upgrade")?.toLowerCase() === "websocket";

/** The endpoints a client should have dialled, as URLs of the host it reached. */
export function socketEndpoints(url: URL): Record<string, string> {
  const ws = `${url.protocol === "https:" ? "wss" : "ws"}://${url.host}`;
  return {
    worker: `${ws}/`,
    namespace: `${ws}/ns/<namespace>`,
    streams: `${ws}/_iii/streams`,
    channels: `${ws}/ws/channels/<id>`,
    telemetry: `${ws}/otel`,
  };
}

export function wrongPathMessage(url: URL): string {
  const e = socketEndpoints(url);
  return `no WebSocket endpoint at ${url.pathname}: a worker dials ${e.worker} (namespace "default") or ${e.namespace}; browser stream subscriptions use ${e.streams}`;
}

function closeReason(pathname: string): string {
  const shown = pathname.length > REASON_PATH_CHARS ? `${pathname.slice(0, REASON_PATH_CHARS - 1)}…` : pathname;
  const reason = `no WebSocket at ${shown}; dial / or /ns/<namespace> (streams: /_iii/streams)`;
  // Pathnames are percent-encoded ASCII, but make sure of the byte bound all the same.
  const bytes = new TextEncoder().encode(reason);
  return bytes.length <= MAX_CLOSE_REASON_BYTES
    ? reason
    : new TextDecoder().decode(bytes.slice(0, MAX_CLOSE_REASON_BYTES)).replace(/\uFFFD$/, "");
}

/** The answer to an upgrade on a path that has no WebSocket endpoint. */
export function refuseWrongSocketPath(c: Context): Response {
  const url = new URL(c.req.url);
  const message = wrongPathMessage(url);
  if (c.req.header("origin") === undefined) {
    return c.json({ error: { code: "not_found", message }, endpoints: socketEndpoints(url) }, 404);
  }
  const pair = new WebSocketPair();
  const server = pair[1];
  server.accept();
  server.send(JSON.stringify({ type: "error", error: { code: "not_found", message } }));
  server.close(WRONG_PATH_CLOSE_CODE, closeReason(url.pathname));
  // A browser that offered subprotocols fails a handshake that picks none of them, and would never
  // see the close: answer with `iii` when it is among them (sdk-browser offers it with a token);
  // never echo the bearer token's own subprotocol.
  const offered = (c.req.header("sec-websocket-protocol") ?? "").split(",").map((p) => p.trim());
  const headers: Record<string, string> = offered.includes(III_SUBPROTOCOL) ? { "Sec-WebSocket-Protocol": III_SUBPROTOCOL } : {};
  return new Response(null, { status: 101, webSocket: pair[0], headers });
}
