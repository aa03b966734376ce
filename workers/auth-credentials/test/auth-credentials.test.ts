// The auth-credentials worker against the engine core served in-process (tests/support/node-engine.ts): what a caller can and cannot get.
// Credentials resolve stored → environment → none; the stored row is ciphertext; get_token answers
// only a caller holding the credentials key (a provider), and nothing else ever shows a secret.
import { AUTH_CREDENTIALS_SCOPE, type AuthProof, type CredentialsCryptoKey, type CredentialsKeyMaterial } from "@iii-edge/protocol/harness";
import { deriveCredentialsKey, base64url, signAuthProof } from "@iii-edge/sdk-edge/worker";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import { until } from "@iii-edge/test-support/wait";
import { worker } from "../src/index.ts";

const CREDENTIALS_KEY = "Zk3v9QwL2mN8xR4tB7yH1cF6";
const OPENAI_ENV_KEY = "sk-env-openai-Qm3Xc9Lp2Vb7";
const MISTRAL_ENV_KEY = "mistral-env-key-Rt5Yh8Ns1";
const ENV: Record<string, string> = {
  CREDENTIALS_KEY,
  OPENAI_API_KEY: OPENAI_ENV_KEY,
  MISTRAL_API_KEY: MISTRAL_ENV_KEY,
  GROQ_API_KEY: "   ",
};
/** Every secret this suite stores or configures: none may show up anywhere but get_token. */
const SECRETS: string[] = [OPENAI_ENV_KEY, MISTRAL_ENV_KEY, CREDENTIALS_KEY];

let engine: NodeEngine;
let auth: RunningWorkers;
let caller: RunningWorkers;
let proofKey: CredentialsCryptoKey;

const material = (secret: string, source: CredentialsKeyMaterial["source"] = "CREDENTIALS_KEY"): CredentialsKeyMaterial => ({
  secret,
  source,
});

const call = <T = unknown>(function_id: string, payload: unknown) => caller.client.trigger<unknown, T>({ function_id, payload });
const getToken = async (provider: string, proof?: AuthProof) =>
  call("auth::get_token", { provider, proof: proof ?? (await signAuthProof(proofKey, provider)) });
const rawRow = (provider: string) =>
  call<Record<string, string> | undefined>("state::get", { scope: AUTH_CREDENTIALS_SCOPE, key: provider });

/** No 8-character window of any secret appears in `value`. */
function expectNoSecret(value: unknown, secrets: readonly string[] = SECRETS): void {
  const text = JSON.stringify(value) ?? "";
  for (const s of secrets) for (let i = 0; i + 8 <= s.length; i++) expect(text).not.toContain(s.slice(i, i + 8));
}

async function restartAuth(env: Record<string, string>, ready: () => Promise<boolean>): Promise<void> {
  await auth.shutdown();
  // Its functions are the old worker's until the engine has seen its socket close: the new one's
  // registrations would be refused as another worker's.
  await until(() => !engine.core.catalog.functions.has("auth::get_token"), "the old worker's functions released");
  auth = runWorkers(engine.wsUrl, [worker], { env, workerName: "auth-credentials" });
  await until(ready, "the restarted worker answers", 20_000);
}

beforeAll(async () => {
  engine = await startNodeEngine();
  auth = runWorkers(engine.wsUrl, [worker], { env: ENV, workerName: "auth-credentials" });
  caller = runWorkers(engine.wsUrl, [], { workerName: "auth-test-caller" });
  proofKey = await deriveCredentialsKey(material(CREDENTIALS_KEY), "proof");
  await until(
    async () => (await call<{ providers: string[] }>("auth::list_providers", {})).providers.length > 0,
    "auth-credentials registered",
    30_000,
  );
});

afterAll(async () => {
  await Promise.allSettled([auth?.shutdown(), caller?.shutdown()]);
  await engine?.stop();
});

