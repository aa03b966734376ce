// Credentials at rest: AES-256-GCM under a key HKDF-derived from CREDENTIALS_KEY (or AUTH_SECRET),
// a fresh random 96-bit IV per write, and the provider name as additional data, so a row copied to
// another provider's key fails to open. Web Crypto only (workerd and Node alike).
import { credentialSchema, type Credential, type CredentialsCryptoKey } from "@iii-edge/protocol/harness";
import { base64url, fromBase64url } from "@iii-edge/sdk-edge/worker";

/** What one state row holds: no plaintext beyond the provider name and the format version. */
export interface SealedCredential {
  v: 1;
  provider: string;
  alg: "A256GCM";
  iv: string;
  ct: string;
  updated_at: number;
}

/** AES-GCM's standard nonce size; random per write (at most a few writes per provider, so the
 * birthday bound of 2^48 writes is never near). */
const IV_BYTES = 12;
const utf8 = new TextEncoder();

export async function seal(key: CredentialsCryptoKey, provider: string, credential: Credential, now: number): Promise<SealedCredential> {
  const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
  const ct = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: utf8.encode(provider) },
    key,
    utf8.encode(JSON.stringify(credential)),
  );
  return { v: 1, provider, alg: "A256GCM", iv: base64url(iv), ct: base64url(new Uint8Array(ct)), updated_at: now };
}

export function isSealed(value: unknown): value is SealedCredential {
  if (!value || typeof value !== "object") return false;
  const r = value as Record<string, unknown>;
  return r.v === 1 && r.alg === "A256GCM" && typeof r.provider === "string" && typeof r.iv === "string" && typeof r.ct === "string";
}

/** The credential, or undefined when the row does not open under this key (another key, another
 * provider's row, or tampering — GCM's tag tells them apart from nothing, which is the point). */
export async function open(key: CredentialsCryptoKey, provider: string, row: SealedCredential): Promise<Credential | undefined> {
  const iv = fromBase64url(row.iv);
  const ct = fromBase64url(row.ct);
  if (!iv || !ct || iv.length !== IV_BYTES) return undefined;
  try {
    const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv, additionalData: utf8.encode(provider) }, key, ct);
    const parsed = credentialSchema.safeParse(JSON.parse(new TextDecoder().decode(plain)));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
