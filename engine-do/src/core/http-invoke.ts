// HTTP-invoked functions (protocol/README.md §9): URL validation and the outbound request with its
// response mapping (the signature is protocol's, `iiiSignature`). Web standard APIs only; the
// engine's dispatcher calls `invokeHttpFunction` for functions registered with `invocation`, through
// the port `httpFunctionsPort` builds from the engine's vars (which secrets a registration may name).
import {
  MAX_FRAME_BYTES,
  DEFAULT_INVOKE_TIMEOUT_MS,
  HTTP_INVOKE_HEADERS,
  iiiSignature,
  type ErrorBody,
  type HttpInvocation,
} from "@iii-edge/protocol";
import type { HttpFunctionPort } from "./ports.ts";

export interface UrlPolicy {
  /** Allow http and private/loopback targets (local development, tests). */
  allowPrivate: boolean;
  /** Host names allowed (`example.com`, `*.example.com`); absent or `["*"]` = any public host. */
  allowlist?: string[];
  /**
   * The addresses a host name resolves to, where the runtime can look them up (Node: dns.lookup).
   * Asked at call time, so a name whose DNS answer is (or later becomes) private is refused then.
   * Without it the name rules hold alone (workerd has no resolver of its own to ask, and deployed
   * Workers' fetch cannot reach a private network anyway).
   */
  resolveHost?: (host: string) => Promise<string[]>;
}

export type UrlCheck = { ok: true } | { ok: false; message: string };

/** Host names that always mean "this machine" or a cloud metadata service. */
const BLOCKED_NAMES = new Set([
  "localhost",
  "localhost.localdomain",
  "metadata",
  "metadata.google.internal",
  "instance-data",
  "ip6-localhost",
  "ip6-loopback",
]);
/** Suffixes of names that resolve only inside a host or a private network. */
const BLOCKED_SUFFIXES = [".localhost", ".local", ".internal", ".home.arpa"];
/** Public names whose DNS answers 127.0.0.1 for themselves and every name under them (services
 * made for local development), and wildcard-DNS services that answer whatever address the name
 * spells (`127.0.0.1.nip.io`, `10-0-0-1.sslip.io`, `7f000001.nip.io`). */
const LOOPBACK_DOMAINS = ["localtest.me", "lvh.me", "vcap.me", "localho.st", "lacolhost.com", "fuf.me", "readme.localtest.me"];
const WILDCARD_IP_DOMAINS = ["nip.io", "sslip.io", "xip.io", "nip.direct", "traefik.me", "backname.io", "local.gd"];
const underDomain = (host: string, domain: string) => host === domain || host.endsWith(`.${domain}`);

/**
 * The address a name spells in one of its labels, as wildcard-DNS services read it: dotted
 * (`127.0.0.1.nip.io`), dashed (`127-0-0-1.sslip.io`, `app-127-0-0-1.sslip.io`) or eight hex digits
 * (`7f000001.nip.io`, read only when `hex`). Null when it spells none.
 */
function spelledV4(host: string, hex: boolean): string | null {
  const dotted = /(?:^|\.)(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})\./.exec(host);
  if (dotted && v4ToInt(dotted[1]!) !== null) return dotted[1]!;
  for (const label of host.split(".")) {
    const dashed = /(?:^|-)(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,3})$/.exec(label);
    if (dashed) {
      const ip = dashed.slice(1, 5).join(".");
      if (v4ToInt(ip) !== null) return ip;
    }
    const hexed = hex ? /(?:^|-)([0-9a-f]{8})$/.exec(label) : null;
    if (hexed) {
      const n = parseInt(hexed[1]!, 16);
      return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
    }
  }
  return null;
}

/** Why a host name is known to lead to this machine or a private network, or null. */
function loopbackByName(host: string): string | null {
  if (LOOPBACK_DOMAINS.some((d) => underDomain(host, d))) return `${host} is a public name that resolves to loopback`;
  if (WILDCARD_IP_DOMAINS.some((d) => underDomain(host, d))) {
    const ip = spelledV4(host, true);
    // A wildcard-DNS name that spells no address is refused too: its answer is whatever its owner says.
    if (!ip) return `${host} is under a wildcard-DNS domain`;
    const why = blockedV4(ip);
    return why ? `${host} resolves to ${ip}, a ${why} address` : null;
  }
  // Elsewhere only the dotted and dashed forms: eight hex digits are as often a hash as an address.
  const ip = spelledV4(host, false);
  const why = ip ? blockedV4(ip) : null;
  return why ? `${host} spells ${ip}, a ${why} address, in its name` : null;
}

