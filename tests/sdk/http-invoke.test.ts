// HTTP-invoked functions (protocol/README.md §9): the engine side
// (engine-do/src/core/http-invoke.ts) against a real node:http server on 127.0.0.1, whose handler
// is sdk-edge's receiver — so the signature is checked end to end — plus the response mapping and
// the URL policy.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { invokeHttpFunction, validateInvocationUrl } from "@iii-edge/engine-do/core/http-invoke.ts";
import { httpFunctionHandler, iiiSignature, verifyIIISignature } from "@iii-edge/sdk-edge/http";
import { nodeHttpListener } from "@iii-edge/sdk-edge/http-node";
import { IIIError } from "@iii-edge/sdk-edge/node";

const SECRET = "s3cret-for-tests";
let server: Server;
let base: string;
const seen: { headers: Record<string, string | string[] | undefined>; body: string }[] = [];

const signed = httpFunctionHandler<{ a: number; b: number } | null, unknown>(SECRET, (data, info) => {
  if (info.function_id === "remote::fail") throw new IIIError("not_found", "nothing here");
  if (info.function_id === "remote::void") return undefined;
  return { sum: (data?.a ?? 0) + (data?.b ?? 0), invocation_id: info.invocation_id };
});
const signedListener = nodeHttpListener(signed);

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    const path = req.url ?? "/";
    if (path.startsWith("/signed")) return signedListener(req, res);
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      seen.push({ headers: req.headers, body: Buffer.concat(chunks).toString() });
      const reply = (status: number, body: string, type = "application/json") => {
        res.writeHead(status, { "content-type": type });
        res.end(body);
      };
      if (path === "/empty") return reply(200, "");
      if (path === "/text") return reply(200, "hello", "text/plain");
      if (path === "/redirect") {
        res.writeHead(302, { location: "https://example.com/" });
        return res.end();
      }
      if (path === "/redirect-json") return reply(301, JSON.stringify({ moved: true }));
      if (path === "/remote-error") return reply(422, JSON.stringify({ error: { code: "bad_thing", message: "nope" } }));
      if (path === "/plain-error") return reply(503, "down", "text/plain");
      if (path === "/slow") return void setTimeout(() => reply(200, "{}"), 2_000);
      reply(200, JSON.stringify({ ok: true }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const local = { allowPrivate: true };
const opts = (extra: Partial<Parameters<typeof invokeHttpFunction>[2]> = {}) => ({
  secrets: { HMAC_SECRET: SECRET, TOKEN: "tok-1", API: "key-1" },
  invocationId: "3f1c2a4e-0000-4000-8000-000000000001",
  urlPolicy: local,
  ...extra,
});

describe("invokeHttpFunction", () => {
  it("signs with HMAC and the sdk-edge receiver verifies it and answers", async () => {
    const fn = { id: "remote::add", invocation: { url: `${base}/signed`, auth: { type: "hmac" as const, secret_key: "HMAC_SECRET" } } };
    expect(await invokeHttpFunction(fn, { a: 2, b: 3 }, opts())).toEqual({
      result: { sum: 5, invocation_id: "3f1c2a4e-0000-4000-8000-000000000001" },
    });
    expect(await invokeHttpFunction({ ...fn, id: "remote::fail" }, {}, opts())).toEqual({
      error: { code: "not_found", message: "nothing here" },
    });
    expect(await invokeHttpFunction({ ...fn, id: "remote::void" }, {}, opts())).toEqual({});
  });

  it("is refused by the receiver with a wrong secret or a stale timestamp", async () => {
    const fn = { id: "remote::add", invocation: { url: `${base}/signed`, auth: { type: "hmac" as const, secret_key: "HMAC_SECRET" } } };
    const wrong = await invokeHttpFunction(fn, {}, opts({ secrets: { HMAC_SECRET: "other" } }));
    expect(wrong).toMatchObject({ error: { code: "forbidden" } });
    const stale = await invokeHttpFunction(fn, {}, opts({ now: () => Date.now() - 3_600_000 }));
    expect(stale).toMatchObject({ error: { code: "forbidden", message: expect.stringMatching(/window/) } });
  });

  it("sends the §9 headers, configured headers and bearer / api_key auth", async () => {
    seen.length = 0;
    await invokeHttpFunction(
      {
        id: "h::b",
        invocation: { url: `${base}/ok`, method: "PUT", headers: { "x-probe": "yes" }, auth: { type: "bearer", token_key: "TOKEN" } },
      },
      { n: 1 },
      opts({ now: () => 1_700_000_000_000 }),
    );
    await invokeHttpFunction(
      { id: "h::k", invocation: { url: `${base}/ok`, auth: { type: "api_key", header: "x-api-key", value_key: "API" } } },
      null,
      opts(),
    );
    const [a, b] = seen;
    expect(a.headers).toMatchObject({
      "content-type": "application/json",
      "x-iii-function-path": "h::b",
      "x-iii-invocation-id": "3f1c2a4e-0000-4000-8000-000000000001",
      "x-iii-timestamp": "1700000000",
      "x-probe": "yes",
      authorization: "Bearer tok-1",
    });
    expect(a.body).toBe('{"n":1}');
    expect(b.headers["x-api-key"]).toBe("key-1");
    expect(b.body).toBe("null");
  });

  it("computes the signature exactly as specified", async () => {
    const body = new TextEncoder().encode('{"a":1}');
    const sig = await iiiSignature("k", "1700000000", body);
    const { createHmac } = await import("node:crypto");
    const expected = createHmac("sha256", "k")
      .update(`1700000000:${Buffer.from(body).toString("base64")}`)
      .digest("hex");
    expect(sig).toBe(`sha256=${expected}`);
    const req = new Request("http://x/", { method: "POST", body, headers: { "x-iii-signature": sig, "x-iii-timestamp": "1700000000" } });
    expect(await verifyIIISignature(req, "k", { now: () => 1_700_000_010_000 })).toMatchObject({ ok: true, body: '{"a":1}' });
  });

  it("maps responses: empty, JSON, non-JSON, 3xx, remote error, HTTP error", async () => {
    const call = (path: string) => invokeHttpFunction({ id: "m::x", invocation: { url: `${base}${path}` } }, {}, opts());
    expect(await call("/empty")).toEqual({});
    expect(await call("/ok")).toEqual({ result: { ok: true } });
    expect(await call("/text")).toMatchObject({ error: { code: "invalid_response" } });
    expect(await call("/redirect")).toEqual({});
    expect(await call("/redirect-json")).toEqual({ result: { moved: true } });
    expect(await call("/remote-error")).toEqual({ error: { code: "bad_thing", message: "nope" } });
    expect(await call("/plain-error")).toEqual({ error: { code: "http_error", message: "HTTP 503" } });
  });

  it("maps network failures and timeouts to http_request_failed; refuses missing secrets and bad URLs", async () => {
    const closed = await invokeHttpFunction({ id: "n::x", invocation: { url: "http://127.0.0.1:1/" } }, {}, opts());
    expect(closed).toMatchObject({ error: { code: "http_request_failed" } });
    const t0 = Date.now();
    const slow = await invokeHttpFunction({ id: "n::slow", invocation: { url: `${base}/slow`, timeout_ms: 200 } }, {}, opts());
    expect(slow).toMatchObject({ error: { code: "http_request_failed", message: expect.stringMatching(/200 ms/) } });
    expect(Date.now() - t0).toBeLessThan(1_500);
    const noSecret = await invokeHttpFunction(
      { id: "n::s", invocation: { url: `${base}/ok`, auth: { type: "bearer", token_key: "MISSING" } } },
      {},
      opts(),
    );
    expect(noSecret).toMatchObject({ error: { code: "http_request_failed", message: expect.stringMatching(/MISSING/) } });
    const blocked = await invokeHttpFunction(
      { id: "n::b", invocation: { url: `${base}/ok` } },
      {},
      opts({ urlPolicy: { allowPrivate: false } }),
    );
    expect(blocked).toMatchObject({ error: { code: "url_validation_failed" } });
  });
});

describe("validateInvocationUrl", () => {
  const strict = { allowPrivate: false };
  it.each([
    "http://example.com/hook",
    "https://127.0.0.1/",
    "https://2130706433/",
    "https://0x7f000001/",
    "https://0177.0.0.1/",
    "https://10.1.2.3/",
    "https://172.20.0.1/",
    "https://192.168.1.1/",
    "https://100.64.0.1/",
    "https://169.254.169.254/latest/meta-data",
    "https://0.0.0.0/",
    "https://[::1]/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:a9fe:a9fe]/",
    "https://[fe80::1]/",
    "https://[fd00:ec2::254]/",
    "https://localhost/",
    "https://api.localhost/",
    "https://metadata.google.internal/",
    "https://intranet/",
    "https://user:pw@example.com/",
    "ftp://example.com/",
    "not a url",
  ])("refuses %s", (url) => {
    expect(validateInvocationUrl(url, strict).ok).toBe(false);
  });

  it.each(["https://example.com/hook", "https://8.8.8.8/", "https://[2606:4700::1111]/", "https://[::ffff:8.8.8.8]/"])(
    "allows %s",
    (url) => {
      expect(validateInvocationUrl(url, strict)).toEqual({ ok: true });
    },
  );

  it("allows private and http targets only when configured, and applies the allowlist", () => {
    expect(validateInvocationUrl("http://127.0.0.1:8080/", { allowPrivate: true })).toEqual({ ok: true });
    expect(validateInvocationUrl("https://a.example.com/", { allowPrivate: false, allowlist: ["*.example.com"] })).toEqual({ ok: true });
    expect(validateInvocationUrl("https://example.org/", { allowPrivate: false, allowlist: ["*.example.com"] }).ok).toBe(false);
    expect(validateInvocationUrl("https://example.com/", { allowPrivate: false, allowlist: ["*"] })).toEqual({ ok: true });
  });
});
