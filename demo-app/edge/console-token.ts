// GET /_console/token: how the console page gets its engine token, the way a real app's backend
// hands one to its signed-in users — a short-lived, narrow grant minted here, on the engine's own
// Worker, never a long-lived secret in the page's bundle (demo-app/README.md "Auth").
//   - No AUTH_SECRET: `{token: null}` — an open loopback engine needs none; with AUTH_FUNCTION the
//     page connects without one and the auth function decides (it sees the page's cookies).
//   - AUTH_SECRET and the request carries `Authorization: Bearer <CONSOLE_CREDENTIAL>` (a Worker
//     secret the person types into the page once): a token for sub "console".
//   - AUTH_SECRET, a local client of a loopback engine (`npm start` on this machine), and the
//     console code: `npm start` makes a fresh CONSOLE_CODE each run and prints the console's URL
//     with it (`/#code=…`, a fragment, so it reaches no log), as Jupyter does; the page sends it in
//     CONSOLE_CODE_HEADER. Being on loopback is not enough: a page a tenant's http route serves
//     from this same origin is on loopback too, and has no code.
//   - Otherwise 401, saying what to set.
// A browser's request must come from the engine's own page (`Sec-Fetch-Site: same-origin`, an
// `Origin` equal to the engine's), never from another site's.
// The grant: one namespace, registrations only under `console-` (the page's own functions),
// bindings only to the discovery and state trigger types, and calls only to what the console's
// screens call (CONSOLE_CALLS) plus the operator's CONSOLE_CALL globs, and every agent session
// (`sessions: ["*"]`): it is the operator's console, which lists and follows every session.
import { isLocalClient } from "@iii-edge/engine-do/auth";
import { mintToken } from "@iii-edge/protocol/token";

export const CONSOLE_TOKEN_PATH = "/_console/token";
/** The header the console page sends its code in (a header: a query string lands in logs). */
export const CONSOLE_CODE_HEADER = "x-console-code";
/** A console token's lifetime: short, the page fetches a fresh one on every reconnect. */
export const CONSOLE_TOKEN_TTL_S = 10 * 60;
/** What a console tab may register: its worker name is `console-<id>`, its functions `console-<id>::*`. */
export const CONSOLE_REGISTER_PREFIX = "console-";
/** Trigger types the console binds: catalog and worker discovery, and state changes (its state view). */
export const CONSOLE_BIND = ["engine::functions-available", "engine::workers-available", "state"];
/**
 * What the console's screens call (demo-app/src: catalog, workers, triggers, queues, traces, logs,
 * state, the agent screens), and other console tabs' own functions (`console-*`, e.g. a
 * confirmation one tab asks of another). Another function is called from the catalog only when
 * the operator lists it in CONSOLE_CALL.
 */
export const CONSOLE_CALLS: readonly string[] = [
  "engine::functions::list",
  "engine::functions::info",
  "engine::workers::list",
  "engine::triggers::list",
  "engine::registered-triggers::list",
  "engine::traces::list",
  "engine::traces::tree",
  "engine::logs::list",
  "engine::cron::jobs",
  "engine::queue::list_topics",
  "engine::queue::dlq_topics",
  "engine::queue::dlq_messages",
  "iii::queue::redrive",
  "iii::queue::redrive_message",
  "iii::queue::discard_message",
  "state::get",
  "state::set",
  "state::list",
  "state::list_keys",
  "state::list_groups",
  "run::start",
  "run::resume",
  "run::steer",
  "run::fork",
  "run::events",
  "run::request",
  "turn::get_state",
  "turn::stop",
  "approval::resolve",
  "harness::children",
  "session-tree::list",
  "session-tree::get",
  "session-tree::tree",
  "session-tree::messages",
  "session-tree::set_active_leaf",
  "models::list",
  "budget::list",
  "budget::get",
  "budget::create",
  "auth::status",
  "auth::list_providers",
  "auth::set_token",
  `${CONSOLE_REGISTER_PREFIX}*`,
];
/** Most extra CONSOLE_CALL globs (a grant's `call` holds at most 256 entries). */
const MAX_EXTRA_CALLS = 64;
/** The credential compared against CONSOLE_CREDENTIAL is at most this long (a typed password). */
const MAX_CREDENTIAL_CHARS = 1024;
/** A console code is at most this long (start.mjs makes 32 characters). */
const MAX_CODE_CHARS = 256;
const NAMESPACE = /^[A-Za-z0-9._-]{1,64}$/;
const GLOB = /^[A-Za-z0-9._:*-]{1,200}$/;

