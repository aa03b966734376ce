// The `http` trigger type (protocol/README.md §8.1). A binding {api_path, http_method} is a route;
// the route table is rebuilt from the stored bindings on wake (SQLite is the truth). The Worker
// front door (../../http-routes.ts) forwards every non-reserved request to the object of its
// namespace (`Engine.httpRequest`), which matches it here, runs middleware, the condition and the
// function, and maps the function's {status_code, headers, body} onto the response.
//
// Channels (§8.1, §10): every call gets `request_body` (a reader ref whose channel holds the raw
// body, then ends; a body past the front door's inline bound is streamed into it as it arrives)
// and `response` (a writer ref). Both are request channels of
// ../channels/hub.ts: in memory, removed when the request ends. A function that returns nothing
// and attached the response writer is answered in streaming mode (control texts, then the body).
//
// iii-edge differences, on purpose: `body` also carries text/* bodies as a string; a function
// result that is not {status_code?, headers?, body?} is sent as the JSON body; config `timeout_ms`
// sets the request deadline (default 30 s), streamed bodies included; an empty result waits at most
// RESPONSE_ATTACH_GRACE_MS for the response writer before it is answered as `{}`.
import { OPEN_GRANT, TRIGGER_TYPES, type CallOutcome, isRecord } from "@iii-edge/protocol";
import type { TriggerRecord } from "../catalog.ts";
import type { EngineApi } from "../api.ts";
import type { ChannelHub, RequestChannels } from "../channels/hub.ts";
import { traceFromHeaders } from "../trace.ts";
import { endHttpServer, httpServerSpan } from "../telemetry/hops.ts";
import type { ActiveSpan } from "../telemetry/telemetry.ts";

/** Overall deadline of one HTTP-triggered request unless the binding sets `timeout_ms` (iii: 30 s). */
export const HTTP_REQUEST_TIMEOUT_MS = 30_000;
/**
 * How long an empty result waits for the function's `response` writer to attach. The SDK opens the
 * channel socket only when the handler first writes, and its result travels on the already open
 * control socket, so the result nearly always arrives first; the grace covers a WebSocket handshake
 * across the internet. A function returning nothing without using the channel pays it once.
 */
export const RESPONSE_ATTACH_GRACE_MS = 1_000;
/** Longest api_path (bounds matching work). */
const MAX_PATH_LENGTH = 1024;
/** Most middleware functions per route. */
const MAX_MIDDLEWARES = 16;
export const HTTP_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"] as const;

/**
 * Paths the front door keeps for itself (index.ts) and the demo app's static files. A route here
 * would never be reached, so registration refuses it. Top-level paths with a static-file
 * extension are refused too: the asset layer answers them before the Worker runs.
 */
const RESERVED_EXACT = new Set([
  "",
  "healthz",
  "otel",
  "mcp",
  "_console",
  "ns",
  "ws",
  "_iii",
  "index.html",
  "sdk",
  "assets",
  "favicon.ico",
  "robots.txt",
]);
const RESERVED_PREFIXES = ["ns/", "ws/", "_iii/", "sdk/", "assets/", "_console/"];
const STATIC_EXTENSION = /\.(html?|js|mjs|css|map|ico|png|jpe?g|gif|svg|webp|txt|webmanifest|woff2?)$/i;

/**
 * Where the front door puts a caller's engine token (an `Authorization` it verified against
 * AUTH_SECRET) instead of `authorization` (../../http-routes.ts). Only functions the deployment
 * hosts itself (Worker-hosted, kind `edge`: the harness's HTTP API) get it back as `authorization`;
 * a tenant's middleware, condition or function never sees the engine's credentials.
 */
export const ENGINE_CREDENTIAL_HEADER = "x-iii-engine-credential";

export function normalizePath(p: string): string {
  return p
    .replace(/^\/+/, "")
    .replace(/\/+$/, "")
    .replace(/\/{2,}/g, "/");
}

export function reservedReason(pattern: string): string | undefined {
  const p = normalizePath(pattern);
  if (RESERVED_EXACT.has(p)) return `'/${p}' is reserved by the engine`;
  for (const pre of RESERVED_PREFIXES) if (p.startsWith(pre)) return `'/${p}' is under the engine's reserved prefix '/${pre}*'`;
  if (!p.includes("/") && STATIC_EXTENSION.test(p)) return `'/${p}' looks like a static asset of the demo app (served before any route)`;
  return undefined;
}

