// The auth-credentials worker (docs/harness-contracts.md §1.5, §6.4): one place that holds provider
// credentials. `auth::get_token` resolves stored → environment → null and answers only a caller
// that proves it holds the credentials key (the providers); stored credentials are AES-GCM sealed
// in engine state. No secret is ever logged, put in an error message, or returned by anything but
// get_token.
import { IIIError, responseFormat } from "@iii-edge/protocol";
import {
  AUTH_CREDENTIALS_SCOPE,
  AUTH_PROOF_MAX_SKEW_MS,
  authGetTokenRequest,
  authProviderRequest,
  authSetTokenRequest,
  credentialSchema,
  type AuthStatus,
  type Credential,
  type CredentialsCryptoKey,
  type CredentialsKeyResult,
  authGetTokenResponse,
  authSetTokenResponse,
  authStatusSchema,
  authDeleteTokenResponse,
  authListProvidersResponse,
  authCredentialsState,
} from "@iii-edge/protocol/harness";
import {
  type WorkerModule,
  type WorkerSurface,
  credentialsKeyMaterial,
  deriveCredentialsKey,
  verifyAuthProof,
} from "@iii-edge/sdk-edge/worker";
import type { InvocationContext } from "@iii-edge/sdk-edge/client";
import { isSealed, open, seal } from "./sealed.ts";

/** Provider → the environment variables that may hold its API key, first non-empty wins
 * (docs/harness-contracts.md §6.4). */
export const PROVIDER_ENV_KEYS: Readonly<Record<string, readonly string[]>> = {
  anthropic: ["ANTHROPIC_API_KEY"],
  openai: ["OPENAI_API_KEY"],
  google: ["GOOGLE_API_KEY", "GEMINI_API_KEY"],
  mistral: ["MISTRAL_API_KEY"],
  groq: ["GROQ_API_KEY"],
  cerebras: ["CEREBRAS_API_KEY"],
  xai: ["XAI_API_KEY"],
  deepseek: ["DEEPSEEK_API_KEY"],
  openrouter: ["OPENROUTER_API_KEY"],
  kimi: ["MOONSHOT_API_KEY"],
  "kimi-coding": ["MOONSHOT_API_KEY"],
  zai: ["ZAI_API_KEY"],
  huggingface: ["HF_TOKEN"],
  lmstudio: ["LMSTUDIO_API_KEY"],
};

export interface AuthCredentialsConfig {
  /** The material the sealing and proof keys derive from, or why there is none. */
  key: CredentialsKeyResult;
  /** Provider → API key found in the environment (non-empty values only). */
  environment: Readonly<Record<string, string>>;
  /** Clock (Unix ms), injectable for tests. */
  now?: () => number;
}

export function configFrom(env: Readonly<Record<string, unknown>>): AuthCredentialsConfig {
  const environment: Record<string, string> = {};
  for (const [provider, names] of Object.entries(PROVIDER_ENV_KEYS)) {
    for (const name of names) {
      const v = env[name];
      if (typeof v === "string" && v.trim() !== "") {
        environment[provider] = v.trim();
        break;
      }
    }
  }
  return { key: credentialsKeyMaterial(env), environment };
}

/** `api-key:<first 6>…` / `oauth`: enough to tell two keys apart, never enough to use one. */
const LABEL_PREFIX_CHARS = 6;
export function credentialLabel(c: Credential): string {
  return c.type === "api_key" ? `api-key:${c.key.slice(0, LABEL_PREFIX_CHARS)}…` : "oauth";
}

interface Keys {
  proof: CredentialsCryptoKey;
  encrypt: CredentialsCryptoKey;
}

