// The HTTP side of the harness: the envelope an `http` trigger's function returns
// (protocol/README.md §8.1: `{status_code, headers, body}`), request parsing, and how a downstream
// failure maps onto a status a client can act on.
import { EXPORT_FORMATS, runStartRequest } from "@iii-edge/protocol/harness";
import type { InvocationContext } from "@iii-edge/sdk-edge/client";
import { isRecord, errorCode, formatIssues } from "@iii-edge/protocol";

export interface HttpEnvelope {
  status_code: number;
  headers: Record<string, string>;
  body: unknown;
}

/** What an `http` trigger delivers (§8.1); read leniently: every field may be missing. */
export interface HttpRequest {
  body: unknown;
  headers: Record<string, string>;
  path_params: Record<string, string>;
  query_params: Record<string, string>;
}

const JSON_HEADERS = { "content-type": "application/json" } as const;

export const respond = (status_code: number, body: unknown): HttpEnvelope => ({ status_code, headers: { ...JSON_HEADERS }, body });

/** A typed error body, the engine's own shape for HTTP errors: `{error: {code, message, …}}`. */
export const failure = (status_code: number, code: string, message: string, extra: Record<string, unknown> = {}): HttpEnvelope =>
  respond(status_code, { error: { code, message, ...extra } });

const stringsOf = (v: unknown): Record<string, string> => {
  const out: Record<string, string> = {};
  if (!isRecord(v)) return out;
  for (const [k, s] of Object.entries(v)) if (typeof s === "string") out[k] = s;
  return out;
};

export function httpRequest(payload: unknown): HttpRequest {
  const p = isRecord(payload) ? payload : {};
  return {
    body: p.body ?? null,
    headers: stringsOf(p.headers),
    path_params: stringsOf(p.path_params),
    query_params: stringsOf(p.query_params),
  };
}

/**
 * The request body as a JSON object. The engine parses JSON bodies itself and hands over `null`
 * when the text is not JSON (and the text as a string for `text/*`), so both end up here.
 */
export function jsonObjectBody(req: HttpRequest): { ok: true; value: Record<string, unknown> } | { ok: false; response: HttpEnvelope } {
  let body = req.body;
  if (typeof body === "string") {
    try {
      body = JSON.parse(body) as unknown;
    } catch {
      return { ok: false, response: failure(400, "invalid_json", "the request body is not valid JSON") };
    }
  }
  if (body === null || body === undefined) {
    return {
      ok: false,
      response: failure(400, "invalid_json", "the request body must be a JSON object, sent with content-type: application/json"),
    };
  }
  if (!isRecord(body)) return { ok: false, response: failure(400, "invalid_body", "the request body must be a JSON object") };
  return { ok: true, value: body };
}

/** Which worker registers the functions under each prefix: named in a 503 so an operator knows what to start. */
const OWNER_BY_PREFIX: readonly (readonly [string, string])[] = [
  ["run::", "turn-orchestrator"],
  ["turn::", "turn-orchestrator"],
  ["approval::", "approval-gate"],
  ["session-tree::", "session-storage"],
];

export const ownerOf = (functionId: string): string =>
  OWNER_BY_PREFIX.find(([prefix]) => functionId.startsWith(prefix))?.[1] ?? functionId.split("::")[0]!;

/** Functions that refuse a caller a session that is not theirs with `forbidden` (ownership). */
const SESSION_PREFIXES = ["run::", "turn::", "approval::", "session-tree::"];

/** The `error.code` of an envelope this module made. */
export const codeOfEnvelope = (res: HttpEnvelope): string | undefined => {
  const body = res.body;
  const error = isRecord(body) && isRecord(body.error) ? body.error : undefined;
  return typeof error?.code === "string" ? error.code : undefined;
};

const messageOf = (err: unknown): string =>
  err instanceof Error ? err.message : isRecord(err) && typeof err.message === "string" ? err.message : String(err);