describe("resolution: stored → environment → none", () => {
  it("set, get, status, list, delete round trip", async () => {
    const key = "acme-secret-key-Hn4Jk7Wq2";
    SECRETS.push(key);
    expect(await call("auth::set_token", { provider: "acme", type: "api_key", key })).toEqual({ ok: true });
    expect(await getToken("acme")).toEqual({ type: "api_key", key });
    expect(await call("auth::status", { provider: "acme" })).toEqual({ configured: true, source: "stored", label: "api-key:acme-s…" });
    expect((await call<{ providers: string[] }>("auth::list_providers", {})).providers).toContain("acme");
    expect(await call("auth::delete_token", { provider: "acme" })).toEqual({ ok: true, deleted: true });
    expect(await getToken("acme")).toBeUndefined(); // null travels as "no result"
    expect(await call("auth::status", { provider: "acme" })).toEqual({ configured: false });
    expect(await call("auth::delete_token", { provider: "acme" })).toEqual({ ok: true, deleted: false });
    expect((await call<{ providers: string[] }>("auth::list_providers", {})).providers).not.toContain("acme");
  });

  it("a stored credential beats the environment; deleting it falls back to the environment", async () => {
    const stored = "sk-stored-openai-Bv6Nm1Zx8";
    SECRETS.push(stored);
    expect(await getToken("openai")).toEqual({ type: "api_key", key: OPENAI_ENV_KEY });
    expect(await call("auth::status", { provider: "openai" })).toEqual({
      configured: true,
      source: "environment",
      label: "api-key:sk-env…",
    });
    await call("auth::set_token", { provider: "openai", type: "api_key", key: stored, base_url: "http://127.0.0.1:1234/v1" });
    expect(await getToken("openai")).toEqual({ type: "api_key", key: stored, base_url: "http://127.0.0.1:1234/v1" });
    expect(await call("auth::status", { provider: "openai" })).toMatchObject({ source: "stored", label: "api-key:sk-sto…" });
    await call("auth::delete_token", { provider: "openai" });
    expect(await getToken("openai")).toEqual({ type: "api_key", key: OPENAI_ENV_KEY });
  });

  it("environment fallback per the provider → variable map; empty values are ignored; unknown providers have none", async () => {
    expect(await getToken("mistral")).toEqual({ type: "api_key", key: MISTRAL_ENV_KEY });
    expect(await getToken("groq")).toBeUndefined();
    expect(await call("auth::status", { provider: "groq" })).toEqual({ configured: false });
    expect(await getToken("nobody-knows")).toBeUndefined();
    const { providers } = await call<{ providers: string[] }>("auth::list_providers", {});
    expect(providers).toEqual(expect.arrayContaining(["mistral", "openai"]));
    expect(providers).not.toContain("groq");
  });

  it("oauth credentials round trip; their label is just `oauth`", async () => {
    const token = {
      type: "oauth",
      access_token: "oat-access-Lk9Mn2Bv5",
      refresh_token: "ort-refresh-Pq7Wx3Cz1",
      expires_at: 1_900_000_000_000,
      scopes: ["user:inference"],
    };
    SECRETS.push(token.access_token, token.refresh_token);
    await call("auth::set_token", { provider: "anthropic", ...token });
    expect(await getToken("anthropic")).toEqual(token);
    expect(await call("auth::status", { provider: "anthropic" })).toEqual({ configured: true, source: "stored", label: "oauth" });
  });
});

describe("at rest", () => {
  it("the state row is AES-GCM ciphertext: no part of the key, a fresh IV on every write", async () => {
    const key = "sk-rest-check-Fg5Hj8Kl3Zx0";
    SECRETS.push(key);
    await call("auth::set_token", { provider: "rest", type: "api_key", key });
    const first = (await rawRow("rest"))!;
    expect(first).toMatchObject({ v: 1, provider: "rest", alg: "A256GCM", iv: expect.any(String), ct: expect.any(String) });
    expect(Object.keys(first).sort()).toEqual(["alg", "ct", "iv", "provider", "updated_at", "v"]);
    expectNoSecret(first, [key]);
    await call("auth::set_token", { provider: "rest", type: "api_key", key });
    const second = (await rawRow("rest"))!;
    expect(second.iv).not.toBe(first.iv);
    expect(second.ct).not.toBe(first.ct);
    expectNoSecret(await call("state::list", { scope: AUTH_CREDENTIALS_SCOPE }));
  });

  it("a row copied under another provider's name does not open (the provider is the additional data)", async () => {
    await call("state::set", { scope: AUTH_CREDENTIALS_SCOPE, key: "copycat", value: { ...(await rawRow("rest"))!, provider: "copycat" } });
    await expect(getToken("copycat")).rejects.toMatchObject({ code: "credential_unreadable" });
    expect(await call("auth::status", { provider: "copycat" })).toMatchObject({
      configured: false,
      source: "stored",
      problem: expect.stringContaining("cannot be decrypted"),
    });
    await call("auth::delete_token", { provider: "copycat" });
  });
});

describe("only a provider may get a token", () => {
  it("no proof → forbidden", async () => {
    await expect(call("auth::get_token", { provider: "openai" })).rejects.toMatchObject({
      code: "forbidden",
      message: expect.stringContaining("proof"),
    });
  });

  it("a bad, foreign, mis-addressed or expired proof → forbidden", async () => {
    const good = await signAuthProof(proofKey, "openai");
    const attempts: [string, AuthProof][] = [
      ["garbage signature", { ts: good.ts, sig: "not-a-signature" }],
      ["flipped signature", { ts: good.ts, sig: base64url(new Uint8Array(32)) }],
      ["another ts", { ts: good.ts + 1, sig: good.sig }],
      ["another key", await signAuthProof(await deriveCredentialsKey(material("some-other-credentials-key-123"), "proof"), "openai")],
      [
        "same text as AUTH_SECRET",
        await signAuthProof(await deriveCredentialsKey(material(CREDENTIALS_KEY, "AUTH_SECRET"), "proof"), "openai"),
      ],
      ["for another provider", await signAuthProof(proofKey, "mistral")],
      ["61 s old", await signAuthProof(proofKey, "openai", Date.now() - 61_000)],
      ["61 s ahead", await signAuthProof(proofKey, "openai", Date.now() + 61_000)],
    ];
    for (const [what, proof] of attempts) {
      const err = await getToken("openai", proof).then(
        (v) => ({ code: "answered", v }),
        (e: { code: string; message: string }) => e,
      );
      expect(err, what).toMatchObject({ code: "forbidden" });
      expectNoSecret(err);
    }
  });

  it("a proof from 30 s ago is still good (clock skew)", async () => {
    expect(await getToken("openai", await signAuthProof(proofKey, "openai", Date.now() - 30_000))).toEqual({
      type: "api_key",
      key: OPENAI_ENV_KEY,
    });
  });
});

