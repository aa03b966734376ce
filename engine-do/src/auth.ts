// The front door's half of "who may do what": every WebSocket upgrade and /_iii/* request is turned
// into a Grant (protocol/src/auth.ts) before any Durable Object is touched, or refused with 401/403.
// Where a grant comes from, in order:
//   1. a token signed with AUTH_SECRET: `Authorization: Bearer <t>`, the WebSocket subprotocol
//      `iii.bearer.<t>` (browsers, which cannot set headers), or `?access_token=<t>` (last resort);
//   2. AUTH_FUNCTION: a function (default namespace) that reads the request and answers a grant;
//   3. neither configured: open (OPEN_GRANT) for loopback clients of a loopback engine (`npm start`),
//      refused for everyone else — a deployed engine is never open by accident.
// The grant reaches the engine object in X-III-Grant, a header the front door always sets itself.
import {
  OPEN_GRANT,
  WS_BEARER_PREFIX,
  WS_PROTOCOL,
  authFunctionOutput,
  grantSchema,
  mayUseNamespace,
  type AuthFunctionInput,
  type CallOutcome,
  type EngineRpc,
  type Grant,
} from "@iii-edge/protocol";
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
}

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);

/** Is the engine itself served on loopback, to a loopback client? (`npm start`, never a deploy.) */
export function isLoopback(req: Request): boolean {
  const host = new URL(req.url).hostname.toLowerCase();
  const ip = req.headers.get("cf-connecting-ip");
  return LOOPBACK_HOSTS.has(host) && (ip === null || isLoopbackAddress(ip));
}

export function authMode(env: AuthConfig): AuthMode {
  return env.AUTH_SECRET || env.AUTH_FUNCTION ? "token" : "open";
}

export type AuthResult = { ok: true; grant: Grant; viaProtocol: boolean } | { ok: false; status: 401 | 403 | 503; code: string; message: string };

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
  if (result.grant.exp !== undefined && result.grant.exp * 1000 <= Date.now()) return { ok: false, status: 401, code: "unauthorized", message: "token expired" };
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
    if (isLoopback(req)) return { ok: true, grant: OPEN_GRANT, viaProtocol: tokenOf(req)?.viaProtocol ?? false };
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
  return { ok: false, status: 401, code: "unauthorized", message: tokenProblem ?? "a token is required: send `Authorization: Bearer <token>` (mint one with `npm run token -- --sub NAME`)" };
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
    const status = out.error.code === "function_not_found" || out.error.code === "timeout" || out.error.code === "invocation_stopped" ? 503 : 401;
    return { ok: false, status, code: "unauthorized", message: `auth function ${functionId} failed: ${out.error.code}` };
  }
  const answer = authFunctionOutput.safeParse(out.result);
  if (!answer.success) return { ok: false, status: 401, code: "unauthorized", message: `auth function ${functionId} answered something that is not a grant` };
  if (answer.data.allowed === false) return { ok: false, status: 401, code: "unauthorized", message: answer.data.reason ?? "refused by the auth function" };
  const { allowed: _allowed, ...grant } = answer.data;
  const parsed = grantSchema.safeParse(grant);
  if (!parsed.success) return { ok: false, status: 401, code: "unauthorized", message: `auth function ${functionId} answered a malformed grant` };
  return { ok: true, grant: parsed.data, viaProtocol };
}

/** `authenticate` for the engine Worker: AUTH_FUNCTION is answered by the default namespace's engine. */
export function authenticateRequest(req: Request, env: AuthConfig & { ENGINE: { getByName(name: string): EngineRpc } }, namespace: string): Promise<AuthResult> {
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
