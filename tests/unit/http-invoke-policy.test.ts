// HTTP-invoked functions' guards (engine-do/src/core/http-invoke.ts): the URL policy against every
// IPv6 form that carries an IPv4 address and against trailing-dot names (property tests), and the
// secrets port: only HTTP_FUNCTION_SECRETS names, one refusal text for every other name, no secret
// value in any message.
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { httpFunctionsPort, parseHttpFunctionSecrets, validateInvocationUrl } from "@iii-edge/engine-do/core/http-invoke.ts";
import type { HttpInvocation } from "@iii-edge/protocol";

const strict = { allowPrivate: false };
const refused = (url: string) => !validateInvocationUrl(url, strict).ok;
const byte = fc.integer({ min: 0, max: 255 });
const hextet = fc.integer({ min: 0, max: 0xffff });
const hex = (n: number) => n.toString(16);

/** Ranges that are never a public target: [base, prefix length]. */
const BLOCKED_V4_RANGES: [number[], number][] = [
  [[0, 0, 0, 0], 8],
  [[10, 0, 0, 0], 8],
  [[100, 64, 0, 0], 10],
  [[127, 0, 0, 0], 8],
  [[169, 254, 0, 0], 16],
  [[172, 16, 0, 0], 12],
  [[192, 168, 0, 0], 16],
  [[192, 0, 0, 0], 24],
  [[198, 18, 0, 0], 15],
  [[224, 0, 0, 0], 4],
  [[240, 0, 0, 0], 4],
];
const toInt = (b: number[]) => ((b[0]! << 24) >>> 0) + (b[1]! << 16) + (b[2]! << 8) + b[3]!;
const blockedV4 = fc
  .tuple(fc.constantFrom(...BLOCKED_V4_RANGES), fc.integer({ min: 0, max: 2 ** 24 - 1 }))
  .map(([[base, bits], offset]) => (toInt(base) + (offset % 2 ** (32 - bits))) >>> 0);
/** A public IPv4 address (as the policy itself judges a plain IPv4 URL). */
const publicV4 = fc
  .tuple(byte, byte, byte, byte)
  .map((b) => toInt(b))
  .filter((n) => !refused(`https://${dotted(n)}/`));
const dotted = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
const hi = (n: number) => hex(n >>> 16);
const lo = (n: number) => hex(n & 0xffff);

/** Every IPv6 form that carries IPv4 address `n`, as a URL. */
const embeddings = (n: number, h: number[]): [string, string][] => [
  ["IPv4-mapped", `https://[::ffff:${hi(n)}:${lo(n)}]/`],
  ["IPv4-mapped dotted", `https://[::ffff:${dotted(n)}]/`],
  ["IPv4-compatible", `https://[::${hi(n)}:${lo(n)}]/`],
  ["IPv4-translated (SIIT)", `https://[::ffff:0:${hi(n)}:${lo(n)}]/`],
  ["IPv4-translated dotted", `https://[::ffff:0:${dotted(n)}]/`],
  ["NAT64 well-known", `https://[64:ff9b::${hi(n)}:${lo(n)}]/`],
  ["NAT64 dotted", `https://[64:ff9b::${dotted(n)}]/`],
  ["6to4", `https://[2002:${hi(n)}:${lo(n)}:${hex(h[0]!)}::${hex(h[1]!)}]/`],
  // The other Teredo field holds 8.8.8.8 (the client one obfuscated: f7f7:f7f7).
  ["Teredo server", `https://[2001:0:${hi(n)}:${lo(n)}:${hex(h[0]!)}:${hex(h[1]!)}:f7f7:f7f7]/`],
  ["Teredo client", `https://[2001:0:808:808:${hex(h[0]!)}:${hex(h[1]!)}:${hex((~n >>> 16) & 0xffff)}:${hex(~n & 0xffff)}]/`],
  ["ISATAP", `https://[2606:4700:${hex(h[0]!)}:${hex(h[1]!)}:0:5efe:${hi(n)}:${lo(n)}]/`],
  ["ISATAP (u bit)", `https://[2606:4700:${hex(h[0]!)}:${hex(h[1]!)}:200:5efe:${dotted(n)}]/`],
];

