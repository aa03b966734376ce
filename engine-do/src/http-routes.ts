// The front-door half of `http` triggers (core/triggers/http.ts has the routing): any request the
// engine does not reserve goes to the default namespace's Engine object, and
// `/ns/<namespace>/http/<path>` to another namespace's. When no route matches, a GET falls back to
// the demo app's static assets, and otherwise gets `404 {"error":{"code":"not_found",...}}`.
// Also here: browser stream sockets (`/_iii/streams`, `/ns/<ns>/_iii/streams`).
//
// The engine's own credentials never reach a tenant's function: a bearer token signed with
// AUTH_SECRET, in `Authorization` or `?access_token`, is taken out of the request here. The query
// one is dropped; the header one travels in ENGINE_CREDENTIAL_HEADER, which the engine object hands
// back as `authorization` only to functions the deployment hosts itself (core/triggers/http.ts) —
// the harness's HTTP API checks its callers with it. Any other `Authorization` (a route's own
// scheme) is passed on as it came. A route's response is served sandboxed (ROUTE_SANDBOX_CSP): a
// page a tenant serves from the engine's own origin runs as an opaque origin, so its script can
// neither read the console's storage nor call the engine's API as the engine's own page.
//
// Request bodies: up to MAX_INLINE_BODY_BYTES a body is read here and handed over as bytes (parsed
// into `body`, and the one item of `request_body`). A larger one with a declared Content-Length, up
// to HTTP_MAX_BODY_BYTES, is handed over as the upload itself, which the engine streams into
// `request_body` as it arrives (as iii does). A larger one without a declared length is refused:
// it cannot be known to fit before anything runs, and iii-sdk's reader could not tell a cut-off
// stream from a whole one.
import type { Context, Hono } from "hono";
import { MAX_FRAME_BYTES } from "@iii-edge/protocol";
import { verifyToken } from "@iii-edge/protocol/token";
import { INTERNAL_HEADER_PREFIX, authenticateRequest, nonJsonBodyRefusal, withGrant } from "./auth.ts";
import { ENGINE_CREDENTIAL_HEADER, reservedReason, type HttpTriggerRequest } from "./core/triggers/http.ts";

type AppEnv = { Bindings: Env };

/** iii namespaces name Durable Objects: keep them short and printable (same rule as index.ts). */
const NAMESPACE = /^[A-Za-z0-9._-]{1,64}$/;
const DEFAULT_NAMESPACE = "default";
/** Largest request body forwarded as bytes (and parsed into `body`): it travels in the invocation
 * frame, so a frame's bound (protocol/limits.ts). Also the bound of a body without a declared length. */
export const MAX_INLINE_BODY_BYTES = MAX_FRAME_BYTES;
/** Default of HTTP_MAX_BODY_BYTES, the largest body streamed through `request_body`: 16 MiB, the
 * bound iii's own HTTP worker puts on a request body, so what iii accepts is accepted here. */
export const DEFAULT_HTTP_MAX_BODY_BYTES = 16 * 1024 * 1024;
/** The most HTTP_MAX_BODY_BYTES may be set to: the engine object passes the upload on as it arrives,
 * and a reader slower than the client has the difference held in the object's memory (128 MB). */
export const HTTP_MAX_BODY_BYTES_CEILING = 64 * 1024 * 1024;

/** HTTP_MAX_BODY_BYTES (bytes, MAX_INLINE_BODY_BYTES…HTTP_MAX_BODY_BYTES_CEILING), else the default. */
export function maxBodyBytes(env: { HTTP_MAX_BODY_BYTES?: unknown }): number {
  const v = env.HTTP_MAX_BODY_BYTES;
  const n = typeof v === "string" && /^\d{1,12}$/.test(v.trim()) ? Number(v.trim()) : NaN;
  return Number.isFinite(n) ? Math.min(HTTP_MAX_BODY_BYTES_CEILING, Math.max(MAX_INLINE_BODY_BYTES, n)) : DEFAULT_HTTP_MAX_BODY_BYTES;
}

/**
 * Every route response carries this policy: the document runs sandboxed, as an opaque origin
 * (scripts, forms and popups allowed, same-origin access not), whatever headers its function sets.
 */
export const ROUTE_SANDBOX_CSP = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads";

/** The harness's HTTP API (`/api/*`) is a JSON API whose routes are reached like any other route. */
const JSON_API_PATH = /^\/api(?:\/|$)/;

/** Is this bearer token one the engine issued (signed with AUTH_SECRET)? */
async function isEngineToken(token: string, env: { AUTH_SECRET?: string }): Promise<boolean> {
  if (!env.AUTH_SECRET) return false;
  return (await verifyToken(env.AUTH_SECRET, token)).ok;
}

const tooLarge = (c: Context<AppEnv>, message: string) => c.json({ error: { code: "value_too_large", message } }, 413);

const notFound = (c: Context<AppEnv>) => c.json({ error: { code: "not_found", message: "Not Found" } }, 404);

/**
 * Read a body, at most `max` bytes: null as soon as it passes them (the stream is cancelled then,
 * not drained, so a huge upload costs at most `max` bytes and is answered at once).
 */
async function readBounded(stream: ReadableStream<Uint8Array>, max: number): Promise<Uint8Array | null> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      reader.cancel("request body too large").catch(() => {});
      return null;
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}

