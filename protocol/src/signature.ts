// The signature of an HTTP-invoked function's request (protocol/README.md §9): the engine signs
// (engine-do/src/core/http-invoke.ts), a receiver verifies (sdk-edge/src/http-receiver.ts).
// `x-iii-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>:" + base64(body))>`, with the
// Unix-seconds `x-iii-Timestamp` it covers. Web standard crypto.subtle only.

/** The request headers of §9 (HTTP header names are case-insensitive; this is how the engine sends them). */
export const HTTP_INVOKE_HEADERS = {
  functionPath: "x-iii-Function-Path",
  invocationId: "x-iii-Invocation-ID",
  timestamp: "x-iii-Timestamp",
  signature: "x-iii-Signature",
} as const;

const encoder = new TextEncoder();

/** Standard base64 of bytes, for bodies of any size. */
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

/** Compare without an early exit, so the time taken does not tell how much of a signature matched. */
function timingSafeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** The engine sends no nonce, so the timestamp age is the only replay bound: five minutes is
 * the usual webhook window (clock skew between hosts plus one slow retry). */
export const DEFAULT_MAX_SIGNATURE_AGE_SECONDS = 300;

export type SignatureCheck =
  | { ok: true; body: string; timestamp: number; function_id: string | null; invocation_id: string | null }
  | { ok: false; reason: string };

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
  const sig = request.headers.get(HTTP_INVOKE_HEADERS.signature);
  const ts = request.headers.get(HTTP_INVOKE_HEADERS.timestamp);
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
    function_id: request.headers.get(HTTP_INVOKE_HEADERS.functionPath),
    invocation_id: request.headers.get(HTTP_INVOKE_HEADERS.invocationId),
  };
}
