// Credential proofs for the worker kit (docs/harness-contracts.md §6.4): the keys the credentials
// worker and the providers derive from one CREDENTIALS_KEY, and the `{ts, sig}` proof a provider
// sends with `auth::get_token`. Two workers need the same derivation, so it lives here once; the
// proof's wire shape and the text it signs are protocol's (`@iii-edge/protocol/harness`). Web
// Crypto only, so it runs in workerd and Node alike.
import {
  AUTH_PROOF_MAX_SKEW_MS,
  type AuthProof,
  type AuthProofCheck,
  authProofMessage,
  CREDENTIALS_KEY_HELP,
  type CredentialsCryptoKey,
  type CredentialsKeyMaterial,
  type CredentialsKeyResult,
  MIN_CREDENTIALS_KEY_LENGTH,
} from "@iii-edge/protocol/harness";

/** CREDENTIALS_KEY, else AUTH_SECRET, else a reason saying how to configure one. */
export function credentialsKeyMaterial(env: Readonly<Record<string, unknown>>): CredentialsKeyResult {
  for (const source of ["CREDENTIALS_KEY", "AUTH_SECRET"] as const) {
    const v = env[source];
    if (typeof v !== "string" || v.trim() === "") continue;
    if (v.length < MIN_CREDENTIALS_KEY_LENGTH)
      return { ok: false, reason: `${source} is shorter than ${MIN_CREDENTIALS_KEY_LENGTH} characters; ${CREDENTIALS_KEY_HELP}` };
    return { ok: true, material: { secret: v, source } };
  }
  return { ok: false, reason: `no CREDENTIALS_KEY is configured; ${CREDENTIALS_KEY_HELP}` };
}

const utf8 = new TextEncoder();
/** Fixed HKDF salt: the key material is already secret; the salt only separates this use of it. */
const CREDENTIALS_HKDF_SALT = "iii-edge/auth-credentials/v1";

/** HKDF-SHA-256 from the material: `proof` → an HMAC-SHA-256 key, `encrypt` → an AES-256-GCM key. */
export async function deriveCredentialsKey(material: CredentialsKeyMaterial, purpose: "proof" | "encrypt"): Promise<CredentialsCryptoKey> {
  const base = await crypto.subtle.importKey("raw", utf8.encode(material.secret), "HKDF", false, ["deriveKey"]);
  const info = utf8.encode(`${purpose} (from ${material.source})`);
  const params = { name: "HKDF", hash: "SHA-256", salt: utf8.encode(CREDENTIALS_HKDF_SALT), info };
  return purpose === "proof"
    ? crypto.subtle.deriveKey(params, base, { name: "HMAC", hash: "SHA-256", length: 256 }, false, ["sign", "verify"])
    : crypto.subtle.deriveKey(params, base, { name: "AES-GCM", length: 256 }, false, ["encrypt", "decrypt"]);
}

export function base64url(bytes: Uint8Array): string {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
/** Bytes of a base64url (or base64) text; undefined when it is not one. */
export function fromBase64url(text: string): Uint8Array<ArrayBuffer> | undefined {
  const body = text.replace(/=+$/, "");
  if (!/^[A-Za-z0-9_\-+/]*$/.test(body) || body.length % 4 === 1) return undefined;
  const bin = atob(
    body
      .replace(/-/g, "+")
      .replace(/_/g, "/")
      .padEnd(Math.ceil(body.length / 4) * 4, "="),
  );
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** A proof for `auth::get_token {provider}` made now (or at `now`). `key` from deriveCredentialsKey(…, "proof"). */
export async function signAuthProof(key: CredentialsCryptoKey, provider: string, now: number = Date.now()): Promise<AuthProof> {
  const ts = Math.trunc(now);
  const mac = await crypto.subtle.sign("HMAC", key, utf8.encode(authProofMessage(provider, ts)));
  return { ts, sig: base64url(new Uint8Array(mac)) };
}

/** Checks the signature (constant time, by crypto.subtle.verify) and the clock window. */
export async function verifyAuthProof(
  key: CredentialsCryptoKey,
  provider: string,
  proof: AuthProof | undefined,
  now: number = Date.now(),
): Promise<AuthProofCheck> {
  if (!proof) return { ok: false, reason: "missing" };
  const sig = fromBase64url(proof.sig);
  if (!sig) return { ok: false, reason: "bad_signature" };
  const valid = await crypto.subtle.verify("HMAC", key, sig, utf8.encode(authProofMessage(provider, proof.ts)));
  if (!valid) return { ok: false, reason: "bad_signature" };
  if (Math.abs(now - proof.ts) > AUTH_PROOF_MAX_SKEW_MS) return { ok: false, reason: "expired" };
  return { ok: true };
}