async function forward(c: Context<AppEnv>, namespace: string, path: string, assets: boolean): Promise<Response> {
  if (!NAMESPACE.test(namespace)) return c.json({ error: { code: "invalid_arguments", message: `invalid namespace '${namespace}'` } }, 400);
  const raw = c.req.raw;
  const method = raw.method.toUpperCase();
  if (JSON_API_PATH.test(path)) {
    const notJson = nonJsonBodyRefusal(raw);
    if (notJson) return c.json({ error: { code: "invalid_arguments", message: notJson } }, 415);
  }
  let body: HttpTriggerRequest["body"] = null;
  if (method !== "GET" && method !== "HEAD" && raw.body) {
    const max = maxBodyBytes(c.env as { HTTP_MAX_BODY_BYTES?: unknown });
    const length = raw.headers.get("content-length")?.trim();
    const declared = length && /^\d{1,15}$/.test(length) ? Number(length) : undefined;
    if (declared !== undefined && declared > max) {
      // Answered before the client has sent it all: what arrives is dropped up to the inline bound,
      // then the body is cancelled. (Cancelled before any of it is read, the local dev server
      // sometimes resets the connection instead of passing the answer on.)
      await readBounded(raw.body, MAX_INLINE_BODY_BYTES);
      return tooLarge(c, `request body of ${declared} bytes is over this engine's limit of ${max} bytes (HTTP_MAX_BODY_BYTES)`);
    }
    if (declared !== undefined && declared > MAX_INLINE_BODY_BYTES) {
      body = raw.body; // streamed into `request_body` by the engine, which checks it against its length
    } else {
      // Counted as it arrives: a chunked body declares no length, and is cut off past the bound.
      const bytes = await readBounded(raw.body, MAX_INLINE_BODY_BYTES);
      if (!bytes)
        return tooLarge(
          c,
          `request body over ${MAX_INLINE_BODY_BYTES} bytes without a Content-Length (send its length to upload up to ${max} bytes)`,
        );
      body = bytes; // raw: the engine fills the `request_body` channel with it
    }
  }
  const query: Record<string, string> = {};
  for (const [k, v] of new URL(raw.url).searchParams) if (!(k in query)) query[k] = v;
  const headers: Record<string, string> = {};
  raw.headers.forEach((v, k) => {
    // Headers under the front door's own prefix are its to set, never a client's.
    if (!k.toLowerCase().startsWith(INTERNAL_HEADER_PREFIX)) headers[k.toLowerCase()] = v;
  });
  const env = c.env as { AUTH_SECRET?: string };
  if (query.access_token !== undefined && (await isEngineToken(query.access_token, env))) delete query.access_token;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? "")?.[1];
  if (bearer !== undefined && (await isEngineToken(bearer, env))) {
    headers[ENGINE_CREDENTIAL_HEADER] = headers.authorization;
    delete headers.authorization;
  }
  const req: HttpTriggerRequest = { method, path, query, headers, body };
  let res;
  try {
    res = await c.env.ENGINE.getByName(namespace).httpRequest(req);
  } catch (e) {
    return c.json({ error: { code: "invocation_error", message: `engine unavailable: ${String(e)}` } }, 503);
  }
  if (!res.matched && assets && (method === "GET" || method === "HEAD")) {
    const asset = await c.env.ASSETS.fetch(raw);
    if (asset.status !== 404) return asset;
  }
  const out = new Response(res.body, { status: res.status, headers: res.headers });
  if (res.matched) out.headers.append("content-security-policy", ROUTE_SANDBOX_CSP);
  return out;
}

/** Browser stream sockets need a grant for their namespace, like every other socket (auth.ts). */
const streamSocket = async (c: Context<AppEnv>, namespace: string): Promise<Response> => {
  if (!NAMESPACE.test(namespace)) return c.json({ error: { code: "invalid_arguments", message: `invalid namespace '${namespace}'` } }, 400);
  const who = await authenticateRequest(c.req.raw, c.env, namespace);
  if (!who.ok) return c.json({ error: { code: who.code, message: who.message } }, who.status);
  return c.env.ENGINE.getByName(namespace).fetch(withGrant(c.req.raw, who.grant, who.viaProtocol));
};

/** Mount after the engine's own routes: the last route catches everything else. */
export function mountTriggerRoutes(app: Hono<AppEnv>): void {
  app.get("/_iii/streams", (c) => streamSocket(c, DEFAULT_NAMESPACE));
  app.get("/ns/:ns/_iii/streams", (c) => streamSocket(c, c.req.param("ns")));
  app.all("/ns/:ns/http/*", (c) => {
    const ns = c.req.param("ns");
    const prefix = `/ns/${ns}/http`;
    return forward(c, ns, c.req.path.slice(prefix.length) || "/", false);
  });
  app.all("*", async (c) => {
    const path = c.req.path;
    if (path === "/_iii" || path.startsWith("/_iii/")) return notFound(c);
    if (reservedReason(path)) {
      const m = c.req.method.toUpperCase();
      if (m === "GET" || m === "HEAD") {
        const asset = await c.env.ASSETS.fetch(c.req.raw);
        if (asset.status !== 404) return asset;
      }
      return notFound(c);
    }
    return forward(c, DEFAULT_NAMESPACE, path, true);
  });
}
