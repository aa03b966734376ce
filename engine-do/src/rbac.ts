// The front door of iii's RBAC worker listener (protocol/src/rbac.ts): `ws://host/rbac` for the
// default namespace, `ws://host/ns/<namespace>/rbac` for another. Configured by the RBAC var (JSON,
// wrangler.toml); without it the path answers 404. A connection's handshake goes to the configured
// auth function (in the listener's namespace) as iii's AuthInput; its AuthResult becomes the
// connection's RBAC session, which the engine object enforces (core/rbac.ts). A throw, a failure, a
// timeout or an answer that is not an AuthResult refuses the connection (fail closed).
//
// Without auth_function_id the listener admits whom the engine's own front door admits (a token,
// AUTH_FUNCTION, or loopback on an open engine), with an empty context and only what
// expose_functions names callable.
import type { Context } from "hono";
import {
  RBAC_CLOSED_SESSION,
  rbacAuthResult,
  rbacConfigSchema,
  rbacSessionSchema,
  type EngineRpc,
  type Grant,
  type RbacAuthInput,
  type RbacConfig,
  type RbacSession,
  formatIssues,
} from "@iii-edge/protocol";
import { INTERNAL_HEADER_PREFIX, authenticateRequest, withGrant } from "./auth.ts";
import { connectionShards } from "./shards/config.ts";

/** Set by the front door only (its prefix is dropped from what clients send): the connection's session. */
export const RBAC_HEADER = "x-iii-rbac";

/** The auth function answers within this, or the connection is refused (a client waits on it). */
const RBAC_AUTH_TIMEOUT_MS = 5_000;
/** Longest principal name taken from the auth function's context (a grant's `sub` is ≤ 128). */
const MAX_SUB_FROM_CONTEXT = 100;

let cached: { raw: string; config: RbacConfig | { error: string } } | undefined;
/** The RBAC var, parsed once per isolate; undefined when the listener is not configured. */
export function rbacConfigOf(env: { RBAC?: string }): RbacConfig | { error: string } | undefined {
  const raw = env.RBAC?.trim();
  if (!raw) return undefined;
  if (cached?.raw === raw) return cached.config;
  let config: RbacConfig | { error: string };
  try {
    const parsed = rbacConfigSchema.safeParse(JSON.parse(raw));
    config = parsed.success ? parsed.data : { error: formatIssues(parsed.error, { all: true, root: "RBAC" }) };
  } catch (e) {
    config = { error: `RBAC is not JSON: ${e instanceof Error ? e.message : String(e)}` };
  }
  cached = { raw, config };
  return config;
}

const refuse = (c: Context, status: number, code: string, message: string) => c.json({ error: { code, message } }, status as 401);

/** iii's AuthInput of a handshake: every header (lower-case names) but the front door's own. */
function authInput(req: Request): RbacAuthInput {
  const headers: Record<string, string> = {};
  req.headers.forEach((v, k) => {
    if (!k.startsWith(INTERNAL_HEADER_PREFIX)) headers[k] = v;
  });
  const query_params: Record<string, string[]> = {};
  for (const [k, v] of new URL(req.url).searchParams) (query_params[k] ??= []).push(v);
  return { headers, query_params, ip_address: req.headers.get("cf-connecting-ip") ?? "127.0.0.1" };
}

/** The principal a session counts as (connection caps, registration quotas): `rbac:` and the
 * context's `sub` or `user_id` when it names one, so it never collides with a token's subject. */
function principalOf(context: Record<string, unknown>): string {
  const who = [context.sub, context.user_id].find(
    (v): v is string => typeof v === "string" && v.length > 0 && v.length <= MAX_SUB_FROM_CONTEXT,
  );
  return `rbac:${who ?? "anonymous"}`;
}

/** A WebSocket upgrade on the RBAC listener of `namespace` (already validated by the caller). */
export async function rbacUpgrade(c: Context<{ Bindings: Env }>, namespace: string): Promise<Response> {
  const config = rbacConfigOf(c.env);
  if (!config) return refuse(c, 404, "not_found", "this engine has no RBAC listener: set the RBAC var (see README, Security)");
  if ("error" in config) return refuse(c, 503, "unauthorized", `the RBAC listener is misconfigured: ${config.error}`);
  // A shard would need the session of every connection it relays; the listener runs unsharded.
  if (connectionShards(c.env) > 1) return refuse(c, 503, "unauthorized", "the RBAC listener is not available with CONNECTION_SHARDS > 1");
  const req = c.req.raw;
  let session: RbacSession;
  let grant: Grant;
  if (!config.auth_function_id) {
    const who = await authenticateRequest(req, c.env, namespace);
    if (!who.ok) return refuse(c, who.status, who.code, who.message);
    session = {
      allowed_functions: [],
      forbidden_functions: [],
      allow_trigger_type_registration: true,
      allow_function_registration: true,
      context: {},
      config,
    };
    grant = { sub: `rbac:${who.grant.sub}`.slice(0, 128), ns: [namespace] };
  } else {
    const engine: EngineRpc = c.env.ENGINE.getByName(namespace);
    let out;
    try {
      out = await engine.trigger({ function_id: config.auth_function_id, payload: authInput(req), timeout_ms: RBAC_AUTH_TIMEOUT_MS });
    } catch (e) {
      out = { ok: false as const, error: { code: "invocation_error", message: String(e) } };
    }
    if (!out.ok)
      return refuse(c, 401, "unauthorized", `refused by the auth function ${config.auth_function_id}: ${out.error.message.slice(0, 300)}`);
    const answer = rbacAuthResult.safeParse(out.result);
    if (!answer.success) {
      return refuse(
        c,
        401,
        "unauthorized",
        `the auth function ${config.auth_function_id} answered something that is not an AuthResult (${formatIssues(answer.error)})`,
      );
    }
    const a = answer.data;
    session = {
      allowed_functions: a.allowed_functions,
      forbidden_functions: a.forbidden_functions,
      allowed_trigger_types: a.allowed_trigger_types ?? null,
      allow_trigger_type_registration: a.allow_trigger_type_registration,
      allow_function_registration: a.allow_function_registration,
      context: a.context,
      function_registration_prefix: a.function_registration_prefix ?? null,
      config,
    };
    grant = { sub: principalOf(a.context), ns: [namespace] };
  }
  // The session decides calls and registrations; the grant keeps the engine's own rules (one
  // namespace, ownership, quotas and caps per principal) and the trigger types it may bind.
  if (session.allowed_trigger_types) grant.bind = session.allowed_trigger_types;
  const forwarded = withGrant(req, grant, false);
  forwarded.headers.set(RBAC_HEADER, JSON.stringify(session));
  return c.env.ENGINE.getByName(namespace).fetch(forwarded);
}

/** In the engine object: the session the front door set on a listener connection's upgrade. One
 * that does not parse allows nothing (never the wider rights of the connection's grant). */
export function rbacSessionOf(req: Request): RbacSession | undefined {
  const raw = req.headers.get(RBAC_HEADER);
  if (!raw) return undefined;
  try {
    const s = rbacSessionSchema.safeParse(JSON.parse(raw));
    return s.success ? s.data : RBAC_CLOSED_SESSION;
  } catch {
    return RBAC_CLOSED_SESSION;
  }
}
