// GET /_console/token: how the console page gets its engine token, the way a real app's backend
// hands one to its signed-in users — a short-lived, narrow grant minted here, on the engine's own
// Worker, never a long-lived secret in the page's bundle (demo-app/README.md "Auth").
//   - No AUTH_SECRET: `{token: null}` — an open loopback engine needs none; with AUTH_FUNCTION the
//     page connects without one and the auth function decides (it sees the page's cookies).
//   - AUTH_SECRET and the request carries `Authorization: Bearer <CONSOLE_CREDENTIAL>` (a Worker
//     secret the person types into the page once): a token for sub "console".
//   - AUTH_SECRET and a loopback client of a loopback engine (`npm start` on this machine, whose
//     user holds the secret anyway): a token, no credential asked.
//   - Otherwise 401, saying what to set.
// The grant: one namespace, registrations only under `console-` (the page's own functions), bindings
// only to the discovery and state trigger types; calls unrestricted and every agent session
// (`sessions: ["*"]`): it is the operator's console, which lists and follows every session.
import { mintToken } from "@iii-edge/protocol/token";

export const CONSOLE_TOKEN_PATH = "/_console/token";
/** A console token's lifetime: short, the page fetches a fresh one on every reconnect. */
export const CONSOLE_TOKEN_TTL_S = 10 * 60;
/** What a console tab may register: its worker name is `console-<id>`, its functions `console-<id>::*`. */
export const CONSOLE_REGISTER_PREFIX = "console-";
/** Trigger types the console binds: catalog and worker discovery, and state changes (its state view). */
export const CONSOLE_BIND = ["engine::functions-available", "engine::workers-available", "state"];
/** The credential compared against CONSOLE_CREDENTIAL is at most this long (a typed password). */
const MAX_CREDENTIAL_CHARS = 1024;
const NAMESPACE = /^[A-Za-z0-9._-]{1,64}$/;
const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);
const LOOPBACK_IP = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|::ffff:127\.\d{1,3}\.\d{1,3}\.\d{1,3})$/;

export interface ConsoleTokenEnv {
  AUTH_SECRET?: string;
  AUTH_FUNCTION?: string;
  /** The console credential (a Worker secret: `wrangler secret put CONSOLE_CREDENTIAL`). */
  CONSOLE_CREDENTIAL?: string;
}

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", "cache-control": "no-store" } });

/** The same test as the engine's front door: a loopback engine serving a loopback client. */
function isLoopback(req: Request): boolean {
  const host = new URL(req.url).hostname.toLowerCase();
  const ip = req.headers.get("cf-connecting-ip");
  return LOOPBACK_HOSTS.has(host) && (ip === null || LOOPBACK_IP.test(ip));
}

/** Constant-time comparison of two strings (over their SHA-256, so lengths leak nothing either). */
async function sameSecret(a: string, b: string): Promise<boolean> {
  const enc = new TextEncoder();
  const [x, y] = await Promise.all([crypto.subtle.digest("SHA-256", enc.encode(a)), crypto.subtle.digest("SHA-256", enc.encode(b))]);
  const u = new Uint8Array(x);
  const v = new Uint8Array(y);
  let diff = 0;
  for (let i = 0; i < u.length; i++) diff |= u[i]! ^ v[i]!;
  return diff === 0;
}

export function isConsoleTokenRequest(req: Request): boolean {
  return new URL(req.url).pathname === CONSOLE_TOKEN_PATH;
}

export async function consoleToken(req: Request, env: ConsoleTokenEnv): Promise<Response> {
  if (req.method !== "GET") return json(405, { error: { code: "method_not_allowed", message: `${CONSOLE_TOKEN_PATH} answers GET` } });
  const ns = new URL(req.url).searchParams.get("ns") ?? "default";
  if (!NAMESPACE.test(ns)) return json(400, { error: { code: "invalid_arguments", message: "ns must be 1-64 of A-Z a-z 0-9 . _ -" } });
  if (!env.AUTH_SECRET) return json(200, { token: null, mode: env.AUTH_FUNCTION ? "auth_function" : "open" });

  const auth = req.headers.get("authorization");
  // A typed password may hold spaces: everything after "Bearer ", trimmed.
  const presented = auth ? /^Bearer\s+(.+?)\s*$/i.exec(auth)?.[1] : undefined;
  let sub: string | undefined;
  if (presented !== undefined && env.CONSOLE_CREDENTIAL && presented.length <= MAX_CREDENTIAL_CHARS && (await sameSecret(presented, env.CONSOLE_CREDENTIAL))) sub = "console";
  else if (presented === undefined && isLoopback(req)) sub = "console@loopback";
  if (!sub) {
    const message = !env.CONSOLE_CREDENTIAL
      ? "this engine requires tokens and has no CONSOLE_CREDENTIAL set: set one (`wrangler secret put CONSOLE_CREDENTIAL`) to sign in to the console, or open it as /#token=<token> (`npm run token -- --sub NAME`)"
      : presented === undefined ? "sign in with the console credential" : "wrong console credential";
    return json(401, { error: { code: "unauthorized", message } });
  }
  const token = await mintToken(env.AUTH_SECRET, { sub, ns: [ns], register: [CONSOLE_REGISTER_PREFIX], bind: CONSOLE_BIND, sessions: ["*"] }, CONSOLE_TOKEN_TTL_S);
  return json(200, { token, sub, ns, expires_at: Math.floor(Date.now() / 1000) + CONSOLE_TOKEN_TTL_S });
}