/** Why one resolved address may not be called, or null. */
function blockedAddress(ip: string): string | null {
  return ip.includes(":") ? blockedV6(ip.replace(/^\[|\]$/g, "")) : blockedV4(ip);
}

/**
 * The call-time check of a name's DNS answer (UrlPolicy.resolveHost): every address it resolves to
 * must be public. A lookup that fails is left to fetch, which fails the same way.
 */
export async function checkResolvedHost(url: string, policy: UrlPolicy): Promise<UrlCheck> {
  if (policy.allowPrivate || !policy.resolveHost) return { ok: true };
  let host: string;
  try {
    host = new URL(url).hostname.toLowerCase().replace(/\.+$/, "");
  } catch {
    return { ok: false, message: `not a valid URL: ${url.slice(0, 200)}` };
  }
  if (host.startsWith("[") || /^[\d.]+$/.test(host)) return { ok: true }; // a literal: judged already
  let addresses: string[];
  try {
    addresses = await policy.resolveHost(host);
  } catch {
    return { ok: true };
  }
  for (const ip of addresses) {
    const why = blockedAddress(ip);
    if (why) return { ok: false, message: `${host} resolves to ${ip}, a ${why} address` };
  }
  return { ok: true };
}

/** IPv4 ranges that are not public unicast: [first octets as number, prefix length, what]. */
const BLOCKED_V4: [string, number, string][] = [
  ["0.0.0.0", 8, "this network"],
  ["10.0.0.0", 8, "private"],
  ["100.64.0.0", 10, "carrier-grade NAT"],
  ["127.0.0.0", 8, "loopback"],
  ["169.254.0.0", 16, "link-local / cloud metadata"],
  ["172.16.0.0", 12, "private"],
  ["192.0.0.0", 24, "IETF protocol assignments"],
  ["192.0.2.0", 24, "documentation"],
  ["192.88.99.0", 24, "deprecated 6to4 relay anycast"],
  ["192.168.0.0", 16, "private"],
  ["198.18.0.0", 15, "benchmarking"],
  ["198.51.100.0", 24, "documentation"],
  ["203.0.113.0", 24, "documentation"],
  ["224.0.0.0", 4, "multicast"],
  ["240.0.0.0", 4, "reserved / broadcast"],
];

function v4ToInt(ip: string): number | null {
  const parts = ip.split(".");
  if (parts.length !== 4) return null;
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return null;
    n = n * 256 + Number(p);
  }
  return n;
}

function blockedV4(ip: string): string | null {
  const n = v4ToInt(ip);
  if (n === null) return null;
  for (const [base, bits, what] of BLOCKED_V4) {
    const b = v4ToInt(base) ?? 0;
    const size = 2 ** (32 - bits);
    if (n >= b && n < b + size) return what;
  }
  return null;
}

/** Parse an IPv6 literal as serialised by the URL parser (hex hextets, no dotted tail, no
 * brackets) into 8 numbers. */
function parseV6(ip: string): number[] | null {
  const halves = ip.split("::");
  if (halves.length > 2) return null;
  const nums = (part: string) => (part === "" ? [] : part.split(":").map((h) => (/^[0-9a-f]{1,4}$/i.test(h) ? parseInt(h, 16) : NaN)));
  const head = nums(halves[0]);
  const rest = halves.length === 2 ? nums(halves[1]) : [];
  if ([...head, ...rest].some(Number.isNaN)) return null;
  if (halves.length === 1) return head.length === 8 ? head : null;
  const fill = 8 - head.length - rest.length;
  if (fill < 0) return null;
  return [...head, ...new Array<number>(fill).fill(0), ...rest];
}

