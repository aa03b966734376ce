// The front door's half of "who may do what": every WebSocket upgrade and /_iii/* request is turned
// into a Grant (protocol/src/auth.ts) before any Durable Object is touched, or refused with 401/403.
// Where a grant comes from, in order:
//   1. a token signed with AUTH_SECRET: `Authorization: Bearer <t>`, the WebSocket subprotocol
//      `iii.bearer.<t>` (browsers, which cannot set headers), or `?access_token=<t>` (last resort);
//   2. AUTH_FUNCTION: a function (default namespace) that reads the request and answers a grant;
//   3. neither configured: open (OPEN_GRANT) for loopback clients of a loopback engine (`npm start`),
//      refused for everyone else — a deployed engine is never open by accident.
// The grant reaches the engine object in X-III-Grant, a header the front door always sets itself.
import { OPEN_GRANT, WS_BEARER_PREFIX, WS_PROTOCOL } from "@iii-edge/protocol";
import { authFunctionOutput, grantSchema, isReservedSub, mayUseNamespace } from "@iii-edge/protocol";
import type { AuthFunctionInput, CallOutcome, EngineRpc, Grant } from "@iii-edge/protocol";
import { verifyToken } from "@iii-edge/protocol/token";
import { isLoopbackAddress } from "./core/admission.ts";

/** Headers only the front door may set; anything a client sends under this prefix is dropped. */
export const INTERNAL_HEADER_PREFIX = "x-iii-";
export const GRANT_HEADER = "x-iii-grant";
export const CLIENT_IP_HEADER = "x-iii-client-ip";
/** Set when the client offered the bearer subprotocol: the engine must answer with WS_PROTOCOL. */
export const WS_PROTOCOL_HEADER = "x-iii-ws-protocol";

/** An auth function answers within this, or the connection is refused (it holds a client waiting). */
const AUTH_FUNCTION_TIMEOUT_MS = 5_000;

export type AuthMode = "token" | "open" | "closed";

export interface AuthConfig {
  AUTH_SECRET?: string;
  AUTH_FUNCTION?: string;
  /** Web origins, comma-separated (`http://localhost:5173`), whose pages the open engine serves as
   * it serves its own: a developer's app on a dev server beside `npm start`. Ignored with auth on,
   * where a token is the proof and any origin may present one. */
  ALLOWED_ORIGINS?: string;
}

/** The most origins ALLOWED_ORIGINS may name: a handful of dev servers, not a deny-list in disguise. */
const MAX_ALLOWED_ORIGINS = 16;

/** ALLOWED_ORIGINS as origins (`scheme://host[:port]`); an entry that is not one, or `*`, is left
 * out: a wildcard would reopen the engine to every website. */
export function allowedOrigins(env: AuthConfig): ReadonlySet<string> {
  const out = new Set<string>();
  for (const raw of (env.ALLOWED_ORIGINS ?? "").split(",").slice(0, MAX_ALLOWED_ORIGINS)) {
    const entry = raw.trim();
    if (!entry || entry === "*") continue;
    try {
      const u = new URL(entry);
      if ((u.protocol === "http:" || u.protocol === "https:") && u.origin === entry.replace(/\/$/, "")) out.add(u.origin);
    } catch {
      // not an origin
    }
  }
  return out;
}

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);

/** Headers a proxy (or Cloudflare) sets to name the client it forwards for: each may hold a list. */
const CLIENT_ADDRESS_HEADERS = ["cf-connecting-ip", "x-forwarded-for", "x-real-ip", "true-client-ip"];
/** Headers a proxy sets to name the host the client asked for. */
const FORWARDED_HOST_HEADERS = ["x-forwarded-host"];

/** An address as a proxy writes it: `1.2.3.4`, `1.2.3.4:5678`, `[::1]`, `[::1]:5678`, `"[::1]"`. */
function bareAddress(raw: string): string {
  let a = raw.trim().replace(/^"|"$/g, "");
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(a);
  if (bracketed) return bracketed[1]!;
  if (/^\d{1,3}(\.\d{1,3}){3}:\d+$/.test(a)) a = a.slice(0, a.lastIndexOf(":"));
  return a;
}
const bareHost = (raw: string): string => {
  const h = raw.trim().replace(/^"|"$/g, "").toLowerCase();
  if (h.startsWith("[")) return h.slice(0, h.indexOf("]") + 1);
  return h.replace(/:\d+$/, "");
};