/** Codes that mean "the input was refused": the caller can fix the request. */
const INPUT_CODES = new Set(["invalid_input", "invalid_payload", "invalid_arguments", "deserialization_error", "invalid_argument"]);
/** Codes that mean "nobody is there to answer": the worker that owns the function is not running. */
const ABSENT_CODES = new Set(["function_not_found", "invocation_stopped"]);

/** A failed downstream call as a response: 400 for refused input, 503 naming the missing worker, 504 on a deadline, 502 otherwise. */
export function downstreamFailure(functionId: string, err: unknown): HttpEnvelope {
  const code = errorCode(err);
  const message = messageOf(err);
  // The session is not the caller's (or does not exist: the two read the same to a stranger).
  if (code === "forbidden" && SESSION_PREFIXES.some((p) => functionId.startsWith(p)))
    return failure(404, "session_not_found", "no such session");
  if (code !== undefined && ABSENT_CODES.has(code)) {
    const worker = ownerOf(functionId);
    return failure(503, "worker_unavailable", `${functionId} is not available (${code}): is the ${worker} worker running?`, {
      function_id: functionId,
      worker,
    });
  }
  if (code !== undefined && INPUT_CODES.has(code)) return failure(400, code, message, { function_id: functionId });
  if (code === "timeout") return failure(504, "timeout", `${functionId} did not answer in time: ${message}`, { function_id: functionId });
  return failure(502, code ?? "invocation_failed", `${functionId} failed: ${message}`, { function_id: functionId });
}

// ------------------------------------------------------------------ branches: resume, time travel, fork, tree, export
// Routes over `run::resume|rerun_from|fork` (turn-orchestrator) and `session-tree::tree|export`
// (session-storage). Bodies go on as sent (plus the path's session id): the functions' own schemas
// check them, and a refusal comes back 400. Registered with the rest (index.ts ROUTES).

/** What a route is (index.ts registers each as an `http` trigger). */
export interface HttpRoute {
  id: string;
  method: "GET" | "POST";
  path: string;
  timeoutMs?: number;
  handle(req: HttpRequest, ctx: InvocationContext): Promise<HttpEnvelope>;
}

/**
 * An export is a transcript: text a model, a tool or another person wrote. Served from the
 * engine's origin, it must never run as a page there: no scripts, no fetches, no frames, no forms,
 * nothing loaded from anywhere; inline styles only (the HTML export styles itself inline).
 */
export const EXPORT_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; sandbox";
const EXPORT_HEADERS = { "content-security-policy": EXPORT_CSP, "x-content-type-options": "nosniff" } as const;

/** Branch calls answer at once (a run goes on in the queue) or copy one session: the engine's default deadline. */
export const BRANCH_CALL_TIMEOUT_MS = 30_000;
const EXPORT_FORMAT_NAMES: readonly string[] = EXPORT_FORMATS;

function branchFailure(functionId: string, err: unknown): HttpEnvelope {
  const code = errorCode(err);
  const extra = { function_id: functionId };
  if (code === "not_found") return failure(404, "not_found", messageOf(err), extra);
  if (code === "session_exists" || code === "leaf_conflict") return failure(409, code, messageOf(err), extra);
  if (code === "value_too_large") return failure(413, code, messageOf(err), extra);
  return downstreamFailure(functionId, err);
}

async function branchCall<T>(
  ctx: InvocationContext,
  functionId: string,
  payload: unknown,
): Promise<{ ok: true; value: T } | { ok: false; response: HttpEnvelope }> {
  try {
    return { ok: true, value: await ctx.trigger<unknown, T>({ function_id: functionId, payload, timeoutMs: BRANCH_CALL_TIMEOUT_MS }) };
  } catch (err) {
    return { ok: false, response: branchFailure(functionId, err) };
  }
}

