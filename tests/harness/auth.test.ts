// The harness's HTTP API on an engine that requires tokens (AUTH_SECRET): nobody without a valid
// token starts, reads or steers a turn; a token must allow the route's function; a good one runs a
// whole turn. (On an open loopback engine the routes stay open: every other harness suite.)
import { mintToken } from "@iii-edge/protocol/token";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { reply, say, startProviderReplay, type ReplayServer } from "@iii-edge/test-support/provider-replay";
import { until } from "@iii-edge/test-support/wait";
import { TURN_DEADLINE_MS, user } from "./turn-client.ts";

const SECRET = "harness-auth-test-secret-0123456789abcdef";

let replay: ReplayServer;
let engine: EngineServer;
let good: string;

const turnBody = (sid: string) => ({
  session_id: sid,
  payload: { session_id: sid, model: "gpt-4o", provider: "openai", messages: [user("hello")] },
});
const send = (p: string, init: { method?: string; token?: string; body?: unknown } = {}) =>
  fetch(`${engine.url}/${p}`, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: { "content-type": "application/json", ...(init.token ? { authorization: `Bearer ${init.token}` } : {}) },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });

beforeAll(async () => {
  replay = await startProviderReplay();
  engine = await startEngine({ env: { AUTH_SECRET: SECRET, OPENAI_BASE_URL: replay.openaiBaseUrl, OPENAI_API_KEY: "sk-test" } });
  good = await mintToken(SECRET, { sub: "console-user", ns: ["default"], call: ["harness::*"] });
  // The harness is up once its routes answer (401 without a token is an answer).
  await until(async () => (await send("api/turns/none")).status === 401 || undefined, "the harness routes", 30_000, 200);
});

afterAll(async () => {
  await engine?.stop();
  await replay?.close();
});

describe("harness HTTP API with AUTH_SECRET", () => {
  it("refuses a request without a token, or with a forged one, and starts nothing", async () => {
    const none = await send("api/turns", { body: turnBody("auth-none") });
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect(((await none.json()) as { error: { code: string } }).error.code).toBe("unauthorized");

    const forged = await mintToken("another-secret-that-is-long-enough-000000", { sub: "mallory", ns: ["*"] });
    expect((await send("api/turns", { body: turnBody("auth-forged"), token: forged })).status).toBe(401);
    expect((await send("api/turns/auth-none", { token: good })).status).toBe(404);
    expect((await send("api/turns/auth-forged", { token: good })).status).toBe(404);
    expect(replay.requests).toHaveLength(0);
  });

  it("refuses a token that may not call the route, or is for another namespace", async () => {
    const narrow = await mintToken(SECRET, { sub: "reader", ns: ["default"], call: ["harness::http::turn_state"] });
    const denied = await send("api/turns", { body: turnBody("auth-narrow"), token: narrow });
    expect(denied.status).toBe(403);
    expect(((await denied.json()) as { error: { message: string } }).error.message).toContain("harness::http::start_turn");
    const elsewhere = await mintToken(SECRET, { sub: "team-b", ns: ["team-b"] });
    expect((await send("api/turns", { body: turnBody("auth-ns"), token: elsewhere })).status).toBe(403);
    // The narrow token still reads what it may.
    expect((await send("api/turns/auth-narrow", { token: narrow })).status).toBe(404);
  });

  it("runs a whole turn for a caller whose token allows harness::*", async () => {
    replay.enqueue("openai", reply(say("hi there")));
    const sid = "auth-good";
    const started = await send("api/turns", { body: turnBody(sid), token: good });
    expect(started.status, await started.clone().text()).toBe(200);
    const view = await until(
      async () => {
        const res = await send(`api/turns/${sid}`, { token: good });
        const v = res.status === 200 ? ((await res.json()) as { state: string }) : undefined;
        return v?.state === "stopped" ? v : undefined;
      },
      `session ${sid} stopped`,
      TURN_DEADLINE_MS,
    ).catch(async (e) => {
      const v = `${await (await send(`api/turns/${sid}`, { token: good })).text()}\nevents: ${(await (await send(`api/turns/${sid}/events`, { token: good })).text()).slice(0, 3000)}`;
      throw new Error(
        `${(e as Error).message}\nstate: ${v}\nreplay requests: ${replay.requests.length}\nengine output:\n${engine.output().slice(-4000)}`,
      );
    });
    expect(view.state).toBe("stopped");
    const events = await send(`api/turns/${sid}/events`, { token: good });
    expect(events.status).toBe(200);
    expect(JSON.stringify(await events.json())).toContain("hi there");
    // The same read without the token is refused.
    expect((await send(`api/turns/${sid}/events`)).status).toBe(401);
  });
});
