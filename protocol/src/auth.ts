// Who may do what: the permissions a connection or HTTP caller holds (a *grant*), where they come
// from (a signed token, or an auth function's answer) and how each check reads them. The engine's
// front door turns a request into a grant before any Durable Object is touched; the engine core
// checks the grant on every registration, binding and call.
import { z } from "zod";
import { IIIError } from "./errors.ts";

/** A namespace glob, function-id glob or prefix list entry: short printable text. */
const entry = z.string().min(1).max(256);
/** Session globs one grant may name: an operator needs `*`, a support desk a few prefixes; the
 * list travels in every call's `_caller_principal`, so it stays short. */
export const MAX_SESSION_GLOBS = 16;

/**
 * What a connection may do. Absent lists mean "anything" (ownership still applies: nobody takes a
 * function, route or trigger another live worker holds).
 * - `sub`: who (the worker or user name); registrations and connections are counted per `sub`.
 * - `ns`: namespaces it may reach, `*` for any (globs allowed, e.g. `team-*`).
 * - `call`: function-id globs it may invoke (`math::*`, `state::get`).
 * - `register`: function-id / trigger-type-id prefixes it may register (`math::`).
 * - `bind`: trigger types it may bind (`http`, `cron`, …).
 * - `durable_bindings`: bindings it makes with `engine::register_trigger` outlive its connections.
 *   Without it such a binding ends when the principal's last connection to the namespace ends, so
 *   a visitor cannot leave a route or a schedule running someone else's function after it leaves.
 * - `sessions`: agent-session id globs it may read and act on besides the sessions it started
 *   itself; `["*"]` is every session (an operator or the console).
 */
export const grantSchema = z.object({
  sub: z.string().min(1).max(128),
  ns: z.array(entry).min(1).max(64),
  call: z.array(entry).max(256).optional(),
  register: z.array(entry).max(256).optional(),
  bind: z.array(entry).max(64).optional(),
  /** Expiry, seconds since the epoch (JWT `exp`). */
  exp: z.number().int().positive().optional(),
  durable_bindings: z.boolean().optional(),
  sessions: z.array(entry).max(MAX_SESSION_GLOBS).optional(),
});
export type Grant = z.infer<typeof grantSchema>;

/** The grant of an engine that runs open (`npm start` on loopback without AUTH_SECRET), and of the
 * engine's own and trusted deployment code (calls that carry no grant): every local process is its
 * operator, so it sees every session, and its bindings outlive their maker (one local developer has
 * no visitors to outlive). */
export const OPEN_GRANT: Grant = Object.freeze({
  sub: "anonymous",
  ns: ["*"],
  durable_bindings: true,
  sessions: Object.freeze(["*"]),
}) as Grant;

/** Is `sub` the open engine's own principal? No token or auth function may name it: the open
 * engine's grant is trusted where the engine meets it (durable bindings, every session, trusted
 * servers of auto-allowed ids), so a tenant calling itself `anonymous` would inherit all of that. */
export const isReservedSub = (sub: string): boolean => sub === OPEN_GRANT.sub;

/** What an auth function (AUTH_FUNCTION) is sent: the upgrade or request it is asked about. */
export interface AuthFunctionInput {
  path: string;
  namespace: string;
  headers: Record<string, string>;
  query: Record<string, string>;
  ip: string | null;
}
/** What it answers: a grant, or a refusal with a reason the client is told. */
export const authFunctionOutput = z.union([
  z.object({ allowed: z.literal(false), reason: z.string().max(512).optional() }),
  grantSchema.extend({ allowed: z.literal(true).optional() }),
]);

const globCache = new Map<string, RegExp>();
/** `*` matches any run of characters (`::` included); everything else is literal. */
export function globMatch(glob: string, text: string): boolean {
  if (glob === "*") return true;
  if (!glob.includes("*")) return glob === text;
  let re = globCache.get(glob);
  if (!re) {
    re = new RegExp(
      `^${glob
        .split("*")
        .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
        .join(".*")}$`,
      "s",
    );
    if (globCache.size > 1024) globCache.clear();
    globCache.set(glob, re);
  }
  return re.test(text);
}

export const mayUseNamespace = (g: Grant, ns: string): boolean => g.ns.some((p) => globMatch(p, ns));
export const mayCall = (g: Grant, functionId: string): boolean => !g.call || g.call.some((p) => globMatch(p, functionId));
export const mayRegister = (g: Grant, id: string): boolean =>
  !g.register || g.register.some((p) => (p.includes("*") ? globMatch(p, id) : id.startsWith(p)));
export const mayBind = (g: Grant, triggerType: string): boolean => !g.bind || g.bind.some((p) => globMatch(p, triggerType));
/** Do the bindings `g` makes with engine::register_trigger outlive its connections? */
export const mayBindDurably = (g: Grant): boolean => g.durable_bindings === true;

// ------------------------------------------------------------------ who called: sessions have owners

/** The payload key the engine stamps with the calling principal (beside `_caller_worker_id`). */
export const CALLER_PRINCIPAL_KEY = "_caller_principal";
/** Engine state scope holding each agent session's owner, `{sub, created_at_ms}` by session id:
 * written once, create-if-absent, by the run that starts the session. */
export const SESSION_OWNER_SCOPE = "session_owner";

/** Streams whose groups are agent sessions (group id = session id, e.g. `agent::events/<sid>`):
 * a group answers only to its session's owner and to `sessions` grants naming it. */
