// RBAC as a function (AUTH_FUNCTION) and the closed-by-default rule, against `npm start`.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { RawSocket, upgradeStatus } from "@iii-edge/test-support/raw-socket";
import { eventually } from "@iii-edge/test-support/wait";
import http from "node:http";

/** POST with headers fetch() would not send as given (Host). */
function postStatus(url: string, headers: Record<string, string>, body: string): Promise<number> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path: u.pathname, method: "POST", headers: { "content-type": "application/json", ...headers } },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

describe("AUTH_FUNCTION: a function decides who connects and what it may do", () => {
  let engine: EngineServer;
  let authWorker: RawSocket | undefined;
  const asked: Record<string, unknown>[] = [];

  beforeAll(async () => {
    engine = await startSecureEngine({ AUTH_FUNCTION: "rbac::check" });
    // The auth worker itself connects with a token signed by AUTH_SECRET.
    authWorker = await RawSocket.open(`${engine.wsUrl}/`, bearer(await token("rbac", { register: ["rbac::"] })));
    authWorker.serve("rbac::check", (req) => {
      asked.push(req);
      const headers = req.headers as Record<string, string>;
      if (headers["x-api-key"] === "key-of-dora") return { sub: "dora", ns: ["default"], call: ["state::get", "engine::*"] };
      return { allowed: false, reason: "unknown api key" };
    });
    await eventually(
      async () => (await upgradeStatus(`${engine.wsUrl}/`, { "x-api-key": "key-of-dora" })).status === 101,
      15_000,
      "auth function answering",
    );
  });
  afterAll(async () => {
    await authWorker?.close().catch(() => {});
    await engine?.stop();
  });

  it("admits what it allows, with the grant it answers, and refuses the rest with its reason", async () => {
    const dora = await RawSocket.open(`${engine.wsUrl}/`, { "x-api-key": "key-of-dora" });
    expect((await dora.call("state::get", { scope: "s", key: "k" })).error).toBeUndefined();
    expect((await dora.call("state::set", { scope: "s", key: "k", value: 1 })).error.code).toBe("forbidden");
    const seen = asked.at(-1)!;
    expect(seen).toMatchObject({ path: "/", namespace: "default" });
    expect((seen.headers as Record<string, string>)["x-iii-grant"]).toBeUndefined();
    const refused = await upgradeStatus(`${engine.wsUrl}/`, { "x-api-key": "wrong" });
    expect(refused.status).toBe(401);
    expect(refused.body?.error.message).toBe("unknown api key");
    // the grant's namespaces still bind: dora's key is for default only
    expect((await upgradeStatus(`${engine.wsUrl}/ns/other`, { "x-api-key": "key-of-dora" })).status).toBe(403);
    await dora.close();
  });

  it("a signed token is still accepted beside it; a client cannot smuggle a grant header past it", async () => {
    expect((await upgradeStatus(`${engine.wsUrl}/`, bearer(await token("tokened")))).status).toBe(101);
    const smuggled = await upgradeStatus(`${engine.wsUrl}/`, { "x-iii-grant": JSON.stringify({ sub: "root", ns: ["*"] }) });
    expect(smuggled.status).toBe(401);
  });

  it("when the auth function is gone, nobody gets in through it (503), tokens still work", async () => {
    await authWorker!.close();
    authWorker = undefined;
    await eventually(
      async () => (await upgradeStatus(`${engine.wsUrl}/`, { "x-api-key": "key-of-dora" })).status === 503,
      10_000,
      "503 without the auth function",
    );
    expect((await upgradeStatus(`${engine.wsUrl}/`, bearer(await token("tokened")))).status).toBe(101);
  });
});

describe("an engine without AUTH_SECRET is closed to everyone but loopback", () => {
  let engine: EngineServer;
  beforeAll(async () => {
    engine = await startEngine();
  });
  afterAll(async () => {
    await engine?.stop();
  });

  it("serves loopback clients open, and refuses a non-loopback host or client address with how to configure auth", async () => {
    expect((await upgradeStatus(`${engine.wsUrl}/`)).status).toBe(101);
    const refusedHeaders: Record<string, string>[] = [{ Host: "engine.example.com" }, { "CF-Connecting-IP": "203.0.113.9" }];
    for (const headers of refusedHeaders) {
      const ws = await upgradeStatus(`${engine.wsUrl}/`, headers);
      expect(ws.status).toBe(403);
      expect(ws.body?.error.message).toMatch(/AUTH_SECRET/);
      const channel = await upgradeStatus(`${engine.wsUrl}/ws/channels/x?key=y&dir=read`, headers);
      expect(channel.status).toBe(403);
      expect(await postStatus(`${engine.url}/_iii/invoke`, headers, JSON.stringify({ function_id: "state::list_groups" }))).toBe(403);
    }
    const health = (await (await fetch(`${engine.url}/healthz`)).json()) as { auth: string };
    expect(health.auth).toBe("open");
  });
});