function register(iii: WorkerSurface, config: AuthCredentialsConfig): void {
  const now = config.now ?? Date.now;
  let keys: Promise<Keys> | undefined;
  /** The derived keys, or `not_configured` with how to set CREDENTIALS_KEY. */
  const requireKeys = (what: string): Promise<Keys> => {
    const k = config.key;
    if (!k.ok) return Promise.reject(new IIIError("not_configured", `${what} is refused: ${k.reason}`));
    keys ??= Promise.all([deriveCredentialsKey(k.material, "proof"), deriveCredentialsKey(k.material, "encrypt")]).then(
      ([proof, encrypt]) => ({ proof, encrypt }),
    );
    return keys;
  };

  const readRow = (ctx: InvocationContext, provider: string) =>
    ctx.trigger<unknown, unknown>({ function_id: "state::get", payload: authCredentialsState.credential(provider) });

  /** The stored credential: absent, readable, or present but sealed under another key. */
  const stored = async (
    ctx: InvocationContext,
    provider: string,
  ): Promise<{ state: "absent" } | { state: "ok"; credential: Credential } | { state: "unreadable" }> => {
    const row = await readRow(ctx, provider);
    if (row === null || row === undefined) return { state: "absent" };
    if (!isSealed(row) || row.provider !== provider || !config.key.ok) return { state: "unreadable" };
    const credential = await open((await requireKeys("reading a stored credential")).encrypt, provider, row);
    return credential ? { state: "ok", credential } : { state: "unreadable" };
  };

  const environmentCredential = (provider: string): Credential | null => {
    const key = config.environment[provider];
    return key ? { type: "api_key", key } : null;
  };

  const unreadable = (provider: string) =>
    config.key.ok
      ? `the stored credential for ${provider} cannot be decrypted with the configured CREDENTIALS_KEY (it was stored under another key); set it again with auth::set_token or remove it with auth::delete_token`
      : `the stored credential for ${provider} cannot be read: ${config.key.reason}`;

  iii.registerFunction(
    "auth::get_token",
    async (data: { provider: string; proof?: { ts: number; sig: string } }, ctx) => {
      const { proof: proofKey } = await requireKeys("auth::get_token");
      const check = await verifyAuthProof(proofKey, data.provider, data.proof, now());
      if (!check.ok) {
        const why = {
          missing: "it needs a proof {ts, sig} that only a provider worker holding CREDENTIALS_KEY can make",
          expired: `the proof's ts is more than ${AUTH_PROOF_MAX_SKEW_MS / 1000} s from this worker's clock`,
          bad_signature: "the proof's signature does not match (the caller does not hold this CREDENTIALS_KEY)",
        }[check.reason];
        throw new IIIError("forbidden", `auth::get_token refused for ${data.provider}: ${why}`);
      }
      const s = await stored(ctx, data.provider);
      if (s.state === "ok") return s.credential;
      if (s.state === "unreadable") throw new IIIError("credential_unreadable", unreadable(data.provider));
      return environmentCredential(data.provider);
    },
    {
      description:
        "A provider's credential (stored, else from the environment, else null). Only for provider workers: needs a proof signed with CREDENTIALS_KEY.",
      input: authGetTokenRequest,
      response_format: responseFormat(authGetTokenResponse),
    },
  );

  iii.registerFunction(
    "auth::set_token",
    async (data: { provider: string } & Credential, ctx) => {
      const { encrypt } = await requireKeys("auth::set_token");
      const { provider, ...rest } = data;
      const credential = credentialSchema.parse(rest);
      const row = await seal(encrypt, provider, credential, now());
      await ctx.trigger({ function_id: "state::set", payload: { ...authCredentialsState.credential(provider), value: row } });
      return { ok: true };
    },
    {
      description:
        "Store a provider credential ({provider, type:'api_key', key} or {provider, type:'oauth', access_token, …}), encrypted at rest.",
      input: authSetTokenRequest,
      response_format: responseFormat(authSetTokenResponse),
    },
  );

  iii.registerFunction(
    "auth::delete_token",
    async (data: { provider: string }, ctx) => {
      const old = await ctx.trigger<unknown, unknown>({
        function_id: "state::delete",
        payload: authCredentialsState.credential(data.provider),
      });
      return { ok: true, deleted: old !== null && old !== undefined };
    },
    {
      description: "Remove a provider's stored credential (an environment key, if any, applies again).",
      input: authProviderRequest,
      response_format: responseFormat(authDeleteTokenResponse),
    },
  );

  iii.registerFunction(
    "auth::list_providers",
    async (_data: unknown, ctx) => {
      const rows = await ctx.trigger<unknown, unknown[]>({ function_id: "state::list", payload: { scope: AUTH_CREDENTIALS_SCOPE } });
      const names = new Set(Object.keys(config.environment));
      for (const row of Array.isArray(rows) ? rows : []) if (isSealed(row)) names.add(row.provider);
      return { providers: [...names].sort() };
    },
    {
      description: "Providers that have a credential, stored or from the environment.",
      response_format: responseFormat(authListProvidersResponse),
    },
  );

  iii.registerFunction(
    "auth::status",
    async (data: { provider: string }, ctx): Promise<AuthStatus> => {
      const s = await stored(ctx, data.provider);
      if (s.state === "ok") return { configured: true, source: "stored", label: credentialLabel(s.credential) };
      if (s.state === "unreadable") return { configured: false, source: "stored", problem: unreadable(data.provider) };
      const env = environmentCredential(data.provider);
      return env ? { configured: true, source: "environment", label: credentialLabel(env) } : { configured: false };
    },
    {
      description: "Whether a provider has a credential, where it comes from, and a label (never the secret).",
      input: authProviderRequest,
      response_format: responseFormat(authStatusSchema),
    },
  );
}

export const worker: WorkerModule<AuthCredentialsConfig> = { name: "auth-credentials", kernel: true, register, configFrom };
export default worker;