/** The IPv4 address held in two hextets, dotted. */
const v4In = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/** Judge the IPv4 address an IPv6 form carries (the packet ends up there): why it is refused, or null. */
function embeddedV4(v4: string, form: string): string | null {
  const why = blockedV4(v4);
  return why ? `${why} (${v4} inside ${form})` : null;
}

/**
 * Why an IPv6 literal is not a public unicast target, or null. Every form that carries an IPv4
 * address is unwrapped and the IPv4 judged; anything outside global unicast (2000::/3) is refused.
 * Not caught: NAT64 through an operator's own network-specific prefix (RFC 6052), which looks like
 * any other global address.
 */
function blockedV6(ip: string): string | null {
  const w = parseV6(ip);
  if (!w) return "unparseable IPv6 address";
  const zero = (from: number, to: number) => w.slice(from, to).every((x) => x === 0);
  const [w0, w1, w2, w3, w4, w5, w6, w7] = w as [number, number, number, number, number, number, number, number];
  if (zero(0, 8)) return "unspecified";
  if (zero(0, 7) && w7 === 1) return "loopback";
  if (zero(0, 5) && w5 === 0xffff) return embeddedV4(v4In(w6, w7), "an IPv4-mapped address");
  if (zero(0, 6)) return embeddedV4(v4In(w6, w7), "an IPv4-compatible address");
  // SIIT's IPv4-translated form ::ffff:0:a.b.c.d (RFC 7915).
  if (zero(0, 4) && w4 === 0xffff && w5 === 0) return embeddedV4(v4In(w6, w7), "an IPv4-translated address");
  if (w0 === 0x64 && w1 === 0xff9b) {
    // The well-known NAT64 prefix 64:ff9b::/96 reaches the IPv4 it carries; 64:ff9b:1::/48 is for
    // networks' own translators (RFC 8215), so where it leads is private by definition.
    if (zero(2, 6)) return embeddedV4(v4In(w6, w7), "a NAT64 address");
    return "local-use NAT64";
  }
  // 6to4 (RFC 3056): 2002:AABB:CCDD::/48 is the site behind IPv4 AA.BB.CC.DD.
  if (w0 === 0x2002) return embeddedV4(v4In(w1, w2), "a 6to4 address");
  // Teredo (RFC 4380): 2001:0::/32 + server IPv4 + flags, port and client IPv4, both obfuscated.
  if (w0 === 0x2001 && w1 === 0)
    return embeddedV4(v4In(w2, w3), "a Teredo server field") ?? embeddedV4(v4In(~w6 & 0xffff, ~w7 & 0xffff), "a Teredo client field");
  // ISATAP (RFC 5214): any prefix + interface id 0:5efe or 200:5efe + the host's IPv4.
  if ((w4 === 0 || w4 === 0x200) && w5 === 0x5efe) {
    const why = embeddedV4(v4In(w6, w7), "an ISATAP address");
    if (why) return why;
  }
  if ((w0 & 0xe000) !== 0x2000) {
    if ((w0 & 0xfe00) === 0xfc00) return "unique local (private)";
    if ((w0 & 0xffc0) === 0xfe80) return "link-local";
    if ((w0 & 0xffc0) === 0xfec0) return "site-local";
    if ((w0 & 0xff00) === 0xff00) return "multicast";
    return "non-global (outside 2000::/3)";
  }
  if (w0 === 0x2001 && w1 < 0x200) return "IETF protocol assignment (2001::/23)";
  if ((w0 === 0x2001 && w1 === 0x0db8) || (w0 === 0x3fff && w1 < 0x1000)) return "documentation";
  return null;
}

function hostAllowed(host: string, allowlist: string[] | undefined): boolean {
  if (!allowlist || allowlist.length === 0 || allowlist.includes("*")) return true;
  return allowlist.some((entry) => {
    const e = entry.toLowerCase();
    if (e.startsWith("*.")) return host.endsWith(e.slice(1)) && host.length > e.length - 1;
    return host === e;
  });
}

