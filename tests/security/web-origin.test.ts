// The open local engine (`npm start` without AUTH_SECRET) attacked from the web: a page on another
// origin dials its sockets, sends preflight-free (text/plain, form) requests to its JSON endpoints,
// asks for a console token; a proxy in front of it forwards remote clients. Each is refused, and
// the catalog and state read the same afterwards. What a local program or the engine's own page
// does keeps working (no Origin, or the engine's own).
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { rawRequest, type RawAnswer } from "@iii-edge/test-support/raw-http";

let engine: EngineServer;
const EVIL = "https://evil.example";

/** A developer's app on a dev server beside `npm start`, listed in ALLOWED_ORIGINS. */
const DEV_APP = "http://localhost:5173";

beforeAll(async () => {
  engine = await startEngine({ env: { ALLOWED_ORIGINS: `${DEV_APP}, *, not an origin` } });
});
afterAll(async () => {
  await engine?.stop();
});

/** A request with exactly these headers (fetch would add or refuse some of them). */
const raw = (method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<RawAnswer> =>
  rawRequest(engine.url, method, path, headers, body);

const JSON_TYPE = { "content-type": "application/json" };
/** A call as a local program makes it (no Origin). */
async function call(function_id: string, payload: unknown): Promise<unknown> {
  const r = await raw("POST", "/_iii/invoke", JSON_TYPE, JSON.stringify({ function_id, payload }));
  if (r.status !== 200) throw new Error(`${function_id}: ${r.status} ${r.text}`);
  return r.body.result;
}

/** What an attack could change: the catalog's functions and the scope the attacks write to. */
async function snapshot(): Promise<unknown> {
  const fns = (await call("engine::functions::list", {})) as { functions: { function_id: string }[] };
  return {
    functions: fns.functions.map((f) => f.function_id).sort(),
    attack: await call("state::list", { scope: "web-attack" }),
    sessions: await call("state::list", { scope: "sessions" }).catch(() => null),
  };
}

const writeAttempt = JSON.stringify({
  function_id: "state::set",
  payload: { scope: "web-attack", key: "k", value: "written by a web page" },
});

/** Dial a socket path with these headers: "open", or the refused handshake's status. */
function dial(path: string, headers: Record<string, string>): Promise<"open" | number> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${engine.wsUrl}${path}`, { headers });
    ws.on("open", () => {
      ws.close();
      resolve("open");
    });
    ws.on("unexpected-response", (_req, res) => {
      resolve(res.statusCode ?? 0);
      res.resume();
    });
    ws.on("error", () => resolve(0));
  });
}

describe("a page on another origin", () => {
  it("cannot open any of the engine's sockets; a local client and the engine's own page can", async () => {
    const own = engine.url;
    for (const path of ["/", "/ns/default", "/otel", "/_iii/streams", "/ns/default/_iii/streams", "/ws/channels/x?key=k&dir=read"]) {
      expect(await dial(path, { Origin: EVIL }), `${path} from ${EVIL}`).toBe(403);
      expect(await dial(path, { Origin: "null" }), `${path} from an opaque origin`).toBe(403);
      expect(await dial(path, { Origin: own, "Sec-Fetch-Site": "cross-site" }), `${path} cross-site`).toBe(403);
      // Another port of the same host is another origin (a browser calls it same-site).
      expect(await dial(path, { Origin: "http://127.0.0.1:1" }), `${path} from another port`).toBe(403);
    }
    expect(await dial("/", {})).toBe("open");
    expect(await dial("/", { Origin: own })).toBe("open");
    expect(await dial("/_iii/streams", { Origin: own })).toBe("open");
  });

  it("cannot write state or start a turn with a text/plain or form POST; nothing changes", async () => {
    const before = await snapshot();
    for (const type of ["text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const cross = await raw("POST", "/_iii/invoke", { "content-type": type, Origin: EVIL, "Sec-Fetch-Site": "cross-site" }, writeAttempt);
      expect(cross.status, type).toBe(403);
      expect(cross.body.error?.code).toBe("forbidden");
      const turn = await raw(
        "POST",
        "/api/turns",
        { "content-type": type, Origin: EVIL },
        JSON.stringify({ message: "spend the developer's credit" }),
      );
      expect(turn.status, `/api/turns ${type}`).toBe(403);
      const mcp = await raw(
        "POST",
        "/mcp",
        { "content-type": type, Origin: EVIL },
        JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      );
      expect(mcp.status, `/mcp ${type}`).toBe(403);
      // From the engine's own origin too: a JSON endpoint takes JSON from a browser.
      const own = await raw(
        "POST",
        "/_iii/invoke",
        { "content-type": type, Origin: engine.url, "Sec-Fetch-Site": "same-origin" },
        writeAttempt,
      );
      expect(own.status, `own page ${type}`).toBe(415);
      expect(own.body.error?.code).toBe("invalid_arguments");
      expect(
        (await raw("POST", "/api/turns", { "content-type": type, Origin: engine.url }, JSON.stringify({ message: "hi" }))).status,
      ).toBe(415);
      expect(
        (
          await raw(
            "POST",
            "/mcp",
            { "content-type": type, Origin: engine.url },
            JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
          )
        ).status,
      ).toBe(415);
    }
    // curl's `-d` default (a form) is refused from any client: a form body is never JSON.
    expect((await raw("POST", "/_iii/invoke", { "content-type": "application/x-www-form-urlencoded" }, writeAttempt)).status).toBe(415);
    expect(await snapshot()).toEqual(before);
    // The same write as JSON from a local program goes through: the refusals above were about the
    // request's origin and type, not the write.
    expect(await call("state::set", { scope: "web-attack-control", key: "k", value: 1 })).toBeDefined();
    // A local program's text/plain (Node's fetch sends a string body so) is still taken.
    expect(
      (
        await raw(
          "POST",
          "/_iii/invoke",
          { "content-type": "text/plain;charset=UTF-8" },
          JSON.stringify({ function_id: "state::get", payload: { scope: "web-attack-control", key: "k" } }),
        )
      ).body.result,
    ).toBe(1);
  });

  it("cannot get a console token", async () => {
    const r = await raw("GET", "/_console/token", { Origin: EVIL, "Sec-Fetch-Site": "cross-site" });
    expect(r.status).toBe(403);
    expect(r.body.token).toBeUndefined();
  });
});

describe("a proxy in front of the loopback engine", () => {
  const forwarded: Record<string, string>[] = [
    { "X-Forwarded-For": "203.0.113.9" },
    { "X-Forwarded-For": "127.0.0.1, 203.0.113.9" },
    { Forwarded: "for=203.0.113.9;proto=https" },
    { Forwarded: 'for="[2001:db8::1]:4711"' },
    { Forwarded: "for=_hidden" },
    { "X-Real-IP": "203.0.113.9" },
    { "CF-Connecting-IP": "203.0.113.9" },
    { "X-Forwarded-Host": "engine.example.com" },
  ];

  it("makes every forwarded client non-local: refused on sockets and the HTTP API, nothing changes", async () => {
    const before = await snapshot();
    for (const h of forwarded) {
      const r = await raw("POST", "/_iii/invoke", { ...JSON_TYPE, ...h }, writeAttempt);
      expect(r.status, JSON.stringify(h)).toBe(403);
      expect(r.body.error?.code).toBe("unauthorized");
      expect(await dial("/", h), JSON.stringify(h)).toBe(403);
      expect(await dial("/ws/channels/x?key=k&dir=read", h), `channel ${JSON.stringify(h)}`).toBe(403);
    }
    expect(await snapshot()).toEqual(before);
  });

  it("a proxy that names a loopback client keeps it local", async () => {
    const local: Record<string, string>[] = [{ "X-Forwarded-For": "127.0.0.1" }, { Forwarded: 'for="[::1]:5000"' }, { "X-Real-IP": "::1" }];
    for (const h of local) {
      const r = await raw(
        "POST",
        "/_iii/invoke",
        { ...JSON_TYPE, ...h },
        JSON.stringify({ function_id: "engine::functions::list", payload: {} }),
      );
      expect(r.status, JSON.stringify(h)).toBe(200);
    }
  });
});

describe("ALLOWED_ORIGINS", () => {
  it("lets a listed dev server's page dial the open engine (the browser SDK from a Vite app); a wildcard or junk entry opens nothing", async () => {
    const before = await snapshot();
    expect(await dial("/", { Origin: DEV_APP, "Sec-Fetch-Site": "same-site" })).toBe("open");
    expect(await dial("/_iii/streams", { Origin: DEV_APP })).toBe("open");
    // Another port of the same host is another origin; `*` in the list was left out.
    expect(await dial("/", { Origin: "http://localhost:5174" })).toBe(403);
    expect(await dial("/", { Origin: EVIL })).toBe(403);
    const r = await raw("POST", "/_iii/invoke", { ...JSON_TYPE, Origin: EVIL, "Sec-Fetch-Site": "cross-site" }, writeAttempt);
    expect(r.status).toBe(403);
    expect(await snapshot()).toEqual(before);
  });
});
