// The harness worker (docs/harness-contracts.md §1.1): the single ingress for turns — `harness::trigger`,
// hard-wired to `run::start`, seeding the turn's trace baggage — the HTTP API a browser or CLI
// drives a turn with, and the session-created fan-out onto the `agent::sessions` stream. It takes
// no part in the turn loop. Web APIs only: the same module runs inside the Worker and as a Node
// process.
import {
  AGENT_SESSIONS_GROUP,
  AGENT_SESSIONS_STREAM,
  agentMessageSchema,
  approvalResolveRequest,
  harnessTriggerRequest,
  runStartRequest,
  type RunStartResponse,
  type SessionsChanged,
  type TurnStateView,
  runOptionsField,
} from "@iii-edge/protocol/harness";
import {
  CALLER_PRINCIPAL_KEY,
  IIIError,
  principalOf,
  seesAllSessions,
  type CallerPrincipal,
  isRecord,
  formatIssues,
  type SchemaIssues,
} from "@iii-edge/protocol";
import type { InvocationContext } from "@iii-edge/sdk-edge/client";
import type { WorkerModule, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { mergeBaggage } from "./baggage.ts";
import { CASSETTE_ROUTES } from "./cassette-routes.ts";
import { authorize, guardConfigFrom, type GuardConfig } from "./guard.ts";
import {
  answered,
  BRANCH_ROUTES,
  codeOfEnvelope,
  downstreamFailure,
  failure,
  httpRequest,
  jsonObjectBody,
  respond,
  sessionRoute,
} from "./http.ts";
import type { HttpEnvelope, HttpRoute } from "./http.ts";

export { baggageValue, mergeBaggage, parseBaggage } from "./baggage.ts";
export type { HttpEnvelope } from "./http.ts";

/** The only function `harness::trigger` ever starts: clients cannot pick another. */
export const RUN_START = "run::start";
/** Baggage keys seeded on the nested call (docs/harness-contracts.md §1.1). */
export const BAGGAGE_SESSION_ID = "iii.session.id";
export const BAGGAGE_MESSAGE_ID = "iii.message.id";
/** Scope the orchestrator writes once per new session (docs/harness-contracts.md §7 item 4). */
export const SESSION_INDEX_SCOPE = "session_index";

/** The bridge timeout for `harness::trigger` → `run::start`: generous, since run::start itself
 * answers at once and only a stuck engine would take this long. */
export const RUN_START_TIMEOUT_MS = 600_000;
/** The `POST /api/turns` route outlives the bridge timeout, so a slow start is answered, not cut. */
export const TURN_ROUTE_TIMEOUT_MS = RUN_START_TIMEOUT_MS + 10_000;
/** Reads and small writes (state, events, steer, stop, approvals): the engine's default deadline. */
export const QUERY_TIMEOUT_MS = 30_000;
/** Outer ids become baggage values; past this they are refused rather than bloat every nested call. */
export const MAX_TRACE_ID_CHARS = 256;
/** `?limit=` on the events route: the engine's own listing page maximum. */
export const MAX_EVENTS_LIMIT = 1000;
/** A steering message given as plain text (same bound as a run's system prompt). */
export const MAX_STEER_TEXT_CHARS = 200_000;

type Ctx = InvocationContext;

/** run::start's request with its `options` (fallback models): checked here too, so a bad entry is a 400 before anything starts. */
const runStartWithOptions = runStartRequest.extend(runOptionsField);
const issues = (error: SchemaIssues) => formatIssues(error, { all: true });

/**
 * The handler's context acting for `principal`: every object payload it sends names the principal
 * (`_caller_principal`), so the functions behind the route check the route's caller against a
 * session's owner, not the harness. The harness is trusted code of this deployment, so the engine
 * lets the principal it names stand.
 */
export function actingFor(ctx: Ctx, principal: CallerPrincipal | undefined): Ctx {
  if (!principal) return ctx;
  return {
    ...ctx,
    trigger: <I, O>(request: Parameters<Ctx["trigger"]>[0]) => {
      const p = request.payload;
      const payload =
        p !== null && typeof p === "object" && !Array.isArray(p)
          ? { ...(p as Record<string, unknown>), [CALLER_PRINCIPAL_KEY]: principal }
          : p;
      return ctx.trigger<I, O>({ ...request, payload } as Parameters<Ctx["trigger"]>[0] & { payload: I });
    },
  };
}

/** A refusal because the session is not the caller's: answered as for a session that does not
 * exist, so a stranger learns nothing about it. */
export const notYours = (sid: string): HttpEnvelope => failure(404, "session_not_found", `no turn has run in session ${sid}`);

/** A downstream call continuing the handler's trace; `baggage` replaces the inherited one when given. */
async function call<T>(
  ctx: Ctx,
  functionId: string,
  payload: unknown,
  timeoutMs: number,
  baggage?: string,
): Promise<{ ok: true; value: T } | { ok: false; response: HttpEnvelope }> {
  try {
    const request =
      baggage === undefined
        ? { function_id: functionId, payload, timeoutMs }
        : { function_id: functionId, payload, timeoutMs, traceparent: ctx.traceparent, baggage };
    return { ok: true, value: await ctx.trigger<unknown, T>(request) };
  } catch (err) {
    return { ok: false, response: downstreamFailure(functionId, err) };
  }
}

/**
 * `harness::trigger`: validate, seed the baggage, start the turn. `extraBaggage` is the HTTP
 * request's own `baggage` header when the call came in over `POST /api/turns`.
 */
export async function triggerTurn(request: unknown, ctx: Ctx, extraBaggage?: string): Promise<HttpEnvelope> {
  const outer = harnessTriggerRequest.safeParse(request);
  if (!outer.success) return failure(400, "invalid_request", `harness::trigger request: ${issues(outer.error)}`);
  const payload = runStartWithOptions.safeParse(outer.data.payload);
  if (!payload.success) return failure(400, "invalid_payload", `run::start payload: ${issues(payload.error)}`);
  const sessionId = outer.data.session_id ?? payload.data.session_id;
  const messageId = outer.data.message_id ?? payload.data.message_id;
  for (const [name, v] of [
    ["session_id", sessionId],
    ["message_id", messageId],
  ] as const) {
    if (v !== undefined && v.length > MAX_TRACE_ID_CHARS)
      return failure(400, "invalid_request", `${name} is longer than ${MAX_TRACE_ID_CHARS} characters`);
  }
  const baggage = mergeBaggage([extraBaggage, ctx.baggage], { [BAGGAGE_SESSION_ID]: sessionId, [BAGGAGE_MESSAGE_ID]: messageId });
  // The payload goes on exactly as the client sent it; the parse above only gatekeeps.
  const started = await call<RunStartResponse>(ctx, RUN_START, outer.data.payload, RUN_START_TIMEOUT_MS, baggage);
  if (!started.ok) {
    // The session id is another principal's: starting in it is refused (the only answer that
    // tells an id is taken, and the caller chose the id).
    if (started.response.status_code === 404 && codeOfEnvelope(started.response) === "session_not_found")
      return failure(403, "forbidden", `session ${sessionId ?? ""} belongs to another principal: start the turn in a session of your own`);
    return started.response;
  }
  const res = started.value;
  if (!isRecord(res) || typeof res.started !== "boolean")
    return failure(502, "invalid_response", `${RUN_START} answered ${JSON.stringify(res) ?? "nothing"}, not {session_id, started}`);
  return respond(res.started ? 200 : 409, res);
}

// ------------------------------------------------------------------ HTTP routes

/** `run::steer`'s message: plain text becomes a user message; an object must be an AgentMessage. */
function steeringMessage(value: unknown): { ok: true; value: unknown } | { ok: false; response: HttpEnvelope } {
  if (typeof value === "string") {
    if (value.length === 0 || value.length > MAX_STEER_TEXT_CHARS)
      return { ok: false, response: failure(400, "invalid_body", `message must be 1–${MAX_STEER_TEXT_CHARS} characters`) };
    return { ok: true, value: { role: "user", content: [{ type: "text", text: value }], timestamp: Date.now() } };
  }
  const parsed = agentMessageSchema.safeParse(value);
  if (!parsed.success)
    return { ok: false, response: failure(400, "invalid_body", `message must be text or an agent message: ${issues(parsed.error)}`) };
  return { ok: true, value };
}

/** Each route's function is what its `http` trigger calls (internal: hidden from listings and the model's catalog). */
export const ROUTES: readonly HttpRoute[] = [
  {
    id: "harness::http::start_turn",
    method: "POST",
    path: "api/turns",
    timeoutMs: TURN_ROUTE_TIMEOUT_MS,
    async handle(req, ctx) {
      const body = jsonObjectBody(req);
      if (!body.ok) return body.response;
      return triggerTurn(body.value, ctx, req.headers.baggage);
    },
  },
  sessionRoute({ id: "harness::http::turn_state", method: "GET", path: "api/turns/:session_id" }, async (sid, _req, ctx) => {
    const view = await call<TurnStateView | null>(ctx, "turn::get_state", { session_id: sid }, QUERY_TIMEOUT_MS);
    if (!view.ok) return view.response;
    return view.value === null || view.value === undefined ? notYours(sid) : respond(200, view.value);
  }),
  sessionRoute({ id: "harness::http::turn_events", method: "GET", path: "api/turns/:session_id/events" }, async (sid, req, ctx) => {
    const payload: { session_id: string; after?: string; limit?: number } = { session_id: sid };
    const { after, limit } = req.query_params;
    if (after !== undefined && after !== "") payload.after = after;
    if (limit !== undefined && limit !== "") {
      const n = Number(limit);
      if (!Number.isInteger(n) || n < 1 || n > MAX_EVENTS_LIMIT)
        return failure(400, "invalid_query", `limit must be an integer from 1 to ${MAX_EVENTS_LIMIT}`);
      payload.limit = n;
    }
    return answered(await call<unknown>(ctx, "run::events", payload, QUERY_TIMEOUT_MS));
  }),
  sessionRoute({ id: "harness::http::steer", method: "POST", path: "api/turns/:session_id/steer" }, async (sid, req, ctx) => {
    const body = jsonObjectBody(req);
    if (!body.ok) return body.response;
    const message = steeringMessage(body.value.message);
    if (!message.ok) return message.response;
    return answered(await call<unknown>(ctx, "run::steer", { session_id: sid, message: message.value }, QUERY_TIMEOUT_MS));
  }),
  sessionRoute({ id: "harness::http::stop", method: "POST", path: "api/turns/:session_id/stop" }, async (sid, _req, ctx) =>
    answered(await call<unknown>(ctx, "turn::stop", { session_id: sid }, QUERY_TIMEOUT_MS)),
  ),
  {
    id: "harness::http::resolve_approval",
    method: "POST",
    path: "api/approvals",
    async handle(req, ctx) {
      const body = jsonObjectBody(req);
      if (!body.ok) return body.response;
      const parsed = approvalResolveRequest.safeParse(body.value);
      if (!parsed.success) return failure(400, "invalid_body", `approval: ${issues(parsed.error)}`);
      const res = await call<{ ok: boolean; error?: string }>(ctx, "approval::resolve", parsed.data, QUERY_TIMEOUT_MS);
      if (!res.ok) return res.response;
      const answer = res.value;
      if (isRecord(answer) && answer.ok === false) {
        const code = typeof answer.error === "string" ? answer.error : "approval_refused";
        return failure(code === "invalid_payload" ? 400 : 409, code, `approval::resolve refused the decision: ${code}`);
      }
      return respond(200, answer);
    },
  },
  // Resume, time travel, fork, tree, export (http.ts).
  ...BRANCH_ROUTES,
  // A turn as a cassette, and its replay (cassette-routes.ts).
  ...CASSETTE_ROUTES,
];

// ------------------------------------------------------------------ session-created fan-out

/** `state` trigger payload on `session_index` (protocol/README.md §8.3). */
async function sessionsChanged(event: unknown, ctx: Ctx): Promise<{ added: string[] }> {
  if (!isRecord(event) || event.event_type !== "state:created" || typeof event.key !== "string" || event.key === "") return { added: [] };
  const sid = event.key;
  const data: SessionsChanged = { added: [sid] };
  // Item id = session id: a console joining the group gets every session in its `sync`.
  await ctx.trigger({
    function_id: "stream::set",
    payload: { stream_name: AGENT_SESSIONS_STREAM, group_id: AGENT_SESSIONS_GROUP, item_id: sid, data },
    timeoutMs: QUERY_TIMEOUT_MS,
  });
  return data;
}

/** What the harness reads from its environment: how its HTTP routes check callers (guard.ts). */
export interface HarnessConfig {
  guard?: GuardConfig;
}

export const worker: WorkerModule<HarnessConfig> = {
  name: "harness",
  kernel: true,
  configFrom: (env) => ({ guard: guardConfigFrom(env) }),
  register(iii: WorkerSurface, config: HarnessConfig = {}) {
    const guard: GuardConfig = config.guard ?? { namespace: "default" };
    // Told who calls, so the run it starts is the caller's (and another's session is refused).
    iii.registerFunction("harness::trigger", (data: unknown, ctx) => triggerTurn(data, actingFor(ctx, ctx.caller)), {
      description:
        "Start a turn: {session_id?, message_id?, payload: <run::start request>} → {status_code: 200|409|400, headers, body}. The target is always run::start; session_id and message_id become the turn's trace baggage.",
      metadata: { caller_principal: true },
    });
    for (const route of ROUTES) {
      iii.registerFunction(
        route.id,
        async (data: unknown, ctx) => {
          const req = httpRequest(data);
          const who = await authorize(req, route, guard, ctx);
          return who.ok ? route.handle(req, actingFor(ctx, principalOf(who.grant))) : who.response;
        },
        {
          description: `${route.method} /${route.path}`,
          metadata: { internal: true },
        },
      );
      const config: Record<string, unknown> = { api_path: route.path, http_method: route.method };
      if (route.timeoutMs !== undefined) config.timeout_ms = route.timeoutMs;
      iii.registerTrigger({ type: "http", function_id: route.id, config });
    }
    // The state trigger fires it as trusted code; a caller with a grant that does not see every
    // session could only add made-up ids to everyone's list, so it is refused.
    iii.registerFunction(
      "harness::sessions::changed",
      (event: unknown, ctx) => {
        if (ctx.caller && !seesAllSessions(ctx.caller)) throw new IIIError("forbidden", `'${ctx.caller.sub}' may not announce sessions`);
        return sessionsChanged(event, ctx);
      },
      {
        description: `On a new ${SESSION_INDEX_SCOPE} entry, adds {added:[session_id]} to stream ${AGENT_SESSIONS_STREAM} (group ${AGENT_SESSIONS_GROUP}).`,
        metadata: { internal: true, caller_principal: true },
      },
    );
    iii.registerTrigger({ type: "state", function_id: "harness::sessions::changed", config: { scope: SESSION_INDEX_SCOPE } });
  },
};
export default worker;
