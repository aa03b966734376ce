// Signed tokens (JWT, HS256 over AUTH_SECRET) carrying a Grant. Used by the engine's front door to
// verify, and by `npm run token` and tests to mint. Kept apart from the frame schemas so a browser
// bundle that only speaks frames never pulls in the JWT library.
import { SignJWT, jwtVerify, errors } from "jose";
import { grantSchema, isReservedSub, TOKEN_ALGORITHM, TOKEN_ISSUER, type Grant } from "./auth.ts";

/** Shortest AUTH_SECRET accepted: 32 bytes is what HS256 needs for its full strength. */
export const MIN_SECRET_BYTES = 32;
/** Longest lifetime `mintToken` gives when asked for none: a day. */
export const DEFAULT_TOKEN_TTL_S = 24 * 60 * 60;
/** How far a token's `iat` may lie in the future: the clocks of the minting host and the engine
 * may differ by this much (NTP keeps them within far less). A token issued later than that was
 * minted to outlive its apparent age. */
export const MAX_CLOCK_SKEW_S = 60;

const keyOf = (secret: string) => new TextEncoder().encode(secret);

export async function mintToken(secret: string, grant: Omit<Grant, "exp">, ttlSeconds: number = DEFAULT_TOKEN_TTL_S): Promise<string> {
  const { sub, ...claims } = grantSchema.omit({ exp: true }).parse(grant);
  if (isReservedSub(sub)) throw new Error(`sub '${sub}' is reserved for the open local engine`);
  return new SignJWT(claims)
    .setProtectedHeader({ alg: TOKEN_ALGORITHM, typ: "JWT" })
    .setSubject(sub)
    .setIssuer(TOKEN_ISSUER)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + Math.max(1, Math.floor(ttlSeconds)))
    .sign(keyOf(secret));
}

export type TokenCheck = { ok: true; grant: Grant } | { ok: false; reason: string };

/** Verify signature, issuer, expiry and issue time, then read the grant. Never throws. */
export async function verifyToken(secret: string, token: string): Promise<TokenCheck> {
  if (token.length > 8192) return { ok: false, reason: "token too long" };
  try {
    const { payload } = await jwtVerify(token, keyOf(secret), {
      algorithms: [TOKEN_ALGORITHM],
      issuer: TOKEN_ISSUER,
      requiredClaims: ["sub", "exp"],
    });
    if (payload.iat !== undefined && payload.iat > Math.floor(Date.now() / 1000) + MAX_CLOCK_SKEW_S)
      return { ok: false, reason: "token issued in the future" };
    // Every grant claim, whatever fields the grant has: the schema drops the JWT's own (iss, iat…).
    const g = grantSchema.safeParse(payload);
    if (!g.success) return { ok: false, reason: "token claims are malformed" };
    if (isReservedSub(g.data.sub)) return { ok: false, reason: `sub '${g.data.sub}' is reserved for the open local engine` };
    return { ok: true, grant: g.data };
  } catch (e) {
    if (e instanceof errors.JWTExpired) return { ok: false, reason: "token expired" };
    return { ok: false, reason: "token signature or claims invalid" };
  }
}