/**
 * Do two bindings have the same owner? Worker and Worker-hosted bindings compare their owner;
 * engine-held ones (owner null, from engine::register_trigger) the principal that made them, a
 * binding made without one counting as the open engine's "anonymous".
 */
export function sameOwner(a: TriggerRecord, b: TriggerRecord): boolean {
  if (a.owner !== null || b.owner !== null) return a.owner === b.owner;
  return (a.principal ?? OPEN_GRANT.sub) === (b.principal ?? OPEN_GRANT.sub);
}

/**
 * Why a decoded path param is refused, or undefined. A param is one segment: a `/` or `\` (from
 * `%2F`, `%5C`), a `.`/`..` or a NUL would let a handler that builds a path from it escape its root.
 */
export function unsafePathParam(value: string): string | undefined {
  if (value === "." || value === "..") return "is a dot segment";
  if (/[/\\\0]/.test(value)) return "contains '/', '\\' or NUL";
  return undefined;
}

interface Route {
  binding: TriggerRecord;
  method: string;
  pattern: string;
  segments: string[];
  /** Shape key: params replaced by ':' (two routes with the same shape collide). */
  shape: string;
}

export interface HttpTriggerConfig {
  api_path: string;
  http_method?: string;
  condition_function_id?: string;
  middleware_function_ids?: string[];
  timeout_ms?: number;
}

/** A request as the front door hands it over RPC (plain data: structured-clone friendly). */
export interface HttpTriggerRequest {
  method: string;
  /** URL path, still percent-encoded. */
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
  /**
   * Raw body bytes (or, from tests and older callers, its UTF-8 text); null when there is none. A
   * body over the front door's inline bound (a frame, 1 MiB) with a declared length arrives as the
   * upload itself: it is streamed into `request_body`, and `body` is null.
   */
  body: Uint8Array | string | ReadableStream<Uint8Array> | null;
}
export interface HttpTriggerResponse {
  /** false: no route matched (the front door may then try static assets). */
  matched: boolean;
  status: number;
  headers: [string, string][];
  /** A stream in the streaming mode (crosses the RPC boundary to the front door as a byte stream). */
  body: string | ReadableStream<Uint8Array> | null;
}

const TIMEOUT = Symbol("timeout");
const encoder = new TextEncoder();

const json = (status: number, body: unknown, matched = true): HttpTriggerResponse => ({
  matched,
  status,
  headers: [["content-type", "application/json"]],
  body: JSON.stringify(body),
});

function parseConfig(config: unknown): { ok: true; c: HttpTriggerConfig; method: string; pattern: string } | { ok: false; error: string } {
  if (!isRecord(config))
    return { ok: false, error: "config must be {api_path, http_method?, condition_function_id?, middleware_function_ids?}" };
  if (typeof config.api_path !== "string" || !config.api_path.trim()) return { ok: false, error: "api_path is required" };
  if (config.api_path.length > MAX_PATH_LENGTH) return { ok: false, error: `api_path longer than ${MAX_PATH_LENGTH}` };
  const method = (typeof config.http_method === "string" ? config.http_method : "GET").toUpperCase();
  if (!(HTTP_METHODS as readonly string[]).includes(method))
    return { ok: false, error: `http_method must be one of ${HTTP_METHODS.join(" ")}` };
  if (config.condition_function_id !== undefined && typeof config.condition_function_id !== "string")
    return { ok: false, error: "condition_function_id must be a string" };
  const mw = config.middleware_function_ids;
  if (mw !== undefined && (!Array.isArray(mw) || mw.length > MAX_MIDDLEWARES || mw.some((m) => typeof m !== "string" || !m)))
    return { ok: false, error: `middleware_function_ids must be at most ${MAX_MIDDLEWARES} function ids` };
  const t = config.timeout_ms;
  if (t !== undefined && (typeof t !== "number" || !Number.isInteger(t) || t < 1 || t > 15 * 60_000))
    return { ok: false, error: "timeout_ms must be an integer between 1 and 900000" };
  const pattern = normalizePath(config.api_path);
  if (pattern.split("/").some((s) => s === ":")) return { ok: false, error: "a path parameter needs a name (':id')" };
  return { ok: true, c: config as unknown as HttpTriggerConfig, method, pattern };
}

