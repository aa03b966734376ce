// The front door's smaller holes, each attacked against `npm start` with AUTH_SECRET: a route
// function harvesting its callers' engine tokens, malformed percent-escapes fishing for a stack,
// a body of exactly the frame bound stalling a call for its whole deadline, a channel's reader
// writing into it (and its writer reading), a token dated in the future, and HTTP-invoked
// functions aimed at this machine through names that resolve to loopback. Each is refused or
// answered at once, and nothing registered changes.
import { promises as dns } from "node:dns";
import { SignJWT } from "jose";
import { TOKEN_ALGORITHM, TOKEN_ISSUER } from "@iii-edge/protocol";
import { MAX_CLOCK_SKEW_S, mintToken } from "@iii-edge/protocol/token";
import { checkResolvedHost } from "@iii-edge/engine-do/core/http-invoke.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_AUTH_SECRET, bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { RawSocket, upgradeStatus, type Frame } from "@iii-edge/test-support/raw-socket";
import { until } from "@iii-edge/test-support/wait";
import { rawRequest, type RawAnswer } from "@iii-edge/test-support/raw-http";

let engine: EngineServer;
let tenant: RawSocket;
let admin: string;
/** What the tenant's route function was handed, last call first. */
const seen: Frame[] = [];

const request = (method: string, path: string, headers: Record<string, string> = {}, body?: string | Buffer): Promise<RawAnswer> =>
  rawRequest(engine.url, method, path, headers, body);

const JSON_TYPE = { "content-type": "application/json" };
const invoke = (function_id: string, payload: unknown, t = admin) =>
  request("POST", "/_iii/invoke", { ...JSON_TYPE, ...bearer(t) }, JSON.stringify({ function_id, payload }));

async function catalog(): Promise<unknown> {
  const f = (await invoke("engine::functions::list", { include_internal: true })).body.result as { functions: { function_id: string }[] };
  const t = (await invoke("engine::registered-triggers::list", { include_internal: true })).body.result as {
    registered_triggers: { id: string }[];
  };
  return { functions: f.functions.map((x) => x.function_id).sort(), triggers: t.registered_triggers.map((x) => x.id).sort() };
}

beforeAll(async () => {
  engine = await startSecureEngine();
  admin = await token("admin");
  tenant = await RawSocket.open(`${engine.wsUrl}/`, bearer(await token("tenant", { register: ["fuzz"], bind: ["http"], call: ["fuzz*"] })));
  tenant.serve("fuzz::echo", (data) => {
    seen.unshift(data);
    return { status_code: 200, body: { ok: true } };
  });
  tenant.send({
    type: "registertrigger",
    id: "fuzz-echo",
    trigger_type: "http",
    function_id: "fuzz::echo",
    config: { api_path: "fuzz/echo", http_method: "POST" },
  });
  await until(async () => (await request("POST", "/fuzz/echo", JSON_TYPE, "{}")).status === 200, "the tenant's route");
});
afterAll(async () => {
  await tenant?.close();
  await engine?.stop();
});

describe("a route function", () => {
  it("never sees the engine token its caller presents, in the header or the query; its own scheme passes", async () => {
    const callerToken = await token("alice", { call: ["harness::*", "state::*"] });
    await request("POST", `/fuzz/echo?access_token=${callerToken}&x=1`, { ...JSON_TYPE, ...bearer(callerToken) }, JSON.stringify({ n: 1 }));
    const got = seen[0]!;
    expect(JSON.stringify(got)).not.toContain(callerToken);
    expect(got.headers.authorization).toBeUndefined();
    expect(got.query_params).toEqual({ x: "1" });
    // A header a client sends under the front door's own prefix is dropped too.
    await request("POST", "/fuzz/echo", { ...JSON_TYPE, ...bearer(callerToken), "x-iii-engine-credential": "Bearer forged" }, "{}");
    expect(seen[0]!.headers["x-iii-engine-credential"]).toBeUndefined();
    // A route's own credential (not one the engine issued) is the route's business: passed on.
    await request("POST", "/fuzz/echo?access_token=route-own", { ...JSON_TYPE, authorization: "Bearer route-own-scheme" }, "{}");
    expect(seen[0]!.headers.authorization).toBe("Bearer route-own-scheme");
    expect(seen[0]!.query_params.access_token).toBe("route-own");
  });

  it("the deployment's own routes (the harness's HTTP API) still check their callers' tokens", async () => {
    const none = await request("GET", "/api/turns/no-such-session");
    expect(none.status).toBe(401);
    const withToken = await request("GET", "/api/turns/no-such-session", bearer(await token("alice", { call: ["harness::*"] })));
    expect(withToken.status).not.toBe(401);
  });
});

