// The engine Worker: the front door. Every WebSocket upgrade and /_iii/* request is authenticated
// here (auth.ts) before the Engine object of its namespace is touched; /_iii/* is the engine's own
// HTTP API; everything else is HTTP-trigger routes or the demo app's assets.
import { Hono, type Context } from "hono";
import { z } from "zod";
import { MAX_FRAME_BYTES, rpcTriggerRequest, type EngineRpc, formatIssues } from "@iii-edge/protocol";
import { authMode, authenticateRequest, foreignOriginRefusal, isLocalClient, nonJsonBodyRefusal, withGrant } from "./auth.ts";
import { Engine } from "./engine-object.ts";
import { relayReader } from "./channel-sockets.ts";
import { mountTriggerRoutes } from "./http-routes.ts";
import { consumeDeliveries } from "./queue-consumer.ts";
import { traceFromHeaders } from "./core/trace.ts";
import { isSocketPath, refuseWrongSocketPath, wantsWebSocket } from "./socket-paths.ts";
import { socketObjectName } from "./shards/config.ts";
import { rbacUpgrade } from "./rbac.ts";

export { Engine };
export { PrincipalConnections } from "./principal-connections.ts";

/** iii namespaces name Durable Objects: keep them short and printable. */
export const NAMESPACE = /^[A-Za-z0-9._-]{1,64}$/;
const DEFAULT_NAMESPACE = "default";

type AppEnv = { Bindings: Env };
const app = new Hono<AppEnv>();

const engineFor = (env: Env, namespace: string) => env.ENGINE.getByName(namespace);

const errorJson = (c: Context<AppEnv>, status: number, code: string, message: string) =>
  c.json({ error: { code, message } }, status as 400);

const authFor = (c: Context<AppEnv>, namespace: string) => authenticateRequest(c.req.raw, c.env, namespace);

// The open engine serves its own pages and local programs, never a page of another web origin
// (auth.ts foreignOriginRefusal). A WebSocket upgrade on a path with no socket endpoint (`/ws`,
// `/wrong`, a typo) is a client's configuration error: answered with the right paths, before any
// route sees it (socket-paths.ts).
app.use("*", async (c, next) => {
  const foreign = foreignOriginRefusal(c.req.raw, c.env);
  if (foreign) return errorJson(c, 403, "forbidden", foreign);
  if (wantsWebSocket(c.req.raw) && !isSocketPath(new URL(c.req.url).pathname)) return refuseWrongSocketPath(c);
  await next();
});

// Whatever a handler throws is answered as a typed error and nothing more: a stack names the
// engine's files and is no business of the client's (it goes to the log instead).
app.onError((err, c) => {
  console.error(`iii-edge: ${c.req.method} ${c.req.path.slice(0, 200)} failed:`, err);
  if (err instanceof URIError) return errorJson(c, 400, "invalid_arguments", "the path holds a malformed percent-escape");
  return errorJson(c, 500, "invocation_error", "the engine failed to answer this request");
});

app.get("/healthz", async (c) => {
  const health = await engineFor(c.env, DEFAULT_NAMESPACE).health();
  return c.json({ ok: true, auth: authMode(c.env), engine: health });
});

/** A WebSocket upgrade for `namespace`: authenticated, then handed to its Engine object. */
const upgrade = async (c: Context<AppEnv>, namespace: string): Promise<Response | null> => {
  if (c.req.header("Upgrade")?.toLowerCase() !== "websocket") return null;
  if (!NAMESPACE.test(namespace)) return errorJson(c, 400, "invalid_arguments", `invalid namespace '${namespace}'`);
  const who = await authFor(c, namespace);
  if (!who.ok) return errorJson(c, who.status, who.code, who.message);
  // With CONNECTION_SHARDS > 1 a worker socket goes to one of the namespace's connection shards.
  return engineFor(c.env, socketObjectName(c.env, namespace, c.req.path)).fetch(withGrant(c.req.raw, who.grant, who.viaProtocol));
};
const webSocketOnly = (c: Context<AppEnv>) => errorJson(c, 404, "not_found", "WebSocket only");