/**
 * Decide whether the engine may call `url` (§9 default policy): https only, no loopback, private,
 * link-local, CGNAT or metadata targets, unless `allowPrivate`. IPv6 forms that carry an IPv4
 * address (mapped, compatible, translated, NAT64, 6to4, Teredo, ISATAP) are judged by that IPv4.
 * Decimal, hex and octal IPv4 forms are normalised by the WHATWG URL parser before the check.
 * Names are checked without trailing dots. Names known to lead to loopback (`localtest.me`, wildcard-DNS
 * names such as `127.0.0.1.nip.io`) are refused by name; any other name's DNS answer is checked at
 * call time where the runtime can resolve (UrlPolicy.resolveHost, checkResolvedHost).
 */
export function validateInvocationUrl(url: string, policy: UrlPolicy): UrlCheck {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { ok: false, message: `not a valid URL: ${url.slice(0, 200)}` };
  }
  if (u.protocol !== "https:" && !(policy.allowPrivate && u.protocol === "http:")) {
    return { ok: false, message: `${u.protocol} is not allowed (https required${policy.allowPrivate ? " or http" : ""})` };
  }
  if (u.username || u.password) return { ok: false, message: "credentials in the URL are not allowed; use auth" };
  // A name means the same with any number of trailing dots (`localhost.`, `LOCALHOST..`): judge it without them.
  const host = u.hostname.toLowerCase().replace(/\.+$/, "");
  if (!host) return { ok: false, message: "URL has no host" };
  if (!hostAllowed(host, policy.allowlist)) return { ok: false, message: `host ${host} is not in the allowlist` };
  if (policy.allowPrivate) return { ok: true };
  if (host.startsWith("[")) {
    const why = blockedV6(host.slice(1, -1));
    return why ? { ok: false, message: `${host} is a ${why} address` } : { ok: true };
  }
  if (/^[\d.]+$/.test(host)) {
    if (v4ToInt(host) === null) return { ok: false, message: `${host} is not a valid IPv4 address` };
    const why = blockedV4(host);
    return why ? { ok: false, message: `${host} is a ${why} address` } : { ok: true };
  }
  if (BLOCKED_NAMES.has(host) || BLOCKED_SUFFIXES.some((s) => host.endsWith(s))) {
    return { ok: false, message: `${host} names a local or metadata host` };
  }
  const byName = loopbackByName(host);
  if (byName) return { ok: false, message: byName };
  if (!host.includes(".")) return { ok: false, message: `${host} is a single-label (intranet) name` };
  return { ok: true };
}

type AuthType = NonNullable<HttpInvocation["auth"]>["type"];
const AUTH_TYPES: readonly AuthType[] = ["hmac", "bearer", "api_key"];
const AUTH_FIELDS: Record<AuthType, string> = { hmac: "secret_key", bearer: "token_key", api_key: "value_key" };

/**
 * Engine vars that are never an HTTP function's secret, even if listed in HTTP_FUNCTION_SECRETS:
 * the engine's own key and settings.
 */
const ENGINE_OWN_VARS = new Set([
  "AUTH_SECRET",
  "AUTH_FUNCTION",
  "HTTP_FUNCTION_SECRETS",
  "ALLOW_PRIVATE_HTTP_FUNCTIONS",
  "HTTP_MIDDLEWARE",
  "HTTP_MAX_BODY_BYTES",
  "EDGE_HOSTS",
  "QUEUES",
]);

/** The env var an invocation's auth names (`secret_key`, `token_key` or `value_key`), if any. */
export function authSecretName(inv: HttpInvocation): string | undefined {
  const a = inv.auth;
  return a?.type === "hmac" ? a.secret_key : a?.type === "bearer" ? a.token_key : a?.type === "api_key" ? a.value_key : undefined;
}

/**
 * Parse HTTP_FUNCTION_SECRETS: `NAME` (any auth type) or `NAME:hmac|bearer|api_key` (only that
 * type: an HMAC key listed as `NAME:hmac` only ever signs, it is never sent as a bearer token),
 * comma-separated. Malformed entries and the engine's own vars are dropped.
 */
