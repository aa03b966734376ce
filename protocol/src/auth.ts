// Who may do what: the permissions a connection or HTTP caller holds (a *grant*), where they come
// from (a signed token, or an auth function's answer) and how each check reads them. The engine's
// front door turns a request into a grant before any Durable Object is touched; the engine core
// checks the grant on every registration, binding and call.
import { z } from "zod";

/** A namespace glob, function-id glob or prefix list entry: short printable text. */
const entry = z.string().min(1).max(256);

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
});
export type Grant = z.infer<typeof grantSchema>;

/** The grant of an engine that runs open (`npm start` on loopback without AUTH_SECRET), and of the
 * engine's own and trusted deployment code (calls that carry no grant): everything, bindings that
 * outlive their maker included (one local developer has no visitors to outlive). */
export const OPEN_GRANT: Grant = Object.freeze({ sub: "anonymous", ns: ["*"], durable_bindings: true }) as Grant;

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
    re = new RegExp(`^${glob.split("*").map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`, "s");
    if (globCache.size > 1024) globCache.clear();
    globCache.set(glob, re);
  }
  return re.test(text);
}

export const mayUseNamespace = (g: Grant, ns: string): boolean => g.ns.some((p) => globMatch(p, ns));
export const mayCall = (g: Grant, functionId: string): boolean => !g.call || g.call.some((p) => globMatch(p, functionId));
export const mayRegister = (g: Grant, id: string): boolean => !g.register || g.register.some((p) => (p.includes("*") ? globMatch(p, id) : id.startsWith(p)));
export const mayBind = (g: Grant, triggerType: string): boolean => !g.bind || g.bind.some((p) => globMatch(p, triggerType));
/** Do the bindings `g` makes with engine::register_trigger outlive its connections? */
export const mayBindDurably = (g: Grant): boolean => g.durable_bindings === true;

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