export interface ConsoleTokenEnv {
  AUTH_SECRET?: string;
  AUTH_FUNCTION?: string;
  /** The console credential (a Worker secret: `wrangler secret put CONSOLE_CREDENTIAL`). */
  CONSOLE_CREDENTIAL?: string;
  /** This run's console code (`npm start` sets it and prints the console URL carrying it). */
  CONSOLE_CODE?: string;
  /** Extra function-id globs a console token may call, comma-separated (e.g. "orders::*"). */
  CONSOLE_CALL?: string;
}

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", "cache-control": "no-store" } });

/** Why a browser request is not the engine's own page's, or undefined (also for non-browsers). */
function notOwnPage(req: Request): string | undefined {
  const site = req.headers.get("sec-fetch-site");
  if (site !== null && site.toLowerCase() !== "same-origin")
    return `the console token is handed to the engine's own page only (this request is ${site})`;
  const origin = req.headers.get("origin");
  if (origin !== null && origin !== new URL(req.url).origin) return "the console token is handed to the engine's own page only";
  return undefined;
}

/** The call globs of a console token: the screens' own and the operator's CONSOLE_CALL. */
export function consoleCalls(env: ConsoleTokenEnv): string[] {
  const extra = (env.CONSOLE_CALL ?? "")
    .split(",")
    .map((g) => g.trim())
    .filter((g) => GLOB.test(g))
    .slice(0, MAX_EXTRA_CALLS);
  return [...new Set([...CONSOLE_CALLS, ...extra])];
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
  const foreign = notOwnPage(req);
  if (foreign) return json(403, { error: { code: "forbidden", message: foreign } });

  const auth = req.headers.get("authorization");
  // A typed password may hold spaces: everything after "Bearer ", trimmed.
  const presented = auth ? /^Bearer\s+(.+?)\s*$/i.exec(auth)?.[1] : undefined;
  const code = req.headers.get(CONSOLE_CODE_HEADER)?.trim();
  let sub: string | undefined;
  let message: string;
  if (presented !== undefined) {
    if (env.CONSOLE_CREDENTIAL && presented.length <= MAX_CREDENTIAL_CHARS && (await sameSecret(presented, env.CONSOLE_CREDENTIAL)))
      sub = "console";
    message = env.CONSOLE_CREDENTIAL ? "wrong console credential" : noCredentialMessage;
  } else if (isLocalClient(req) && env.CONSOLE_CODE) {
    if (code !== undefined && code.length <= MAX_CODE_CHARS && (await sameSecret(code, env.CONSOLE_CODE))) sub = "console@loopback";
    message =
      code === undefined
        ? "open the console from the URL `npm start` printed (it carries this run's console code), or sign in with the console credential"
        : "wrong console code: it changes on every `npm start`; open the URL this run printed";
  } else {
    message = !env.CONSOLE_CREDENTIAL ? noCredentialMessage : "sign in with the console credential";
  }
  if (!sub) return json(401, { error: { code: "unauthorized", message } });
  const token = await mintToken(
    env.AUTH_SECRET,
    { sub, ns: [ns], call: consoleCalls(env), register: [CONSOLE_REGISTER_PREFIX], bind: CONSOLE_BIND, sessions: ["*"] },
    CONSOLE_TOKEN_TTL_S,
  );
  return json(200, { token, sub, ns, expires_at: Math.floor(Date.now() / 1000) + CONSOLE_TOKEN_TTL_S });
}

const noCredentialMessage =
  "this engine requires tokens and has no CONSOLE_CREDENTIAL set: set one (`wrangler secret put CONSOLE_CREDENTIAL`) to sign in to the console, or open it as /#token=<token> (`npm run token -- --sub NAME`)";