describe("malformed input", () => {
  const bad = ["/ns/%E0/mcp", "/ns/%E0/http/x", "/ns/%E0", "/ns/%E0/_iii/invoke", "/ns/%E0%A4/otel", "/%E0", "/fuzz/%E0"];

  it("a bad percent-escape is a 400 (or a 404), never a 500, and no answer carries a stack", async () => {
    for (const path of bad) {
      for (const method of ["GET", "POST"]) {
        const r = await request(method, path, { ...JSON_TYPE, ...bearer(admin) }, method === "POST" ? "{}" : undefined);
        expect(r.status, `${method} ${path}`).toBeLessThan(500);
        expect(r.text, `${method} ${path}`).not.toMatch(/URIError|\.ts:\d+|\n\s+at /);
      }
    }
    const mcp = await request(
      "POST",
      "/ns/%E0/mcp",
      { ...JSON_TYPE, ...bearer(admin) },
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    );
    expect(mcp.status).toBe(400);
    expect(mcp.body.error?.code).toBe("invalid_arguments");
    const channel = await upgradeStatus(`${engine.wsUrl}/ws/channels/%E0?key=k&dir=read`);
    expect(channel.status).toBe(400);
    expect(JSON.stringify(channel.body)).not.toMatch(/URIError|\.ts:\d+/);
  });

  it("a payload the function's input refuses (deserialization_error) is the caller's 400", async () => {
    const r = await invoke("engine::channels::create", { buffer_size: 5000 });
    expect(r.body.error?.code).toBe("deserialization_error");
    expect(r.status).toBe(400);
  });
});

describe("a body of exactly the frame bound", () => {
  /** A JSON call to `function_id` of exactly `bytes` bytes. */
  const exactly = (function_id: string, bytes: number) => {
    const shell = JSON.stringify({ function_id, payload: { pad: "" } });
    return JSON.stringify({ function_id, payload: { pad: "x".repeat(bytes - shell.length) } });
  };

  it("to /_iii/invoke is answered at once (the call cannot travel in one frame), not after the 30 s deadline", async () => {
    for (const bytes of [1_048_575, 1_048_576]) {
      const body = exactly("fuzz::echo", bytes);
      expect(Buffer.byteLength(body)).toBe(bytes);
      const before = seen.length;
      const r = await request("POST", "/_iii/invoke", { ...JSON_TYPE, ...bearer(admin) }, body);
      expect(r.ms, `${bytes} bytes`).toBeLessThan(5_000);
      expect(r.status, `${bytes} bytes`).toBe(413);
      expect(r.body.error?.code).toBe("value_too_large");
      expect(seen.length).toBe(before);
    }
  });

  it("to an http route is answered at once", async () => {
    for (const bytes of [1_048_575, 1_048_576]) {
      const r = await request("POST", "/fuzz/echo", { "content-type": "text/plain" }, "y".repeat(bytes));
      expect(r.ms, `${bytes} bytes`).toBeLessThan(5_000);
      expect(r.status, `${bytes} bytes`).not.toBe(504);
    }
  });
});

describe("a channel", () => {
  it("has one key per end: the reader's cannot write, the writer's cannot read", async () => {
    const ch = (await invoke("engine::channels::create", {})).body.result as { reader: Frame; writer: Frame };
    expect(ch.reader.access_key).not.toBe(ch.writer.access_key);
    const end = (key: string, dir: string) =>
      `${engine.wsUrl}/ws/channels/${ch.reader.channel_id}?key=${encodeURIComponent(key)}&dir=${dir}`;
    expect((await upgradeStatus(end(ch.reader.access_key, "write"))).status).toBe(404);
    expect((await upgradeStatus(end(ch.writer.access_key, "read"))).status).toBe(404);
    expect((await upgradeStatus(end(ch.reader.access_key, "read"))).status).toBe(101);
  });
});