export class HttpRoutes {
  private readonly core: EngineApi;
  /** `METHOD shape` → route; the latest binding for a (method, path) wins (iii: replaces). */
  private readonly routes = new Map<string, Route>();
  /** Global middleware (§8.1), run before every route's own: the `HTTP_MIDDLEWARE` var. */
  private readonly globalMiddleware: string[];
  /** Without a hub, calls get no `request_body`/`response` (core tests that need none). */
  private readonly channels: ChannelHub | undefined;

  constructor(core: EngineApi, globalMiddleware: string[] = [], channels?: ChannelHub) {
    this.core = core;
    this.globalMiddleware = globalMiddleware;
    this.channels = channels;
  }

  install(): void {
    this.core.addTriggerType({
      id: TRIGGER_TYPES.http,
      description:
        "Serves an HTTP route {api_path, http_method?} at the engine's front door; the function's {status_code, headers, body} is the response",
      validate: (config, binding) => {
        const p = parseConfig(config);
        if (!p.ok) return p.error;
        const reserved = reservedReason(p.pattern);
        if (reserved) return `api_path ${reserved}; choose another path`;
        const route = this.toRoute(binding, p.method, p.pattern);
        const existing = this.routes.get(`${route.method} ${route.shape}`);
        // A route belongs to the binding holding it while its owner is connected: another owner
        // would receive its requests (authorization headers included).
        if (existing && this.holderLive(existing.binding) && !sameOwner(existing.binding, binding)) {
          return {
            code: "forbidden",
            message: `${route.method} /${route.pattern} is held by another owner's trigger (as /${existing.pattern}); choose another path`,
          };
        }
        // Same method, same literal segments, parameters in the same places under other names: one
        // request would match both and the names would decide nothing. The first keeps serving; the
        // second is refused (iii's wording, which its SDKs' users search their logs for).
        if (existing && existing.binding.id !== binding.id && existing.pattern !== route.pattern) {
          return `${route.method} /${route.pattern} conflicts with already-registered route /${existing.pattern} (it collides: same shape, different parameter names)`;
        }
        return undefined;
      },
      added: (b) => {
        const p = parseConfig(b.config);
        if (!p.ok) return;
        const r = this.toRoute(b, p.method, p.pattern);
        this.routes.set(`${r.method} ${r.shape}`, r);
      },
      removed: (b) => {
        for (const [k, r] of this.routes) {
          if (r.binding.id !== b.id) continue;
          this.routes.delete(k);
          // Another binding of the same route (replaced earlier) takes over.
          const fallback = this.core.activeBindings(TRIGGER_TYPES.http).find(
            (o) =>
              o.id !== b.id &&
              (() => {
                const p = parseConfig(o.config);
                return p.ok && `${p.method} ${this.toRoute(o, p.method, p.pattern).shape}` === k;
              })(),
          );
          if (fallback) {
            const p = parseConfig(fallback.config);
            if (p.ok) this.routes.set(k, this.toRoute(fallback, p.method, p.pattern));
          }
        }
      },
    });
  }

  /** Is the binding's owner still there? Engine-held and Worker-hosted (`edge:`) bindings always are. */
  private holderLive(b: TriggerRecord): boolean {
    return b.owner === null || b.owner.startsWith("edge:") || this.core.isConnected(b.owner);
  }

  private toRoute(binding: TriggerRecord, method: string, pattern: string): Route {
    const segments = pattern === "" ? [] : pattern.split("/");
    const shape = segments.map((s) => (s.startsWith(":") ? ":" : s)).join("/");
    return { binding, method, pattern, segments, shape };
  }