describe("validateInvocationUrl: IPv6 that carries an IPv4 address", () => {
  it.each([
    "https://[::ffff:0:7f00:1]/",
    "https://[64:ff9b:1::7f00:1]/",
    "https://[64:ff9b:1::8.8.8.8]/",
    "https://[2002:7f00:1::]/",
    "https://[2002:a9fe:a9fe::1]/",
    "https://[2001:0:7f00:1::1]/",
    "https://[2001:0:808:808::80ff:fffe]/", // Teredo client 127.0.0.1, obfuscated
    "https://[2606:4700::5efe:7f00:1]/",
    "https://[::7f00:1]/",
    "https://[100::1]/",
    "https://[5f00::1]/",
    "https://[2001:2::1]/",
    "https://[2001:20::1]/",
    "https://[3fff::1]/",
    "https://[2001:db8::1]/",
    "https://[ff02::1]/",
  ])("refuses %s", (url) => {
    expect(validateInvocationUrl(url, strict)).toMatchObject({ ok: false, message: expect.stringMatching(/address$/) });
  });

  it("names the IPv4 it found and the form it was in", () => {
    expect(validateInvocationUrl("https://[2002:7f00:1::]/", strict)).toEqual({
      ok: false,
      message: "[2002:7f00:1::] is a loopback (127.0.0.1 inside a 6to4 address) address",
    });
  });

  it("property: every embedding of a non-public IPv4 is refused", () => {
    fc.assert(
      fc.property(blockedV4, fc.array(hextet, { minLength: 4, maxLength: 4 }), (n, h) => {
        for (const [form, url] of embeddings(n, h)) expect(refused(url), `${form} ${url} (${dotted(n)})`).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it("property: embeddings of a public IPv4 are judged by it (allowed), except local-use NAT64", () => {
    fc.assert(
      fc.property(publicV4, fc.array(hextet, { minLength: 4, maxLength: 4 }), (n, h) => {
        for (const [form, url] of embeddings(n, h)) {
          if (form === "IPv4-compatible" && n >>> 16 === 0) continue; // ::a.b shares its form with ::1-style addresses
          expect(validateInvocationUrl(url, strict), `${form} ${url}`).toEqual({ ok: true });
        }
        expect(refused(`https://[64:ff9b:1::${hi(n)}:${lo(n)}]/`)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it("property: IPv6 outside global unicast (2000::/3) is refused", () => {
    const nonGlobal = fc
      .tuple(hextet, fc.array(hextet, { minLength: 7, maxLength: 7 }))
      .filter(([w0]) => (w0 & 0xe000) !== 0x2000 && w0 !== 0x64 && w0 !== 0);
    fc.assert(fc.property(nonGlobal, ([w0, rest]) => refused(`https://[${[w0, ...rest].map(hex).join(":")}]/`)));
  });
});

describe("validateInvocationUrl: names", () => {
  const casing = (s: string) =>
    fc
      .array(fc.boolean(), { minLength: s.length, maxLength: s.length })
      .map((up) => [...s].map((ch, i) => (up[i] ? ch.toUpperCase() : ch)).join(""));
  const dots = fc.integer({ min: 0, max: 4 }).map((n) => ".".repeat(n));

  it.each([
    "https://localhost./",
    "https://LOCALHOST../",
    "https://foo.localhost./",
    "https://metadata.google.internal../",
    "https://127.0.0.1../",
    "https://intranet../",
  ])("refuses %s", (url) => {
    expect(refused(url)).toBe(true);
  });

  it("property: localhost and local suffixes are refused in any case, with any trailing dots, under any label", () => {
    const name = fc.constantFrom("localhost", "localhost.localdomain", "ip6-localhost", "metadata", "instance-data");
    const local = fc
      .tuple(fc.stringMatching(/^[a-z0-9-]{1,12}$/), fc.constantFrom(".localhost", ".local", ".internal", ".home.arpa"))
      .map(([l, s]) => l + s);
    fc.assert(
      fc.property(fc.oneof(name, local).chain(casing), dots, (host, trail) => {
        expect(refused(`https://${host}${trail}/x`), `${host}${trail}`).toBe(true);
      }),
    );
  });

  it("still allows public names, with or without a trailing dot", () => {
    expect(validateInvocationUrl("https://example.com./hook", strict)).toEqual({ ok: true });
    expect(validateInvocationUrl("https://api.example.com/hook", strict)).toEqual({ ok: true });
  });
});

describe("parseHttpFunctionSecrets", () => {
  it("reads NAME and NAME:type entries, drops malformed ones and the engine's own vars", () => {
    const m = parseHttpFunctionSecrets(" HOOK_TOKEN , SIGN_KEY:hmac,,BAD:nope,A:b:c,AUTH_SECRET,QUEUES:bearer");
    expect([...m.keys()]).toEqual(["HOOK_TOKEN", "SIGN_KEY"]);
    expect([...m.get("HOOK_TOKEN")!]).toEqual(["hmac", "bearer", "api_key"]);
    expect([...m.get("SIGN_KEY")!]).toEqual(["hmac"]);
    expect(parseHttpFunctionSecrets(undefined).size).toBe(0);
    expect(parseHttpFunctionSecrets("").size).toBe(0);
  });
});

describe("httpFunctionsPort: secrets", () => {
  const SECRET_VALUES = {
    HOOK_TOKEN: "hook-token-value-1",
    SIGN_KEY: "sign-key-value-2",
    AUTH_SECRET: "auth-secret-value-3",
    DB_PASSWORD: "db-password-value-4",
  };
  const vars: Record<string, unknown> = {
    ...SECRET_VALUES,
    QUEUES: '{"default":{}}',
    HTTP_FUNCTION_SECRETS: "HOOK_TOKEN,SIGN_KEY:hmac,AUTH_SECRET,UNSET_BUT_LISTED",
    ALLOW_PRIVATE_HTTP_FUNCTIONS: "false",
    DB: { binding: true },
  };
  const port = httpFunctionsPort(vars);
  const url = "https://hooks.example.com/x";
  const inv = (type: "hmac" | "bearer" | "api_key", name: string): HttpInvocation => ({
    url,
    auth:
      type === "hmac"
        ? { type, secret_key: name }
        : type === "bearer"
          ? { type, token_key: name }
          : { type, header: "x-key", value_key: name },
  });
  const message = (i: HttpInvocation) => {
    const r = port.validate(i);
    return r.ok ? null : r.message;
  };
  const noSecretIn = (text: string) => {
    for (const v of Object.values(SECRET_VALUES)) expect(text).not.toContain(v);
  };
  afterEach(() => vi.unstubAllGlobals());

  it("accepts listed secrets that are set, for the types they are listed for", () => {
    expect(port.validate(inv("bearer", "HOOK_TOKEN"))).toEqual({ ok: true });
    expect(port.validate(inv("api_key", "HOOK_TOKEN"))).toEqual({ ok: true });
    expect(port.validate(inv("hmac", "SIGN_KEY"))).toEqual({ ok: true });
    expect(port.validate({ url })).toEqual({ ok: true });
  });

  it("refuses every other name with one text per auth type, whether or not a var of that name exists", () => {
    for (const type of ["hmac", "bearer", "api_key"] as const) {
      const reference = message(inv(type, "SURELY_NOT_A_VAR_9f3a"));
      expect(reference).toMatch(/HTTP_FUNCTION_SECRETS/);
      // Engine config, an unlisted secret, a listed-but-unset one, a binding, the token key.
      for (const name of [
        "QUEUES",
        "DB_PASSWORD",
        "UNSET_BUT_LISTED",
        "DB",
        "AUTH_SECRET",
        "ALLOW_PRIVATE_HTTP_FUNCTIONS",
        "constructor",
        "__proto__",
      ]) {
        expect(message(inv(type, name)), `${type} ${name}`).toBe(reference);
      }
      noSecretIn(reference!);
    }
    // An HMAC-only key is never handed out as a token or an api key.
    expect(message(inv("bearer", "SIGN_KEY"))).toBe(message(inv("bearer", "SURELY_NOT_A_VAR_9f3a")));
    expect(message(inv("api_key", "SIGN_KEY"))).toBe(message(inv("api_key", "SURELY_NOT_A_VAR_9f3a")));
  });

  it("property: for any name, the refusal is the same as for a name that surely does not exist", () => {
    const existing = fc.constantFrom(...Object.keys(vars));
    fc.assert(
      fc.property(
        fc.oneof(existing, fc.string({ minLength: 1, maxLength: 40 })),
        fc.constantFrom("hmac" as const, "bearer" as const, "api_key" as const),
        (name, type) => {
          const m = message(inv(type, name));
          const allowed = name === "HOOK_TOKEN" || (name === "SIGN_KEY" && type === "hmac");
          expect(m).toBe(allowed ? null : message(inv(type, "SURELY_NOT_A_VAR_9f3a")));
        },
      ),
    );
  });

  it("sends only the named, listed secret, and refuses an unlisted one at call time without a request", async () => {
    const fetchMock = vi.fn(async (_url: string, init: RequestInit) => {
      void init;
      return new Response("{}", { status: 200 });
    });
    vi.stubGlobal("fetch", fetchMock);
    expect(await port.invoke({ id: "h::ok", invocation: inv("bearer", "HOOK_TOKEN") }, {}, "inv-1")).toEqual({ ok: true, result: {} });
    const headers = new Headers(fetchMock.mock.calls[0]![1].headers);
    expect(headers.get("authorization")).toBe("Bearer hook-token-value-1");

    // A function that got past registration some other way is refused before any request.
    const out = await port.invoke({ id: "h::bad", invocation: inv("api_key", "DB_PASSWORD") }, {}, "inv-2");
    expect(out).toEqual({
      ok: false,
      error: { code: "http_request_failed", message: `h::bad: ${message(inv("api_key", "DB_PASSWORD"))}` },
    });
    expect(fetchMock).toHaveBeenCalledTimes(1);
    noSecretIn(JSON.stringify(out));
  });

  it("keeps loopback targets refused unless ALLOW_PRIVATE_HTTP_FUNCTIONS is true", () => {
    expect(port.validate({ url: "http://127.0.0.1:9/x" }).ok).toBe(false);
    expect(httpFunctionsPort({ ALLOW_PRIVATE_HTTP_FUNCTIONS: "true" }).validate({ url: "http://127.0.0.1:9/x" })).toEqual({ ok: true });
  });
});
