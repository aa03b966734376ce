// The credentials worker's contracts (docs/harness-contracts.md §1.5, §6.4): `auth::*`. The key
// derivation and the proofs themselves are the worker kit's (`@iii-edge/sdk-edge/worker`): the
// credentials worker and the providers both need them.
import { z } from "zod";
import { providerName } from "./providers.ts";
import type { StateKey } from "./state.ts";

export type Credential =
  | { type: "api_key"; key: string; base_url?: string }
  | { type: "oauth"; access_token: string; refresh_token?: string; expires_at?: number; scopes?: string[]; provider_extra?: unknown };

// `auth::get_token` hands out secrets, so only a provider may call it: the request carries a proof
// `{ts, sig}` — `sig` = base64url(HMAC-SHA256(proofKey, "auth::get_token\n<provider>\n<ts>")) — made
// with a key both workers derive from the same CREDENTIALS_KEY (or AUTH_SECRET when only that is
// set). A browser or an agent never holds that key, so it cannot ask for a token. Web Crypto only.

/** Engine state scope of the encrypted credentials (key = provider name). */
export const AUTH_CREDENTIALS_SCOPE = "auth_credentials";
/** The credentials worker's state: one sealed credential per provider. */
export const authCredentialsState = {
  credential: (provider: string): StateKey => ({ scope: AUTH_CREDENTIALS_SCOPE, key: provider }),
};
/** How far a proof's `ts` may be from the verifier's clock: covers clock skew between a provider
 * process and the credentials worker plus a slow engine hop, and bounds how long a captured proof
 * can be replayed. */
export const AUTH_PROOF_MAX_SKEW_MS = 60_000;
/** Shorter keys could be guessed offline from a copied state row. */
export const MIN_CREDENTIALS_KEY_LENGTH = 16;

/** What a caller sends to prove it is a provider. `ts` is Unix milliseconds. */
export const authProof = z.object({ ts: z.number().int(), sig: z.string().min(1).max(128) });
export type AuthProof = z.infer<typeof authProof>;

/** `auth::get_token`: `proof` is optional in the schema so that a missing one answers `forbidden`
 * (what it is) rather than `invalid_input`. */
export const authGetTokenRequest = z.object({ provider: providerName, proof: authProof.optional() });
/** Bound on a stored secret: real keys and OAuth tokens are well under 4 KiB. */
export const MAX_CREDENTIAL_SECRET_LENGTH = 8_192;
const secretText = z.string().min(1, "must not be empty").max(MAX_CREDENTIAL_SECRET_LENGTH);
export const credentialSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("api_key"), key: secretText, base_url: z.url().max(2_048).optional() }),
  z.object({
    type: z.literal("oauth"),
    access_token: secretText,
    refresh_token: secretText.optional(),
    expires_at: z.number().int().nonnegative().optional(),
    scopes: z.array(z.string().max(256)).max(64).optional(),
    provider_extra: z.unknown().optional(),
  }),
]);
/** `auth::set_token {provider, ...Credential}`. */
export const authSetTokenRequest = z.intersection(z.object({ provider: providerName }), credentialSchema);
export const authProviderRequest = z.object({ provider: providerName });
export const CREDENTIAL_SOURCES = ["stored", "environment"] as const;
export type CredentialSource = (typeof CREDENTIAL_SOURCES)[number];
/** `auth::status`'s answer. */
export const authStatusSchema = z.object({
  configured: z.boolean(),
  source: z.enum(CREDENTIAL_SOURCES).optional(),
  /** `api-key:<first 6>…` or `oauth` — never the secret. */
  label: z.string().optional(),
  /** Why a stored credential is unusable (e.g. it was encrypted under another CREDENTIALS_KEY). */
  problem: z.string().optional(),
});
export type AuthStatus = z.infer<typeof authStatusSchema>;
/** `auth::get_token`: the credential, or null when the provider has none. */
export const authGetTokenResponse = credentialSchema.nullable();
export const authSetTokenResponse = z.object({ ok: z.literal(true) });
/** `deleted`: a stored credential was there. */
export const authDeleteTokenResponse = z.object({ ok: z.literal(true), deleted: z.boolean() });
export const authListProvidersResponse = z.object({ providers: z.array(z.string()) });

/** The key material both workers derive their keys from. `source` is part of every derivation
 * label, so AUTH_SECRET never yields the keys a CREDENTIALS_KEY of the same text would. */
export interface CredentialsKeyMaterial {
  secret: string;
  source: "CREDENTIALS_KEY" | "AUTH_SECRET";
}
export type CredentialsKeyResult = { ok: true; material: CredentialsKeyMaterial } | { ok: false; reason: string };

export const CREDENTIALS_KEY_HELP =
  "set CREDENTIALS_KEY (a random string of at least 16 characters, e.g. `openssl rand -base64 32`) in the environment of `npm start`, " +
  "or as a Worker secret (`wrangler secret put CREDENTIALS_KEY`), for both the auth-credentials and the providers workers";

/** A Web Crypto key, named through `crypto.subtle` so the type resolves under the DOM lib (workerd)
 * and under @types/node alike. */
export type CredentialsCryptoKey = Awaited<ReturnType<typeof crypto.subtle.deriveKey>>;

/** The exact text a proof signs. */
export function authProofMessage(provider: string, ts: number): string {
  return `auth::get_token\n${provider}\n${ts}`;
}

export type AuthProofCheck = { ok: true } | { ok: false; reason: "missing" | "expired" | "bad_signature" };