  /** Find the route for a concrete path: static segments beat parameters, left to right. */
  match(method: string, rawPath: string): { route: Route; params: Record<string, string> } | undefined {
    const parts = normalizePath(rawPath)
      .split("/")
      .filter((s, _i, a) => !(a.length === 1 && s === ""));
    let best: { route: Route; params: Record<string, string>; score: string } | undefined;
    const m = method.toUpperCase();
    for (const route of this.routes.values()) {
      if (route.method !== m && !(m === "HEAD" && route.method === "GET")) continue;
      if (route.segments.length !== parts.length) continue;
      const params: Record<string, string> = {};
      let score = "";
      let ok = true;
      for (let i = 0; i < parts.length; i++) {
        const seg = route.segments[i] as string;
        let part: string;
        try {
          part = decodeURIComponent(parts[i] as string);
        } catch {
          part = parts[i] as string;
        }
        if (seg.startsWith(":")) {
          params[seg.slice(1)] = part;
          score += "1";
        } else if (seg === part) score += "0";
        else {
          ok = false;
          break;
        }
      }
      // An exact method match beats HEAD served by a GET route.
      score += route.method === m ? "0" : "1";
      if (ok && (!best || score < best.score)) best = { route, params, score };
    }
    return best ? { route: best.route, params: best.params } : undefined;
  }

  routeCount(): number {
    return this.routes.size;
  }

  async handle(req: HttpTriggerRequest): Promise<HttpTriggerResponse> {
    if (!this.core.telemetry.tracing) return this.serve(req);
    // The request's server span (telemetry/hops.ts), ended when the response starts.
    const traced: { span?: ActiveSpan } = {};
    const res = await this.serve(req, traced);
    endHttpServer(traced.span, res.status);
    return res;
  }

  private async serve(req: HttpTriggerRequest, traced?: { span?: ActiveSpan }): Promise<HttpTriggerResponse> {
    const found = this.match(req.method, req.path);
    if (!found) return json(404, { error: { code: "not_found", message: "Not Found" } }, false);
    const { route, params } = found;
    for (const [name, value] of Object.entries(params)) {
      const why = unsafePathParam(value);
      if (why) return json(400, { error: { code: "invalid_arguments", message: `path parameter '${name}' ${why} once decoded` } });
    }
    const cfg = route.binding.config as HttpTriggerConfig;
    const timeoutMs = cfg.timeout_ms ?? HTTP_REQUEST_TIMEOUT_MS;
    const deadline = this.core.ports.clock.now() + timeoutMs;
    const left = () => Math.max(1, deadline - this.core.ports.clock.now());
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) headers[k.toLowerCase()] = v;
    const credential = headers[ENGINE_CREDENTIAL_HEADER];
    delete headers[ENGINE_CREDENTIAL_HEADER];
    /** The headers `functionId` is given: the caller's engine token only for the deployment's own. */
    const deployed = (functionId: string) => this.core.catalog.functions.get(functionId)?.kind === "edge";
    const headersFor = (functionId: string): Record<string, string> =>
      credential !== undefined && deployed(functionId) ? { ...headers, authorization: credential } : headers;
    // The function's payload is the condition's too: both must be the deployment's own.
    const functionHeaders =
      cfg.condition_function_id === undefined || deployed(cfg.condition_function_id) ? headersFor(route.binding.function_id) : headers;
    const method = req.method.toUpperCase();
    // The request's own trace context (W3C headers), continued by middleware, condition and function (§4.8).
    const trace = traceFromHeaders((name) => headers[name]);
    if (traced) {
      traced.span = httpServerSpan(this.core.telemetry, { method, path: req.path, route: route.pattern, traceparent: trace.traceparent });
      if (traced.span) trace.traceparent = traced.span.traceparent;
    }

    // Middleware (§8.1): global first, then the route's; each may continue or respond; an error
    // (a missing middleware function included: fail closed) is a 500, a timeout a 504.
    for (const mw of [...this.globalMiddleware, ...(cfg.middleware_function_ids ?? [])]) {
      const out = await this.core.invoke({
        function_id: mw,
        data: {
          phase: "preHandler",
          request: { path_params: params, query_params: req.query, headers: headersFor(mw), method },
          context: {},
        },
        timeoutMs: left(),
        ...trace,
      });
      if (!out.ok) {
        if (out.error.code === "timeout") return json(504, { error: { code: "middleware_timeout", message: out.error.message } });
        return this.errorResponse(out.error);
      }
      const r = out.result;
      if (isRecord(r) && r.action === "respond") return this.buffered(isRecord(r.response) ? r.response : {});
    }