export const SESSION_GROUP_STREAMS: readonly string[] = ["agent::events", "agent::turn_end"];
/** Streams whose items are agent sessions (item id = session id, `agent::sessions/all/<sid>`):
 * each principal sees only the items of sessions it may use. */
export const SESSION_ITEM_STREAMS: readonly string[] = ["agent::sessions"];

/** Who is calling, as a function sees it: the grant's `sub` and its `sessions` globs. Absent from a
 * payload = the call came from trusted code of this deployment (operator rights). */
export const callerPrincipalSchema = z.object({
  sub: z.string().min(1).max(128),
  sessions: z.array(entry).max(MAX_SESSION_GLOBS).optional(),
});
export type CallerPrincipal = z.infer<typeof callerPrincipalSchema>;

export const principalOf = (g: Grant): CallerPrincipal => (g.sessions ? { sub: g.sub, sessions: [...g.sessions] } : { sub: g.sub });

/** May this grant see every agent session (`sessions: ["*"]`)? */
export const seesAllSessions = (p: { sessions?: readonly string[] } | undefined): boolean => !!p?.sessions?.includes("*");

/**
 * May `p` read or act on session `sessionId`, owned by `owner`? Trusted code (no principal) may;
 * so may the owner, and a grant whose `sessions` globs name the id. A session with no recorded
 * owner answers only to trusted code and to `sessions` grants.
 */
export function mayUseSession(p: CallerPrincipal | undefined, sessionId: string, owner: string | undefined): boolean {
  if (!p) return true;
  if (owner !== undefined && owner === p.sub) return true;
  return !!p.sessions?.some((glob) => globMatch(glob, sessionId));
}

/** A way to call a function (a handler's `ctx.trigger`), for the owner look-ups below. */
export type OwnerLookup = (request: { function_id: string; payload?: unknown; timeoutMs?: number }) => Promise<unknown>;
/** Reading or writing one owner record: the engine's own state, answered at once unless it is gone. */
export const SESSION_OWNER_TIMEOUT_MS = 30_000;

/** The recorded owner (`sub`) of a session, if any. */
export async function sessionOwner(call: OwnerLookup, sessionId: string): Promise<string | undefined> {
  const v = await call({
    function_id: "state::get",
    payload: { scope: SESSION_OWNER_SCOPE, key: sessionId },
    timeoutMs: SESSION_OWNER_TIMEOUT_MS,
  });
  return v && typeof v === "object" && typeof (v as { sub?: unknown }).sub === "string" ? (v as { sub: string }).sub : undefined;
}

/**
 * Refuse `caller` a session it may not use (mayUseSession) with `forbidden`. The refusal reads the
 * same whether the session exists or not, so it tells a stranger nothing. No look-up for trusted
 * code or a grant whose globs already name the session.
 */
export async function assertSessionAccess(call: OwnerLookup, caller: CallerPrincipal | undefined, sessionId: string): Promise<void> {
  if (mayUseSession(caller, sessionId, undefined)) return;
  const owner = await sessionOwner(call, sessionId);
  if (!mayUseSession(caller, sessionId, owner)) throw new IIIError("forbidden", `session ${sessionId} is not one '${caller!.sub}' may use`);
}

/** Record `sub` as the owner of `sessionId` unless one is recorded already (create-if-absent);
 * answers the owner that now stands. */
export async function claimSessionOwner(call: OwnerLookup, sessionId: string, sub: string): Promise<string> {
  try {
    await call({
      function_id: "state::update",
      payload: {
        scope: SESSION_OWNER_SCOPE,
        key: sessionId,
        ops: [{ type: "set", path: "", value: { sub, created_at_ms: Date.now() } }],
        expected: null,
      },
      timeoutMs: SESSION_OWNER_TIMEOUT_MS,
    });
    return sub;
  } catch (e) {
    if ((e as { code?: unknown } | null)?.code !== "state_conflict") throw e;
    return (await sessionOwner(call, sessionId)) ?? sub;
  }
}

/** The principal stamped into a payload, when it is well formed. */
export function callerPrincipalIn(data: unknown): CallerPrincipal | undefined {
  if (!data || typeof data !== "object" || Array.isArray(data)) return undefined;
  const raw = (data as Record<string, unknown>)[CALLER_PRINCIPAL_KEY];
  if (raw === undefined) return undefined;
  const p = callerPrincipalSchema.safeParse(raw);
  return p.success ? p.data : undefined;
}

// ------------------------------------------------------------------ tokens (JWT, HS256)

/** Tokens are compact JWS (JWT) signed with HMAC-SHA256 over AUTH_SECRET, so any language's JWT
 * library can mint one. The grant travels in the standard `sub`/`exp` claims plus `ns`, `call`,
 * `register`, `bind`, `durable_bindings`. */
export const TOKEN_ALGORITHM = "HS256";
/** The `iss` every token names: a token minted for something else is not accepted here. */
export const TOKEN_ISSUER = "iii-edge";

/** The subprotocol a browser offers beside its token (`Sec-WebSocket-Protocol: iii, iii.bearer.<token>`);
 * the engine answers with this one. A subprotocol travels in a header, so the token stays out of
 * URLs and the access logs that record them. */
export const WS_PROTOCOL = "iii";
export const WS_BEARER_PREFIX = "iii.bearer.";