/** A downstream call's outcome as a route answers it: 200 with its value, or the failure it became. */
export const answered = (res: { ok: true; value: unknown } | { ok: false; response: HttpEnvelope }): HttpEnvelope =>
  res.ok ? respond(200, res.value) : res.response;

/** A route on one session (`:session_id` in its path): an id the schema refuses is a 400 before
 * `handle` runs, and `handle` gets the checked id. */
export function sessionRoute(
  route: Omit<HttpRoute, "handle">,
  handle: (sid: string, req: HttpRequest, ctx: InvocationContext) => Promise<HttpEnvelope>,
): HttpRoute {
  return {
    ...route,
    handle(req, ctx) {
      const parsed = runStartRequest.shape.session_id.safeParse(req.path_params.session_id);
      if (!parsed.success)
        return Promise.resolve(failure(400, "invalid_session_id", `session_id: ${formatIssues(parsed.error, { all: true })}`));
      return handle(parsed.data, req, ctx);
    },
  };
}

/** A JSON object body, or none at all (a bare POST) as `{}`. */
function optionalObjectBody(req: HttpRequest): { ok: true; value: Record<string, unknown> } | { ok: false; response: HttpEnvelope } {
  if (req.body === null || req.body === undefined || req.body === "") return { ok: true, value: {} };
  return jsonObjectBody(req);
}

/** A run's answer: started (or a repeat of a started one) 200, busy 409. */
function runAnswer(res: unknown): HttpEnvelope {
  if (!isRecord(res) || typeof res.started !== "boolean")
    return failure(502, "invalid_response", `the run answered ${JSON.stringify(res) ?? "nothing"}, not {session_id, started}`);
  return respond(res.started || res.reason === "already_started" ? 200 : 409, res);
}

/** POST routes whose body (with the path's session id) is the function's request. */
function postRoute(id: string, path: string, functionId: string, answer: (res: unknown) => HttpEnvelope): HttpRoute {
  return sessionRoute({ id, method: "POST", path }, async (sid, req, ctx) => {
    const body = optionalObjectBody(req);
    if (!body.ok) return body.response;
    const res = await branchCall<unknown>(ctx, functionId, { ...body.value, session_id: sid });
    return res.ok ? answer(res.value) : res.response;
  });
}

export const BRANCH_ROUTES: readonly HttpRoute[] = [
  postRoute("harness::http::resume", "api/turns/:session_id/resume", "run::resume", runAnswer),
  postRoute("harness::http::rerun", "api/turns/:session_id/rerun", "run::rerun_from", runAnswer),
  postRoute("harness::http::fork", "api/sessions/:session_id/fork", "run::fork", (res) => respond(200, res)),
  sessionRoute({ id: "harness::http::session_tree", method: "GET", path: "api/sessions/:session_id/tree" }, async (sid, req, ctx) => {
    const from = req.query_params.from_entry_id;
    return answered(
      await branchCall<unknown>(ctx, "session-tree::tree", from ? { session_id: sid, from_entry_id: from } : { session_id: sid }),
    );
  }),
  sessionRoute({ id: "harness::http::session_export", method: "GET", path: "api/sessions/:session_id/export" }, async (sid, req, ctx) => {
    const { format = "markdown", branch_leaf } = req.query_params;
    if (!EXPORT_FORMAT_NAMES.includes(format))
      return failure(400, "invalid_query", `format must be one of ${EXPORT_FORMAT_NAMES.join(", ")}`);
    const res = await branchCall<{ content?: unknown; content_type?: unknown }>(
      ctx,
      "session-tree::export",
      branch_leaf ? { session_id: sid, format, branch_leaf } : { session_id: sid, format },
    );
    if (!res.ok) return res.response;
    const { content, content_type } = res.value ?? {};
    if (typeof content !== "string" || typeof content_type !== "string")
      return failure(502, "invalid_response", "session-tree::export answered no content");
    return { status_code: 200, headers: { "content-type": content_type, ...EXPORT_HEADERS }, body: content };
  }),
];