    const upload = req.body instanceof ReadableStream ? req.body : null;
    const bytes = req.body instanceof ReadableStream ? null : typeof req.body === "string" ? encoder.encode(req.body) : req.body;
    const length = headers["content-length"];
    const channels = this.channels?.openRequest(
      upload ?? bytes,
      upload && length !== undefined && /^\d{1,15}$/.test(length) ? Number(length) : undefined,
    );
    if (upload && !channels) upload.cancel("no channels to stream the body into").catch(() => {});
    const payload = {
      query_params: req.query,
      path_params: params,
      headers: functionHeaders,
      path: route.pattern,
      method,
      // A streamed body is too large for the invocation frame: it is only in `request_body`.
      body: upload ? null : parseBody(headers["content-type"], bytes),
      trigger: { type: "http", path: route.pattern, method: route.method },
      ...(channels ? { request_body: channels.request_body, response: channels.response } : {}),
    };
    let streaming = false;
    try {
      // A streamed upload that fails (the client went away, or sent fewer bytes than its
      // Content-Length) ends the request at once: the function may have read a truncated body as
      // complete (iii-sdk's reader cannot tell), so whatever it answers is not sent.
      const fired = this.core.fire(route.binding, payload, { timeoutMs: left(), ...trace });
      const outcome =
        channels && upload ? await Promise.race([fired, channels.bodyFailed.then((why) => ({ bodyFailed: why }))]) : await fired;
      if (typeof outcome === "object" && "bodyFailed" in outcome)
        return json(400, { error: { code: "invalid_arguments", message: `request body: ${outcome.bodyFailed}` } });
      if (outcome === "skipped")
        return json(422, { error: { code: "condition_not_met", message: "Request condition not met" }, skipped: true });
      if (!outcome.ok) {
        if (outcome.error.code === "timeout") return json(504, { error: { code: "timeout", message: outcome.error.message } });
        if (outcome.error.code === "function_not_found")
          return json(404, { error: { code: "function_not_found", message: outcome.error.message } });
        return this.errorResponse(outcome.error);
      }
      if ((outcome.result === undefined || outcome.result === null) && channels) {
        const res = await this.streamed(channels, method, deadline);
        if (res) {
          streaming = res.body instanceof ReadableStream;
          return res;
        }
      }
      const res = this.buffered(outcome.result);
      return method === "HEAD" ? { ...res, body: null } : res;
    } finally {
      // A streamed body disposes of the channels when it ends; everything else is over now.
      if (!streaming) channels?.dispose();
    }
  }

  /** `p`, or TIMEOUT after `ms`. */
  private async within<T>(p: Promise<T>, ms: number): Promise<T | typeof TIMEOUT> {
    let timer: unknown;
    const timeout = new Promise<typeof TIMEOUT>((r) => (timer = this.core.ports.timers.set(() => r(TIMEOUT), Math.max(1, ms))));
    try {
      return await Promise.race([p, timeout]);
    } finally {
      this.core.ports.timers.clear(timer);
    }
  }

  /**
   * Streaming mode (§8.1): control texts (`set_status`, `set_headers`) until the first binary
   * chunk, then the rest as the body. Undefined when the writer never attached (→ buffered).
   */
  private async streamed(ch: RequestChannels, method: string, deadline: number): Promise<HttpTriggerResponse | undefined> {
    const sink = ch.responseSink;
    const left = () => deadline - this.core.ports.clock.now();
    if (!sink.writerSeen && (await this.within(sink.writerAttached, Math.min(RESPONSE_ATTACH_GRACE_MS, left()))) === TIMEOUT)
      return undefined;
    let status = 200;
    const headers: [string, string][] = [];
    for (;;) {
      const item = await this.within(sink.next(), left());
      if (item === TIMEOUT)
        return json(504, { error: { code: "timeout", message: "the response channel sent no body before the deadline" } });
      if (item === null) return { matched: true, status, headers, body: null };
      if (item.type === "text") {
        const c = controlFrame(item.value);
        if (c?.type === "set_status") status = c.status_code;
        else if (c?.type === "set_headers") headers.push(...c.headers);
        continue;
      }
      if (method === "HEAD" || status === 204 || status === 304) return { matched: true, status, headers, body: null };
      return { matched: true, status, headers, body: this.bodyStream(new Uint8Array(item.value), ch, left) };
    }
  }

  /** The rest of the response channel as a byte stream, pulled as the front door reads it. */
  private bodyStream(first: Uint8Array, ch: RequestChannels, left: () => number): ReadableStream<Uint8Array> {
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      ch.dispose();
    };
    return new ReadableStream<Uint8Array>({
      start: (c) => c.enqueue(first),
      // Loop until something is enqueued: a pull that resolves having enqueued nothing is not
      // necessarily called again.
      pull: async (c) => {
        for (;;) {
          const item = await this.within(ch.responseSink.next(), left());
          if (item === TIMEOUT) {
            finish();
            c.error(new Error("http trigger deadline reached while streaming the response"));
            return;
          }
          if (item === null) {
            finish();
            c.close();
            return;
          }
          if (item.type === "binary") return c.enqueue(new Uint8Array(item.value));
          if (!controlFrame(item.value)) return c.enqueue(encoder.encode(item.value)); // text after the body starts is body text
        }
      },
      cancel: () => finish(),
    });
  }

  private errorResponse(error: Extract<CallOutcome, { ok: false }>["error"]): HttpTriggerResponse {
    const error_id = this.core.ports.newId().replace(/-/g, "").slice(0, 16);
    this.core.ports.log.warn("http trigger failed", { error_id, code: error.code, message: error.message });
    return json(500, { error: { code: error.code, message: error.message, error_id } });
  }

  /** The buffered response mapping of §8.1. */
  private buffered(result: unknown): HttpTriggerResponse {
    const shaped = isRecord(result) && ("status_code" in result || "body" in result || "headers" in result);
    const r = shaped ? result : { body: result === undefined ? {} : result };
    const status = typeof r.status_code === "number" && r.status_code >= 100 && r.status_code <= 599 ? Math.trunc(r.status_code) : 200;
    const headers: [string, string][] = [];
    if (Array.isArray(r.headers)) {
      for (const h of r.headers) {
        if (typeof h !== "string") continue;
        const i = h.indexOf(":");
        if (i > 0) headers.push([h.slice(0, i).trim(), h.slice(i + 1).trim()]);
      }
    } else if (isRecord(r.headers)) {
      for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && v !== null) headers.push([k, String(v)]);
    }
    const ctype = headers.find(([k]) => k.toLowerCase() === "content-type")?.[1];
    const body = r.body === undefined ? {} : r.body;
    let text: string | null;
    if (ctype !== undefined) {
      if (typeof body === "string") text = body;
      else if (body === null) text = null;
      else text = JSON.stringify(body);
    } else {
      headers.push(["content-type", "application/json"]);
      text = JSON.stringify(body);
    }
    if (status === 204 || status === 304) text = null;
    return { matched: true, status, headers, body: text };
  }
}

