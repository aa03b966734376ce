// GET /_console/token (demo-app/edge/console-token.ts), the console page's way to its engine token,
// called as the Worker calls it: who gets a token, what the token allows and for how long.
import { verifyToken } from "@iii-edge/protocol/token";
import { consoleToken, CONSOLE_CALLS, CONSOLE_CODE_HEADER, CONSOLE_TOKEN_TTL_S } from "@iii-edge/demo-app/console-token";
import { describe, expect, it } from "vitest";
import { TEST_AUTH_SECRET } from "@iii-edge/test-support/auth";

const get = (url: string, headers: Record<string, string> = {}) => new Request(url, { headers });
const answer = async (res: Response) => ({
  status: res.status,
  body: (await res.json()) as {
    token?: string | null;
    mode?: string;
    sub?: string;
    expires_at?: number;
    error?: { code: string; message: string };
  },
});
const SECURE = { AUTH_SECRET: TEST_AUTH_SECRET };
const DEPLOYED = "https://iii.example.workers.dev/_console/token";
const CODE = "console-code-for-this-run";

describe("console token route", () => {
  it("an open engine hands out no token (none is needed)", async () => {
    expect(await answer(await consoleToken(get("http://127.0.0.1:8787/_console/token"), {}))).toEqual({
      status: 200,
      body: { token: null, mode: "open" },
    });
    expect((await answer(await consoleToken(get(DEPLOYED), { AUTH_FUNCTION: "auth::check" }))).body).toEqual({
      token: null,
      mode: "auth_function",
    });
  });

  it("on loopback `npm start` with AUTH_SECRET and this run's console code: a short-lived token, narrow to one namespace, the console's own registrations and the functions its screens call", async () => {
    const withCode = { ...SECURE, CONSOLE_CODE: CODE };
    const { status, body } = await answer(
      await consoleToken(
        get("http://127.0.0.1:8787/_console/token?ns=team-a", { [CONSOLE_CODE_HEADER]: CODE, "sec-fetch-site": "same-origin" }),
        withCode,
      ),
    );
    expect(status).toBe(200);
    const check = await verifyToken(TEST_AUTH_SECRET, body.token!);
    expect(check.ok).toBe(true);
    if (!check.ok) return;
    expect(check.grant).toMatchObject({
      sub: "console@loopback",
      ns: ["team-a"],
      register: ["console-"],
      bind: ["engine::functions-available", "engine::workers-available", "state"],
    });
    // Calls: what the console's screens call, never everything (an unrestricted console token was
    // what a tenant's page could mint and use).
    expect(check.grant.call).toEqual([...CONSOLE_CALLS]);
    expect(check.grant.call).not.toContain("*");
    // Without the code (or with another run's), being on loopback is not enough.
    expect((await consoleToken(get("http://127.0.0.1:8787/_console/token"), withCode)).status).toBe(401);
    expect(
      (await consoleToken(get("http://127.0.0.1:8787/_console/token", { [CONSOLE_CODE_HEADER]: "another-run" }), withCode)).status,
    ).toBe(401);
    const ttl = check.grant.exp! - Math.floor(Date.now() / 1000);
    expect(ttl).toBeGreaterThan(CONSOLE_TOKEN_TTL_S - 5);
    expect(ttl).toBeLessThanOrEqual(CONSOLE_TOKEN_TTL_S);
    expect(body.expires_at).toBe(check.grant.exp);
  });

  it("a loopback URL reached from elsewhere (cf-connecting-ip) is not loopback", async () => {
    const { status } = await answer(
      await consoleToken(get("http://127.0.0.1:8787/_console/token", { "cf-connecting-ip": "203.0.113.9" }), SECURE),
    );
    expect(status).toBe(401);
  });

  it("deployed: no CONSOLE_CREDENTIAL configured says what to set; with one, only the right credential gets a token", async () => {
    const none = await answer(await consoleToken(get(DEPLOYED), SECURE));
    expect(none.status).toBe(401);
    expect(none.body.error?.message).toContain("no CONSOLE_CREDENTIAL set");
    const env = { ...SECURE, CONSOLE_CREDENTIAL: "correct-horse-battery-staple" };
    expect((await answer(await consoleToken(get(DEPLOYED), env))).body.error?.message).toBe("sign in with the console credential");
    expect((await answer(await consoleToken(get(DEPLOYED, { authorization: "Bearer wrong" }), env))).body.error?.message).toBe(
      "wrong console credential",
    );
    const ok = await answer(await consoleToken(get(DEPLOYED, { authorization: "Bearer correct-horse-battery-staple" }), env));
    expect(ok.status).toBe(200);
    expect(ok.body.sub).toBe("console");
    expect((await verifyToken(TEST_AUTH_SECRET, ok.body.token!)).ok).toBe(true);
  });

  it("refuses what it does not answer, and changes nothing", async () => {
    expect((await consoleToken(new Request("http://127.0.0.1:8787/_console/token", { method: "POST" }), SECURE)).status).toBe(405);
    const bad = await answer(await consoleToken(get("http://127.0.0.1:8787/_console/token?ns=../x"), SECURE));
    expect(bad).toMatchObject({ status: 400, body: { error: { code: "invalid_arguments" } } });
  });
});