// Worker control socket (default namespace: what iii-sdk dials), its /otel side channel, and the
// same under /ns/<namespace>.
app.get("/", async (c) => (await upgrade(c, DEFAULT_NAMESPACE)) ?? c.env.ASSETS.fetch(c.req.raw));
app.get("/otel", async (c) => (await upgrade(c, DEFAULT_NAMESPACE)) ?? webSocketOnly(c));
app.get("/ns/:ns", async (c) => (await upgrade(c, c.req.param("ns"))) ?? webSocketOnly(c));
app.get("/ns/:ns/otel", async (c) => (await upgrade(c, c.req.param("ns"))) ?? webSocketOnly(c));

// iii's RBAC worker listener (rbac.ts): connections governed by an auth function's AuthResult.
const rbacListener = async (c: Context<AppEnv>, namespace: string): Promise<Response> => {
  if (c.req.header("Upgrade")?.toLowerCase() !== "websocket") return webSocketOnly(c);
  if (!NAMESPACE.test(namespace)) return errorJson(c, 400, "invalid_arguments", `invalid namespace '${namespace}'`);
  return rbacUpgrade(c, namespace);
};
app.get("/rbac", (c) => rbacListener(c, DEFAULT_NAMESPACE));
app.get("/ns/:ns/rbac", (c) => rbacListener(c, c.req.param("ns")));

// Channel ends (protocol/README.md §10): the SDK appends `/ws/channels/<id>?key=…&dir=…` to the
// engine address as text, so `ws://h` dials `/ws/channels/<id>` and `ws://h/ns/<ns>` dials
// `/ns/<ns>/ws/channels/<id>`. Each end's key is its capability: random bits that only the
// authenticated creator of the channel was given, one key for the reader and another for the
// writer, checked by the namespace's Engine object (404 when wrong). iii-sdk opens channel sockets
// without headers, so no token is asked for here — but an engine without auth configured still
// serves them to local clients only.
const channel = async (c: Context<AppEnv>, namespace: string): Promise<Response> => {
  if (c.req.header("Upgrade")?.toLowerCase() !== "websocket")
    return errorJson(c, 426, "invalid_arguments", "channels need a WebSocket upgrade");
  if (!NAMESPACE.test(namespace)) return errorJson(c, 400, "invalid_arguments", `invalid namespace '${namespace}'`);
  if (authMode(c.env) === "open" && !isLocalClient(c.req.raw)) {
    const who = await authFor(c, namespace);
    if (!who.ok) return errorJson(c, who.status, who.code, who.message);
  }
  const res = await engineFor(c.env, namespace).fetch(withGrant(c.req.raw, { sub: "channel", ns: [namespace] }, false));
  // A reader's socket is relayed here, so the end of its stream reaches it at once (channel-sockets.ts).
  return c.req.query("dir") === "read" ? relayReader(res) : res;
};
app.get("/ws/channels/:id", (c) => channel(c, DEFAULT_NAMESPACE));
app.get("/ns/:ns/ws/channels/:id", (c) => channel(c, c.req.param("ns")));

/** The body of POST /_iii/invoke: an invokefunction without the socket parts. */
const invokeBody = rpcTriggerRequest
  .pick({ function_id: true, payload: true, action: true, timeout_ms: true })
  .extend({ namespace: z.string().optional() });
const INVOKE_SHAPE = "{function_id, payload?, namespace?, action?, timeout_ms?}";
/** Largest /_iii/invoke body: a call over HTTP carries what one invokefunction frame may (1 MiB). */
const MAX_INVOKE_BODY_BYTES = MAX_FRAME_BYTES;

/**
 * The engine's HTTP API: call a function (handy for curl, the demo app and tests). `/_iii/invoke`
 * calls in the namespace the body names (default `default`); `/ns/<ns>/_iii/invoke` in `<ns>`.
 */