type ControlFrame = { type: "set_status"; status_code: number } | { type: "set_headers"; headers: [string, string][] };

/** A response-channel control text (§8.1), or undefined for any other text. */
function controlFrame(text: string): ControlFrame | undefined {
  if (!text.startsWith("{")) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isRecord(v)) return undefined;
  if (v.type === "set_status" && typeof v.status_code === "number" && v.status_code >= 100 && v.status_code <= 599)
    return { type: "set_status", status_code: Math.trunc(v.status_code) };
  if (v.type === "set_headers" && isRecord(v.headers)) {
    const headers: [string, string][] = [];
    for (const [k, h] of Object.entries(v.headers)) {
      if (Array.isArray(h)) for (const one of h) headers.push([k, String(one)]);
      else if (h !== undefined && h !== null) headers.push([k, String(h)]);
    }
    return { type: "set_headers", headers };
  }
  return undefined;
}

/** §8.1 body: JSON when the content type says so (invalid → null); iii-edge adds text/* as a string. */
export function parseBody(contentType: string | undefined, raw: Uint8Array | string | null): unknown {
  if (raw === null || raw.length === 0) return null;
  const ct = (contentType ?? "").toLowerCase();
  if (!ct.includes("json") && !ct.startsWith("text/")) return null;
  const text = typeof raw === "string" ? raw : new TextDecoder().decode(raw);
  if (ct.includes("application/json") || ct.includes("+json")) {
    try {
      return JSON.parse(text);
    } catch {
      return null;
    }
  }
  if (ct.startsWith("text/")) return text;
  return null;
}

export function installHttp(core: EngineApi, globalMiddleware: string[] = [], channels?: ChannelHub): HttpRoutes {
  const h = new HttpRoutes(core, globalMiddleware, channels);
  h.install();
  return h;
}
