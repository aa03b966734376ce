// Who may drive turns over HTTP. The harness's routes are http triggers, which the engine's front
// door serves to anyone (iii's model: a route guards itself, or HTTP_MIDDLEWARE does). So when the
// engine requires tokens (AUTH_SECRET or AUTH_FUNCTION), every route asks for one too, read the
// way the front door reads a socket's: a bearer token signed with AUTH_SECRET, else the auth
// function's answer. The grant must reach the harness's namespace and may call the route's own
// function id (`harness::http::*`, or `harness::*`). An open engine (loopback `npm start` without
// AUTH_SECRET) leaves the routes open, as it leaves its sockets.
import { OPEN_GRANT, authFunctionOutput, isReservedSub, mayCall, mayUseNamespace, type Grant } from "@iii-edge/protocol";
import { verifyToken } from "@iii-edge/protocol/token";
import type { InvocationContext } from "@iii-edge/sdk-edge/client";
import { failure, type HttpEnvelope, type HttpRequest } from "./http.ts";

export interface GuardConfig {
  /** The engine's token secret: tokens are verified with it. */
  authSecret?: string;
  /** The engine's auth function (default namespace), asked when no valid token is presented. */
  authFunction?: string;
  /** The namespace the harness serves; the grant must include it. */
  namespace: string;
}

/** The auth function's deadline: the front door's own. */
export const AUTH_FUNCTION_TIMEOUT_MS = 5_000;

export function guardConfigFrom(env: Readonly<Record<string, unknown>>): GuardConfig {
  const text = (k: string) => (typeof env[k] === "string" && env[k] !== "" ? (env[k] as string) : undefined);
  const out: GuardConfig = { namespace: text("HARNESS_NAMESPACE") ?? "default" };
  const secret = text("AUTH_SECRET");
  const fn = text("AUTH_FUNCTION");
  if (secret) out.authSecret = secret;
  if (fn) out.authFunction = fn;
  return out;
}

const bearerOf = (headers: Record<string, string>): string | undefined => {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? "");
  return m?.[1];
};

const unauthorized = (message: string): HttpEnvelope => {
  const res = failure(401, "unauthorized", message);
  res.headers["www-authenticate"] = 'Bearer realm="iii-edge"';
  return res;
};

/** The caller's grant when the request may use `routeId` (OPEN_GRANT on an open engine); else the
 * 401/403/503 to answer. The route acts for this grant's principal (sessions have owners). */
export async function authorize(
  req: HttpRequest,
  route: { id: string; path: string },
  cfg: GuardConfig,
  ctx: InvocationContext,
): Promise<{ ok: true; grant: Grant } | { ok: false; response: HttpEnvelope }> {
  const refuse = (response: HttpEnvelope) => ({ ok: false as const, response });
  if (!cfg.authSecret && !cfg.authFunction) return { ok: true, grant: OPEN_GRANT };
  const token = bearerOf(req.headers);
  let grant: Grant | undefined;
  let problem =
    "a token is required: send `Authorization: Bearer <token>` (mint one with `npm run token -- --sub NAME --allow 'harness::*'`)";
  if (token && cfg.authSecret) {
    const check = await verifyToken(cfg.authSecret, token);
    if (check.ok) grant = check.grant;
    else problem = check.reason;
  }
  if (!grant && cfg.authFunction) {
    let answer: unknown;
    try {
      answer = await ctx.trigger({
        function_id: cfg.authFunction,
        payload: {
          path: `/${route.path}`,
          namespace: cfg.namespace,
          headers: req.headers,
          query: req.query_params,
          ip: req.headers["cf-connecting-ip"] ?? null,
        },
        timeoutMs: AUTH_FUNCTION_TIMEOUT_MS,
      });
    } catch (err) {
      // Fail closed, as the front door does when its auth function is down.
      return refuse(
        failure(
          503,
          "auth_unavailable",
          `the auth function ${cfg.authFunction} did not answer: ${err instanceof Error ? err.message : String(err)}`,
        ),
      );
    }
    const parsed = authFunctionOutput.safeParse(answer);
    if (!parsed.success)
      return refuse(failure(503, "auth_unavailable", `the auth function ${cfg.authFunction} answered something that is not a grant`));
    if (parsed.data.allowed === false) return refuse(unauthorized(parsed.data.reason ?? "refused by the auth function"));
    const { allowed: _allowed, ...g } = parsed.data;
    grant = g;
  }
  if (!grant) return refuse(unauthorized(problem));
  if (isReservedSub(grant.sub)) return refuse(unauthorized(`sub '${grant.sub}' is reserved for the open local engine`));
  if (grant.exp !== undefined && grant.exp * 1000 <= Date.now()) return refuse(unauthorized("token expired"));
  if (!mayUseNamespace(grant, cfg.namespace))
    return refuse(failure(403, "forbidden", `'${grant.sub}' may not use namespace '${cfg.namespace}'`));
  if (!mayCall(grant, route.id)) return refuse(failure(403, "forbidden", `'${grant.sub}' may not call ${route.id}`));
  return { ok: true, grant };
}
