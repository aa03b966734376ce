// The receiving side of iii's HTTP-invoked functions (protocol/README.md §9), for a function that
// lives outside Cloudflare (Node, Deno, Bun, any fetch-style server). Web standard APIs only; the
// signature and its check are protocol's (`@iii-edge/protocol`, signature.ts).
import { toErrorBody, verifyIIISignature, type ErrorBody } from "@iii-edge/protocol";

export { DEFAULT_MAX_SIGNATURE_AGE_SECONDS, iiiSignature, verifyIIISignature, type SignatureCheck } from "@iii-edge/protocol";

export interface HttpFunctionRequest {
  function_id: string | null;
  invocation_id: string | null;
  request: Request;
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

/**
 * A fetch handler for one HTTP-invoked function: verifies the signature, parses the JSON body,
 * runs `handler`, and answers the way the engine maps responses (§9): a value → 200 JSON,
 * `undefined` → 204, a throw → 500 `{error:{code,message}}` (a thrown error's string `.code` is
 * kept), a bad signature → 401 `forbidden`, a non-JSON body → 400 `deserialization_error`.
 */
export function httpFunctionHandler<TInput = unknown, TOutput = unknown>(
  secret: string,
  handler: (data: TInput, info: HttpFunctionRequest) => TOutput | Promise<TOutput>,
  options: { maxAgeSeconds?: number; now?: () => number } = {},
): (request: Request) => Promise<Response> {
  return async (request) => {
    const check = await verifyIIISignature(request, secret, options);
    if (!check.ok) return json(401, { error: { code: "forbidden", message: `invalid signature: ${check.reason}` } satisfies ErrorBody });
    let data: unknown = null;
    if (check.body.trim() !== "") {
      try {
        data = JSON.parse(check.body);
      } catch {
        return json(400, { error: { code: "deserialization_error", message: "body is not JSON" } });
      }
    }
    try {
      const result = await handler(data as TInput, { function_id: check.function_id, invocation_id: check.invocation_id, request });
      if (result === undefined) return new Response(null, { status: 204 });
      return json(200, result);
    } catch (err) {
      const { code, message } = toErrorBody(err);
      return json(500, { error: { code, message } });
    }
  };
}
