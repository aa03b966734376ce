// The receiving side of iii's HTTP-invoked functions (wire-protocol.md §9), for a function that
// lives outside Cloudflare (Node, Deno, Bun, any fetch-style server). Web standard APIs only.
import { toErrorBody, type ErrorBody } from "@iii-edge/protocol";

/** The engine sends no nonce, so the timestamp age is the only replay bound: five minutes is
 * the usual webhook window (clock skew between hosts plus one slow retry). */
export const DEFAULT_MAX_SIGNATURE_AGE_SECONDS = 300;

export type SignatureCheck =
  | { ok: true; body: string; timestamp: number; function_id: string | null; invocation_id: string | null }
  | { ok: false; reason: string };

const encoder = new TextEncoder();

function base64(bytes: Uint8Array): string {
  let bin = "";
  const CHUNK = 0x8000; // String.fromCharCode's argument list must stay small
  for (let i = 0; i < bytes.length; i += CHUNK) bin += String.fromCharCode(...bytes.subarray(i, i + CHUNK));
  return btoa(bin);
}

function hex(buf: ArrayBuffer): string {
  return Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** `sha256=<hex HMAC-SHA256(secret, "<timestamp>:" + base64(body))>` — the §9 signature. */
export async function iiiSignature(secret: string, timestamp: string | number, body: Uint8Array): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = await crypto.subtle.sign("HMAC", key, encoder.encode(`${timestamp}:${base64(body)}`));
  return `sha256=${hex(mac)}`;
}

function timingSafeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * Verify an engine request's `x-iii-Signature` against the raw body and bound the age of its
 * `x-iii-Timestamp`. Consumes the request body and returns it as text.
 */
export async function verifyIIISignature(
  request: Request,
  secret: string,
  options: { maxAgeSeconds?: number; now?: () => number } = {},
): Promise<SignatureCheck> {
  if (!secret) return { ok: false, reason: "no secret configured" };
  const sig = request.headers.get("x-iii-signature");
  const ts = request.headers.get("x-iii-timestamp");
  if (!sig || !ts) return { ok: false, reason: "missing x-iii-Signature or x-iii-Timestamp" };
  if (!/^\d{1,12}$/.test(ts)) return { ok: false, reason: "malformed x-iii-Timestamp" };
  const timestamp = Number(ts);
  const nowS = Math.floor((options.now ?? Date.now)() / 1000);
  const maxAge = options.maxAgeSeconds ?? DEFAULT_MAX_SIGNATURE_AGE_SECONDS;
  if (Math.abs(nowS - timestamp) > maxAge) return { ok: false, reason: `timestamp outside the ${maxAge} s window` };
  const body = new Uint8Array(await request.arrayBuffer());
  const expected = await iiiSignature(secret, ts, body);
  if (!timingSafeEqual(expected, sig.trim().toLowerCase())) return { ok: false, reason: "signature mismatch" };
  return {
    ok: true,
    body: new TextDecoder().decode(body),
    timestamp,
    function_id: request.headers.get("x-iii-function-path"),
    invocation_id: request.headers.get("x-iii-invocation-id"),
  };
}

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
 * kept), a bad signature → 401 `FORBIDDEN`, a non-JSON body → 400 `deserialization_error`.
 */
export function httpFunctionHandler<TInput = unknown, TOutput = unknown>(
  secret: string,
  handler: (data: TInput, info: HttpFunctionRequest) => TOutput | Promise<TOutput>,
  options: { maxAgeSeconds?: number; now?: () => number } = {},
): (request: Request) => Promise<Response> {
  return async (request) => {
    const check = await verifyIIISignature(request, secret, options);
    if (!check.ok) return json(401, { error: { code: "FORBIDDEN", message: `invalid signature: ${check.reason}` } satisfies ErrorBody });
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