describe("a token", () => {
  const minted = (iatOffsetS: number, sub = "time-traveller") =>
    new SignJWT({ ns: ["*"] })
      .setProtectedHeader({ alg: TOKEN_ALGORITHM, typ: "JWT" })
      .setSubject(sub)
      .setIssuer(TOKEN_ISSUER)
      .setIssuedAt(Math.floor(Date.now() / 1000) + iatOffsetS)
      .setExpirationTime(Math.floor(Date.now() / 1000) + iatOffsetS + 3600)
      .sign(new TextEncoder().encode(TEST_AUTH_SECRET));

  it("issued in the future (past the clock skew) is refused; within the skew it is taken", async () => {
    const future = await invoke("engine::functions::list", {}, await minted(3600));
    expect(future.status).toBe(401);
    expect(future.body.error?.message).toMatch(/future/);
    expect((await upgradeStatus(`${engine.wsUrl}/`, bearer(await minted(MAX_CLOCK_SKEW_S + 120)))).status).toBe(401);
    expect((await invoke("engine::functions::list", {}, await minted(MAX_CLOCK_SKEW_S / 2))).status).toBe(200);
  });

  it("naming the open engine's own principal (`anonymous`) is refused everywhere, and cannot be minted", async () => {
    // The open engine's grant is trusted where the engine meets it (durable bindings, every session,
    // trusted servers of auto-allowed ids): a tenant calling itself `anonymous` must not inherit that.
    const squatter = await minted(0, "anonymous");
    const before = await catalog();
    const r = await invoke("engine::functions::list", {}, squatter);
    expect(r.status).toBe(401);
    expect(r.body.error?.message).toMatch(/reserved/);
    expect((await upgradeStatus(`${engine.wsUrl}/`, bearer(squatter))).status).toBe(401);
    const turn = await request(
      "POST",
      "/api/turns",
      { ...JSON_TYPE, ...bearer(squatter) },
      JSON.stringify({ session_id: "anon-squat", message: "hi" }),
    );
    expect(turn.status).toBe(401);
    await expect(mintToken(TEST_AUTH_SECRET, { sub: "anonymous", ns: ["*"] })).rejects.toThrow(/reserved/);
    expect(await catalog()).toEqual(before);
  });
});

describe("an HTTP-invoked function", () => {
  const loopbackNames = [
    "https://127.0.0.1.nip.io/hook",
    "https://7f000001.nip.io/hook",
    "https://app-10-0-0-1.sslip.io/hook",
    "https://localtest.me/hook",
    "https://api.localtest.me/hook",
    "https://lvh.me/hook",
    "https://x.app.localhost/hook",
    "https://169.254.169.254.nip.io/latest",
  ];

  it("aimed at this machine by a name that resolves to loopback is refused; nothing is registered", async () => {
    const before = await catalog();
    for (const [i, url] of loopbackNames.entries()) {
      tenant.send({ type: "registerfunction", id: `fuzz::hook${i}`, invocation: { url, method: "POST" } });
      const refusal = await tenant.next((f) => f.type === "error");
      expect(refusal.error.code, url).toBe("url_validation_failed");
    }
    expect(await catalog()).toEqual(before);
  });

  it("at call time, a name whose DNS answer is private is refused (with a resolver: Node's)", async () => {
    const policy = {
      allowPrivate: false,
      resolveHost: async (host: string) => (await dns.lookup(host, { all: true })).map((a) => a.address),
    };
    expect(await checkResolvedHost("https://localhost/hook", policy)).toMatchObject({ ok: false });
    expect(
      await checkResolvedHost("https://rebound.example/hook", {
        allowPrivate: false,
        resolveHost: async () => ["93.184.215.14", "10.0.0.7"],
      }),
    ).toMatchObject({ ok: false, message: expect.stringMatching(/10\.0\.0\.7/) });
    expect(
      await checkResolvedHost("https://public.example/hook", { allowPrivate: false, resolveHost: async () => ["93.184.215.14"] }),
    ).toEqual({ ok: true });
  });
});