const invoke = async (c: Context<AppEnv>, pathNamespace: string | undefined): Promise<Response> => {
  const declared = Number(c.req.header("content-length") ?? "0");
  if (declared > MAX_INVOKE_BODY_BYTES)
    return errorJson(c, 413, "value_too_large", `body of ${declared} bytes exceeds ${MAX_INVOKE_BODY_BYTES}`);
  const text = await boundedText(c.req.raw, MAX_INVOKE_BODY_BYTES);
  if (text === null) return errorJson(c, 413, "value_too_large", `body exceeds ${MAX_INVOKE_BODY_BYTES} bytes`);
  if (text.trim() === "")
    return errorJson(
      c,
      400,
      "invalid_arguments",
      `the body is empty: POST a JSON object ${INVOKE_SHAPE}, e.g. {"function_id":"engine::functions::list","payload":{}}`,
    );
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return errorJson(
      c,
      400,
      "invalid_arguments",
      `the body is not JSON (${e instanceof Error ? e.message : String(e)}): POST a JSON object ${INVOKE_SHAPE}`,
    );
  }
  const parsed = invokeBody.safeParse(json);
  if (!parsed.success) {
    return errorJson(c, 400, "invalid_arguments", `body must be ${INVOKE_SHAPE} (${formatIssues(parsed.error)})`);
  }
  const b = parsed.data;
  if (pathNamespace !== undefined && b.namespace !== undefined && b.namespace !== pathNamespace) {
    return errorJson(
      c,
      400,
      "invalid_arguments",
      `namespace given twice: the path says '${pathNamespace.slice(0, 80)}', the body '${b.namespace.slice(0, 80)}'`,
    );
  }
  const ns = pathNamespace ?? b.namespace ?? DEFAULT_NAMESPACE;
  if (!NAMESPACE.test(ns)) return errorJson(c, 400, "invalid_arguments", `invalid namespace '${ns.slice(0, 80)}'`);
  const who = await authFor(c, ns);
  if (!who.ok) return errorJson(c, who.status, who.code, who.message);
  const notJson = nonJsonBodyRefusal(c.req.raw);
  if (notJson) return errorJson(c, 415, "invalid_arguments", notJson);
  // Typed by protocol's contract: workerd's generated stub type drops the `unknown` result.
  const engine: EngineRpc = engineFor(c.env, ns);
  // The caller's W3C trace context, from its headers: the function continues that trace (§4.8).
  const trace = traceFromHeaders((name) => c.req.header(name));
  const out = await engine.trigger({
    function_id: b.function_id,
    payload: b.payload,
    action: b.action,
    timeout_ms: b.timeout_ms,
    grant: who.grant,
    ...trace,
  });
  if (out.ok) return c.json({ result: out.result ?? null });
  return c.json({ error: out.error }, statusOf(out.error.code));
};
/** A body as text, or null once it passes `max` bytes (counted as it arrives: a chunked body
 * declares no length; the rest is not read). */
async function boundedText(req: Request, max: number): Promise<string | null> {
  if (!req.body) return "";
  const reader = req.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    bytes += value.byteLength;
    if (bytes > max) {
      reader.cancel("body too large").catch(() => {});
      return null;
    }
    text += decoder.decode(value, { stream: true });
  }
}
/** Any other method on the invoke endpoint: 405, naming the one that works. */
const invokeMethodNotAllowed = (c: Context<AppEnv>) => {
  c.header("Allow", "POST");
  return errorJson(c, 405, "invalid_arguments", `${c.req.method} is not supported here: POST a JSON object ${INVOKE_SHAPE}`);
};
app.post("/_iii/invoke", (c) => invoke(c, undefined));
app.post("/ns/:ns/_iii/invoke", (c) => invoke(c, c.req.param("ns")));
app.all("/_iii/invoke", invokeMethodNotAllowed);
app.all("/ns/:ns/_iii/invoke", invokeMethodNotAllowed);

function statusOf(code: string): 400 | 403 | 404 | 413 | 429 | 500 | 504 {
  switch (code) {
    case "function_not_found":
      return 404;
    case "timeout":
      return 504;
    case "forbidden":
      return 403;
    case "result_too_large":
    case "value_too_large":
      return 413;
    case "too_many_calls":
    case "rate_limited":
      return 429;
    case "invalid_arguments":
    case "invalid_frame":
    case "invalid_input":
    // The caller's payload did not fit the function's input: the caller's mistake.
    case "deserialization_error":
      return 400;
    default:
      return 500;
  }
}

// HTTP-trigger routes and stream sockets (http-routes.ts); the catch-all goes last.
mountTriggerRoutes(app);

app.notFound(async (c) => {
  if (c.req.path.startsWith("/_iii/")) return errorJson(c, 404, "not_found", "Not Found");
  return c.env.ASSETS.fetch(c.req.raw);
});

/** The engine Worker's handlers. The deployable (deploy/worker.ts) composes them with whatever
 * runs on the engine (demo and harness functions); the engine depends on none of it. */
export const engineWorker = {
  fetch: app.fetch,
  queue: consumeDeliveries,
} satisfies ExportedHandler<Env>;