export function parseHttpFunctionSecrets(raw: unknown): Map<string, ReadonlySet<AuthType>> {
  const out = new Map<string, Set<AuthType>>();
  if (typeof raw !== "string") return out;
  for (const entry of raw.split(",")) {
    const [name = "", type, extra] = entry
      .trim()
      .split(":")
      .map((s) => s.trim());
    if (!name || extra !== undefined || ENGINE_OWN_VARS.has(name)) continue;
    if (type !== undefined && !(AUTH_TYPES as readonly string[]).includes(type)) continue;
    const types = out.get(name) ?? new Set<AuthType>();
    for (const t of type === undefined ? AUTH_TYPES : [type as AuthType]) types.add(t);
    out.set(name, types);
  }
  return out;
}

/**
 * The engine's HTTP-invoked functions over its vars: the URL policy (private and loopback targets
 * only with ALLOW_PRIVATE_HTTP_FUNCTIONS=true) and the secrets a registration may name — only those
 * listed in HTTP_FUNCTION_SECRETS, with a value. A refusal reads the same whether or not a var of
 * that name exists, and no secret value ever appears in a message.
 */
export function httpFunctionsPort(vars: Record<string, unknown>): HttpFunctionPort {
  const policy: UrlPolicy = { allowPrivate: vars.ALLOW_PRIVATE_HTTP_FUNCTIONS === "true" };
  const offered = parseHttpFunctionSecrets(vars.HTTP_FUNCTION_SECRETS);
  /** The secret an invocation's auth may use, or the refusal; undefined when it names none. */
  const secretFor = (inv: HttpInvocation): { name: string; value: string } | { refused: string } | undefined => {
    const name = authSecretName(inv);
    if (name === undefined || !inv.auth) return undefined;
    const value = vars[name];
    if (offered.get(name)?.has(inv.auth.type) && typeof value === "string" && value !== "") return { name, value };
    // The same words for every name, set or not: a refusal must not tell which vars exist.
    return {
      refused: `auth.${AUTH_FIELDS[inv.auth.type]} is not a secret this engine offers to HTTP-invoked functions (${inv.auth.type}; see HTTP_FUNCTION_SECRETS)`,
    };
  };
  return {
    validate(inv) {
      const url = validateInvocationUrl(inv.url, policy);
      if (!url.ok) return url;
      const secret = secretFor(inv);
      return secret && "refused" in secret ? { ok: false, message: secret.refused } : { ok: true };
    },
    async invoke(fn, data, invocationId, trace) {
      const secret = secretFor(fn.invocation);
      if (secret && "refused" in secret)
        return { ok: false, error: { code: "http_request_failed", message: `${fn.id}: ${secret.refused}` } };
      const secrets = secret ? { [secret.name]: secret.value } : {};
      const opts: HttpInvokeOptions = { secrets, invocationId, urlPolicy: policy };
      if (trace) opts.trace = trace;
      const r = await invokeHttpFunction(fn, data, opts);
      return "error" in r ? { ok: false, error: r.error } : { ok: true, result: r.result };
    },
  };
}

export interface HttpInvokeOptions {
  /** Engine environment: auth `*_key` values name entries here. */
  secrets: Record<string, string | undefined>;
  /** Sent as `x-iii-Invocation-ID`. */
  invocationId: string;
  /** The call's trace context, sent as the W3C `traceparent` / `baggage` headers (§4.8). */
  trace?: { traceparent?: string; baggage?: string };
  now?: () => number;
  fetch?: typeof fetch;
  /** When `invocation.timeout_ms` is absent (default 30 s, as iii). */
  defaultTimeoutMs?: number;
  /** Re-check the URL before calling (the engine also checks at registration). */
  urlPolicy?: UrlPolicy;
}

const encoder = new TextEncoder();