/** The `for=` and `host=` parameters of an RFC 7239 `Forwarded` header (every element of its list). */
function forwardedParams(value: string): { addresses: string[]; hosts: string[] } {
  const addresses: string[] = [];
  const hosts: string[] = [];
  for (const element of value.split(",")) {
    for (const pair of element.split(";")) {
      const eq = pair.indexOf("=");
      if (eq < 0) continue;
      const key = pair.slice(0, eq).trim().toLowerCase();
      const v = pair.slice(eq + 1);
      if (key === "for") addresses.push(bareAddress(v));
      else if (key === "host") hosts.push(bareHost(v));
    }
  }
  return { addresses, hosts };
}

/**
 * Is this a client on the engine's own machine, talking to an engine served on loopback (`npm
 * start`)? Never true for a deploy. A proxy in front of a loopback engine keeps its `Host` but names
 * the real client in a forwarded header: any of them naming anything but a loopback address (an
 * obfuscated `for=_hidden` or `unknown` included) makes the client non-local, and so does a
 * forwarded host that is not loopback. The one test of "local" for the engine and the console's
 * token route alike.
 */
export function isLocalClient(req: Request): boolean {
  if (!LOOPBACK_HOSTS.has(new URL(req.url).hostname.toLowerCase())) return false;
  const addresses: string[] = [];
  const hosts: string[] = [];
  for (const name of CLIENT_ADDRESS_HEADERS) {
    const v = req.headers.get(name);
    if (v !== null) addresses.push(...v.split(",").map(bareAddress));
  }
  for (const name of FORWARDED_HOST_HEADERS) {
    const v = req.headers.get(name);
    if (v !== null) hosts.push(...v.split(",").map(bareHost));
  }
  const forwarded = req.headers.get("forwarded");
  if (forwarded !== null) {
    const f = forwardedParams(forwarded);
    // A Forwarded header that names no client at all still says a proxy stands in between.
    if (f.addresses.length === 0 && f.hosts.length === 0) return false;
    addresses.push(...f.addresses);
    hosts.push(...f.hosts);
  }
  return addresses.every(isLoopbackAddress) && hosts.every((h) => LOOPBACK_HOSTS.has(h));
}

/**
 * Paths of the engine's own API, which the open engine serves to local processes, never to a web
 * page of another origin: `/_iii/*`, `/api/*` (the harness's HTTP API), `/mcp`, `/_console/*`, and
 * the same under `/ns/<namespace>` (`/ns/<ns>/http/api/*` for routes). Every WebSocket upgrade is
 * judged the same way, whatever its path.
 */
const ENGINE_API_PATH = /^(?:\/ns\/[^/]+(?:\/http)?)?\/(?:_iii(?:\/|$)|api(?:\/|$)|mcp$|_console(?:\/|$))/;

export function isEngineApiPath(pathname: string): boolean {
  return ENGINE_API_PATH.test(pathname);
}

/** `Sec-Fetch-Site` values a browser sends for the engine's own pages, or for a person typing the
 * URL (`none`); `same-site` is another port or subdomain, which is another origin. */
const OWN_FETCH_SITES = new Set(["same-origin", "none"]);

/**
 * Why the open engine (no AUTH_SECRET / AUTH_FUNCTION) refuses this request, or undefined: a
 * browser page of another origin must not drive it, whatever address it reaches it from (a page on
 * any website can dial `ws://127.0.0.1:8787/` or POST to it). A request with no `Origin` is a
 * non-browser client (curl, an SDK), as every browser sends one on a WebSocket handshake and on
 * every POST; an `Origin` of `null` is a sandboxed or opaque page. With auth configured a token is
 * the proof, so any origin may present one.
 */
export function foreignOriginRefusal(req: Request, env: AuthConfig): string | undefined {
  if (authMode(env) !== "open") return undefined;
  const url = new URL(req.url);
  const upgrade = req.headers.get("upgrade")?.toLowerCase() === "websocket";
  if (!upgrade && !isEngineApiPath(url.pathname)) return undefined;
  const origin = req.headers.get("origin");
  // A page of a listed origin is another site to the browser (cross-site, or same-site on another
  // port), so its Sec-Fetch-Site cannot vouch for it: the Origin it cannot forge does.
  if (origin !== null && allowedOrigins(env).has(origin)) return undefined;
  const site = req.headers.get("sec-fetch-site");
  if (site !== null && !OWN_FETCH_SITES.has(site.toLowerCase()))
    return `this engine has no AUTH_SECRET and serves its own pages and local programs only: a ${site} request from a web page is refused`;
  if (origin !== null && origin !== url.origin) {
    return `this engine has no AUTH_SECRET and serves its own pages and local programs only: a request from the web origin ${origin.slice(0, 100)} is refused`;
  }
  return undefined;
}

