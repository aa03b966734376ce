// The HTTP side of the harness: the envelope an `http` trigger's function returns
// (protocol/README.md §8.1: `{status_code, headers, body}`), request parsing, and how a downstream
// failure maps onto a status a client can act on.

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

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

const stringsOf = (v: unknown): Record<string, string> => {
  const out: Record<string, string> = {};
  if (!isRecord(v)) return out;
  for (const [k, s] of Object.entries(v)) if (typeof s === "string") out[k] = s;
  return out;
};

export function httpRequest(payload: unknown): HttpRequest {
  const p = isRecord(payload) ? payload : {};
  return { body: p.body ?? null, headers: stringsOf(p.headers), path_params: stringsOf(p.path_params), query_params: stringsOf(p.query_params) };
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
    return { ok: false, response: failure(400, "invalid_json", "the request body must be a JSON object, sent with content-type: application/json") };
  }
  if (!isRecord(body)) return { ok: false, response: failure(400, "invalid_body", "the request body must be a JSON object") };
  return { ok: true, value: body };
}

/** Which worker registers the functions under each prefix: named in a 503 so an operator knows what to start. */
const OWNER_BY_PREFIX: readonly (readonly [string, string])[] = [
  ["run::", "turn-orchestrator"],
  ["turn::", "turn-orchestrator"],
  ["approval::", "approval-gate"],
];

export const ownerOf = (functionId: string): string => OWNER_BY_PREFIX.find(([prefix]) => functionId.startsWith(prefix))?.[1] ?? functionId.split("::")[0]!;

const codeOf = (err: unknown): string | undefined => (isRecord(err) && typeof err.code === "string" ? err.code : undefined);
const messageOf = (err: unknown): string => (err instanceof Error ? err.message : isRecord(err) && typeof err.message === "string" ? err.message : String(err));

/** Codes that mean "the input was refused": the caller can fix the request. */
const INPUT_CODES = new Set(["invalid_input", "invalid_payload", "invalid_arguments", "deserialization_error", "invalid_argument"]);
/** Codes that mean "nobody is there to answer": the worker that owns the function is not running. */
const ABSENT_CODES = new Set(["function_not_found", "invocation_stopped"]);

/** A failed downstream call as a response: 400 for refused input, 503 naming the missing worker, 504 on a deadline, 502 otherwise. */
export function downstreamFailure(functionId: string, err: unknown): HttpEnvelope {
  const code = codeOf(err);
  const message = messageOf(err);
  if (code !== undefined && ABSENT_CODES.has(code)) {
    const worker = ownerOf(functionId);
    return failure(503, "worker_unavailable", `${functionId} is not available (${code}): is the ${worker} worker running?`, { function_id: functionId, worker });
  }
  if (code !== undefined && INPUT_CODES.has(code)) return failure(400, code, message, { function_id: functionId });
  if (code === "timeout") return failure(504, "timeout", `${functionId} did not answer in time: ${message}`, { function_id: functionId });
  return failure(502, code ?? "invocation_failed", `${functionId} failed: ${message}`, { function_id: functionId });
}