function isErrorBody(v: unknown): v is ErrorBody {
  return !!v && typeof v === "object" && typeof (v as ErrorBody).code === "string";
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** Call an HTTP-invoked function once and map its response (§9). Never throws. */
export async function invokeHttpFunction(
  fn: { id: string; invocation: HttpInvocation },
  data: unknown,
  opts: HttpInvokeOptions,
): Promise<{ result?: unknown } | { error: ErrorBody }> {
  const inv = fn.invocation;
  if (opts.urlPolicy) {
    const check = validateInvocationUrl(inv.url, opts.urlPolicy);
    if (!check.ok) return { error: { code: "url_validation_failed", message: check.message } };
    const resolved = await checkResolvedHost(inv.url, opts.urlPolicy);
    if (!resolved.ok) return { error: { code: "url_validation_failed", message: resolved.message } };
  }
  const method = inv.method ?? "POST";
  // fetch refuses a body on GET; such a function gets its data nowhere but is still signed
  // (over the empty body).
  const bodyText = method === "GET" ? "" : JSON.stringify(data ?? null);
  const bodyBytes = encoder.encode(bodyText);
  const timestamp = String(Math.floor((opts.now ?? Date.now)() / 1000));
  const headers = new Headers({
    "Content-Type": "application/json",
    [HTTP_INVOKE_HEADERS.functionPath]: fn.id,
    [HTTP_INVOKE_HEADERS.invocationId]: opts.invocationId,
    [HTTP_INVOKE_HEADERS.timestamp]: timestamp,
  });
  if (opts.trace?.traceparent) headers.set("traceparent", opts.trace.traceparent);
  if (opts.trace?.baggage) headers.set("baggage", opts.trace.baggage);
  for (const [k, v] of Object.entries(inv.headers ?? {})) headers.set(k, v);
  const auth = inv.auth;
  if (auth) {
    const key = auth.type === "hmac" ? auth.secret_key : auth.type === "bearer" ? auth.token_key : auth.value_key;
    const secret = opts.secrets[key];
    // Never send an unauthenticated request in place of an authenticated one.
    if (!secret) return { error: { code: "http_request_failed", message: `auth secret ${key} is not set on the engine` } };
    if (auth.type === "hmac") headers.set(HTTP_INVOKE_HEADERS.signature, await iiiSignature(secret, timestamp, bodyBytes));
    else if (auth.type === "bearer") headers.set("Authorization", `Bearer ${secret}`);
    else headers.set(auth.header, secret);
  }

  const timeoutMs = inv.timeout_ms ?? opts.defaultTimeoutMs ?? DEFAULT_INVOKE_TIMEOUT_MS;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const doFetch = opts.fetch ?? fetch;
  let status: number;
  let text: string;
  try {
    const res = await doFetch(inv.url, {
      method,
      headers,
      body: method === "GET" ? undefined : bodyBytes,
      redirect: "manual", // §9: redirects are not followed
      signal: controller.signal,
    });
    status = res.status;
    const buf = await res.arrayBuffer();
    // A result must fit in one frame back to the caller.
    if (buf.byteLength > MAX_FRAME_BYTES) {
      return { error: { code: "http_response_failed", message: `response of ${buf.byteLength} bytes exceeds ${MAX_FRAME_BYTES}` } };
    }
    text = new TextDecoder().decode(buf);
  } catch (err) {
    if (controller.signal.aborted)
      return { error: { code: "http_request_failed", message: `${fn.id}: no response within ${timeoutMs} ms` } };
    return { error: { code: "http_request_failed", message: `${fn.id}: ${err instanceof Error ? err.message : String(err)}` } };
  } finally {
    clearTimeout(timer);
  }

  const empty = text.trim() === "";
  if (status >= 200 && status < 300) {
    if (empty) return {};
    const parsed = parseJson(text);
    return parsed.ok
      ? { result: parsed.value }
      : { error: { code: "invalid_response", message: `${fn.id}: HTTP ${status} with a non-JSON body` } };
  }
  if (status >= 300 && status < 400) {
    const parsed = empty ? { ok: false as const } : parseJson(text);
    return parsed.ok ? { result: parsed.value } : {};
  }
  if (status >= 400) {
    const parsed = empty ? { ok: false as const } : parseJson(text);
    if (parsed.ok && parsed.value && typeof parsed.value === "object") {
      const e = (parsed.value as { error?: unknown }).error;
      if (isErrorBody(e)) return { error: { code: e.code, message: typeof e.message === "string" ? e.message : `HTTP ${status}` } };
    }
    return { error: { code: "http_error", message: `HTTP ${status}` } };
  }
  // Status 0 (an opaque redirect in browsers) or 1xx: nothing usable came back.
  return { error: { code: "http_response_failed", message: `${fn.id}: unexpected HTTP status ${status}` } };
}