/** Content types a browser sends without asking first (no CORS preflight): a page of any origin can
 * send them, so a JSON endpoint that took them would take a forged request. */
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json$/;

/**
 * Why a JSON endpoint refuses this request's body, or undefined. A browser's request (it carries
 * `Origin` or `Sec-Fetch-Site`) must say `application/json`: text/plain, form and multipart bodies are
 * what a cross-site page can send without a preflight. A non-browser client cannot be forged that
 * way, so its content type is not judged (Node's fetch sends a string as text/plain), except a form
 * or multipart body, which is never JSON (curl's `-d` default: send `-H 'content-type: application/json'`).
 */
export function nonJsonBodyRefusal(req: Request): string | undefined {
  const method = req.method.toUpperCase();
  if (method === "GET" || method === "HEAD" || method === "OPTIONS") return undefined;
  const type = (req.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (JSON_TYPE.test(type)) return undefined;
  const form = type === "application/x-www-form-urlencoded" || type === "multipart/form-data";
  // Browsers send `Origin` on every POST and `Sec-Fetch-Site` on every request; Node's fetch sends
  // `Sec-Fetch-Mode` too, so that one does not tell a browser.
  const browser = req.headers.has("origin") || req.headers.has("sec-fetch-site");
  if (!form && !browser) return undefined;
  return `this endpoint takes a JSON body: send Content-Type: application/json (not ${type || "none"})`;
}

export function authMode(env: AuthConfig): AuthMode {
  return env.AUTH_SECRET || env.AUTH_FUNCTION ? "token" : "open";
}

export type AuthResult =
  | { ok: true; grant: Grant; viaProtocol: boolean }
  | { ok: false; status: 401 | 403 | 503; code: string; message: string };

/** The token a request carries, and whether it came as a WebSocket subprotocol. */
export function tokenOf(req: Request): { token: string; viaProtocol: boolean } | undefined {
  const auth = req.headers.get("authorization");
  const m = auth ? /^Bearer\s+(\S+)\s*$/i.exec(auth) : null;
  if (m) return { token: m[1]!, viaProtocol: false };
  const protocols = req.headers.get("sec-websocket-protocol");
  if (protocols) {
    for (const p of protocols.split(",")) {
      const t = p.trim();
      if (t.startsWith(WS_BEARER_PREFIX)) return { token: t.slice(WS_BEARER_PREFIX.length), viaProtocol: true };
    }
  }
  const q = new URL(req.url).searchParams.get("access_token");
  return q ? { token: q, viaProtocol: false } : undefined;
}

const CLOSED_MESSAGE =
  "this engine has no AUTH_SECRET or AUTH_FUNCTION configured, so it accepts loopback clients only. " +
  "Set a secret (`wrangler secret put AUTH_SECRET`, then mint tokens with `npm run token -- --sub NAME`) " +
  "or name an auth function in AUTH_FUNCTION.";

/**
 * Decide who the request is. `callDefault` calls a function in the default namespace (for
 * AUTH_FUNCTION). Never throws.
 */
export async function authenticate(
  req: Request,
  namespace: string,
  env: AuthConfig,
  callDefault: (functionId: string, payload: unknown, timeoutMs: number) => Promise<CallOutcome>,
): Promise<AuthResult> {
  const result = await identify(req, namespace, env, callDefault);
  if (!result.ok) return result;
  if (result.grant.exp !== undefined && result.grant.exp * 1000 <= Date.now())
    return { ok: false, status: 401, code: "unauthorized", message: "token expired" };
  if (!mayUseNamespace(result.grant, namespace)) {
    return { ok: false, status: 403, code: "forbidden", message: `'${result.grant.sub}' may not use namespace '${namespace}'` };
  }
  return result;
}

async function identify(
  req: Request,
  namespace: string,
  env: AuthConfig,
  callDefault: (functionId: string, payload: unknown, timeoutMs: number) => Promise<CallOutcome>,
): Promise<AuthResult> {
  if (authMode(env) === "open") {
    if (isLocalClient(req)) return { ok: true, grant: OPEN_GRANT, viaProtocol: tokenOf(req)?.viaProtocol ?? false };
    return { ok: false, status: 403, code: "unauthorized", message: CLOSED_MESSAGE };
  }
  const presented = tokenOf(req);
  let tokenProblem: string | undefined;
  if (presented && env.AUTH_SECRET) {
    const check = await verifyToken(env.AUTH_SECRET, presented.token);
    if (check.ok) return { ok: true, grant: check.grant, viaProtocol: presented.viaProtocol };
    tokenProblem = check.reason;
  }
  if (env.AUTH_FUNCTION) return askAuthFunction(req, namespace, env.AUTH_FUNCTION, presented?.viaProtocol ?? false, callDefault);
  return {
    ok: false,
    status: 401,
    code: "unauthorized",
    message: tokenProblem ?? "a token is required: send `Authorization: Bearer <token>` (mint one with `npm run token -- --sub NAME`)",
  };
}

async function askAuthFunction(
  req: Request,
  namespace: string,
  functionId: string,
  viaProtocol: boolean,
  callDefault: (functionId: string, payload: unknown, timeoutMs: number) => Promise<CallOutcome>,
): Promise<AuthResult> {
  const url = new URL(req.url);
  const headers: Record<string, string> = {};
  req.headers.forEach((v, k) => {
    if (!k.startsWith(INTERNAL_HEADER_PREFIX)) headers[k] = v;
  });
  const query: Record<string, string> = {};
  for (const [k, v] of url.searchParams) if (!(k in query)) query[k] = v;
  const input: AuthFunctionInput = { path: url.pathname, namespace, headers, query, ip: req.headers.get("cf-connecting-ip") };
  let out: CallOutcome;
  try {
    out = await callDefault(functionId, input, AUTH_FUNCTION_TIMEOUT_MS);
  } catch (e) {
    out = { ok: false, error: { code: "invocation_error", message: String(e) } };
  }
  if (!out.ok) {
    // The auth function is down or failed: nobody gets in (fail closed), and the client learns why.
    const status =
      out.error.code === "function_not_found" || out.error.code === "timeout" || out.error.code === "invocation_stopped" ? 503 : 401;
    return { ok: false, status, code: "unauthorized", message: `auth function ${functionId} failed: ${out.error.code}` };
  }
  const answer = authFunctionOutput.safeParse(out.result);
  if (!answer.success)
    return { ok: false, status: 401, code: "unauthorized", message: `auth function ${functionId} answered something that is not a grant` };
  if (answer.data.allowed === false)
    return { ok: false, status: 401, code: "unauthorized", message: answer.data.reason ?? "refused by the auth function" };
  const { allowed: _allowed, ...grant } = answer.data;
  const parsed = grantSchema.safeParse(grant);
  if (!parsed.success)
    return { ok: false, status: 401, code: "unauthorized", message: `auth function ${functionId} answered a malformed grant` };
  if (isReservedSub(parsed.data.sub))
    return {
      ok: false,
      status: 401,
      code: "unauthorized",
      message: `auth function ${functionId} answered the reserved sub '${parsed.data.sub}'`,
    };
  return { ok: true, grant: parsed.data, viaProtocol };
}

/** `authenticate` for the engine Worker: AUTH_FUNCTION is answered by the default namespace's engine. */
export function authenticateRequest(
  req: Request,
  env: AuthConfig & { ENGINE: { getByName(name: string): EngineRpc } },
  namespace: string,
): Promise<AuthResult> {
  return authenticate(req, namespace, env, (function_id, payload, timeout_ms) => {
    // Typed by protocol's contract (the Worker's Env passes: its stub is an EngineRpc).
    const engine: EngineRpc = env.ENGINE.getByName("default");
    return engine.trigger({ function_id, payload, timeout_ms });
  });
}

/** The request the engine object sees: client-sent internal headers dropped, the grant set. */
export function withGrant(req: Request, grant: Grant, viaProtocol: boolean): Request {
  const headers = new Headers();
  req.headers.forEach((v, k) => {
    if (!k.startsWith(INTERNAL_HEADER_PREFIX)) headers.set(k, v);
  });
  headers.set(GRANT_HEADER, JSON.stringify(grant));
  const ip = req.headers.get("cf-connecting-ip");
  if (ip) headers.set(CLIENT_IP_HEADER, ip);
  if (viaProtocol) headers.set(WS_PROTOCOL_HEADER, WS_PROTOCOL);
  return new Request(req, { headers });
}

/** Read back what withGrant set (in the engine object). Undefined: not from the front door. */
export function grantOf(req: Request): Grant | undefined {
  const raw = req.headers.get(GRANT_HEADER);
  if (!raw) return undefined;
  try {
    const g = grantSchema.safeParse(JSON.parse(raw));
    return g.success ? g.data : undefined;
  } catch {
    return undefined;
  }
}