describe("nothing else shows a secret", () => {
  it("status, list_providers, the function catalog and the worker list hold no key", async () => {
    for (const provider of ["openai", "mistral", "anthropic", "rest"]) expectNoSecret(await call("auth::status", { provider }));
    expectNoSecret(await call("auth::list_providers", {}));
    const fns = await call<{ functions: { function_id: string }[] }>("engine::functions::list", { include_internal: true });
    expect(fns.functions.map((f) => f.function_id)).toEqual(
      expect.arrayContaining(["auth::get_token", "auth::set_token", "auth::delete_token", "auth::list_providers", "auth::status"]),
    );
    expectNoSecret(fns);
    expectNoSecret(await call("engine::functions::info", { function_id: "auth::get_token" }));
    expectNoSecret(await call("engine::workers::list", {}));
  });

  it("bad input → invalid_input naming the field, nothing stored", async () => {
    const bad = [
      { provider: "blank", type: "api_key", key: "" },
      { provider: "weird", type: "password", key: "x" },
      { provider: "Bad Name!", type: "api_key", key: "sk-whatever-123456" },
      { provider: "nokey", type: "api_key" },
      { provider: "badurl", type: "api_key", key: "sk-whatever-123456", base_url: "not a url" },
    ];
    for (const payload of bad) {
      const err = await call("auth::set_token", payload).then(
        () => undefined,
        (e: { code: string; message: string }) => e,
      );
      expect(err, JSON.stringify(payload)).toMatchObject({ code: "invalid_input" });
      expect(err!.message).not.toContain("sk-whatever-123456");
      if (/^[a-z]+$/.test(payload.provider)) expect(await rawRow(payload.provider)).toBeUndefined();
    }
  });
});

describe("the credentials key", () => {
  it("without CREDENTIALS_KEY (or AUTH_SECRET) get_token and set_token refuse, saying how to set one; status still answers", async () => {
    const { CREDENTIALS_KEY: _, ...noKey } = ENV;
    await restartAuth(noKey, async () => {
      const e = await getToken("openai").then(
        () => undefined,
        (err: { code: string }) => err,
      );
      return e?.code === "not_configured";
    });
    await expect(getToken("openai")).rejects.toMatchObject({
      code: "not_configured",
      message: expect.stringContaining("set CREDENTIALS_KEY"),
    });
    await expect(call("auth::set_token", { provider: "x", type: "api_key", key: "sk-x-1234567890" })).rejects.toMatchObject({
      code: "not_configured",
    });
    expect(await call("auth::status", { provider: "openai" })).toEqual({
      configured: true,
      source: "environment",
      label: "api-key:sk-env…",
    });
    expect(await call("auth::status", { provider: "rest" })).toMatchObject({
      configured: false,
      source: "stored",
      problem: expect.stringContaining("CREDENTIALS_KEY"),
    });
  });

  it("a CREDENTIALS_KEY shorter than 16 characters is refused", async () => {
    await restartAuth({ ...ENV, CREDENTIALS_KEY: "short" }, async () => {
      const e = await getToken("openai").then(
        () => undefined,
        (err: { code: string; message: string }) => err,
      );
      return e?.code === "not_configured" && e.message.includes("shorter than 16");
    });
  });

  it("AUTH_SECRET alone works, with keys of its own: rows sealed under CREDENTIALS_KEY do not open", async () => {
    const { CREDENTIALS_KEY: _, ...rest } = ENV;
    const secret = "auth-secret-for-the-engine-5d8a";
    await restartAuth({ ...rest, AUTH_SECRET: secret }, async () => {
      const e = await call("auth::get_token", { provider: "openai" }).then(
        () => undefined,
        (err: { code: string }) => err,
      );
      return e?.code === "forbidden";
    });
    const key = await deriveCredentialsKey(material(secret, "AUTH_SECRET"), "proof");
    expect(await getToken("openai", await signAuthProof(key, "openai"))).toEqual({ type: "api_key", key: OPENAI_ENV_KEY });
    await expect(getToken("openai", await signAuthProof(proofKey, "openai"))).rejects.toMatchObject({ code: "forbidden" });
    await expect(getToken("rest", await signAuthProof(key, "rest"))).rejects.toMatchObject({ code: "credential_unreadable" });
  });
});
