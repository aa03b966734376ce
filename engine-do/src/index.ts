// The engine Worker: the front door. WebSocket upgrades go to the Engine object of their
// namespace; /_iii/* is the engine's own HTTP API; everything else is the demo app's assets.
import { Hono } from "hono";
import type { CallOutcome } from "./core/ports.ts";
import { Engine } from "./engine-object.ts";
import { mountTriggerRoutes } from "./http-routes.ts";
import { consumeDeliveries } from "./queue-consumer.ts";

export { Engine };
export { DemoEdgeFunctions } from "../../demo-app/edge/functions.ts";

/** iii namespaces name Durable Objects: keep them short and printable. */
const NAMESPACE = /^[A-Za-z0-9._-]{1,64}$/;
const DEFAULT_NAMESPACE = "default";

type AppEnv = { Bindings: Env };
const app = new Hono<AppEnv>();

const engineFor = (env: Env, namespace: string) => env.ENGINE.getByName(namespace);

app.get("/healthz", async (c) => {
  const health = await engineFor(c.env, DEFAULT_NAMESPACE).health();
  return c.json({ ok: true, engine: health });
});

// Worker control socket (default namespace: what iii-sdk dials), its /otel side channel, and the
// same under /ns/<namespace>.
const upgrade = async (c: { req: { raw: Request; header(n: string): string | undefined }; env: Env; json(b: unknown, s?: number): Response }, namespace: string) => {
  if (c.req.header("Upgrade")?.toLowerCase() !== "websocket") return null;
  if (!NAMESPACE.test(namespace)) return c.json({ error: { code: "INVALID_ARGUMENTS", message: `invalid namespace '${namespace}'` } }, 400);
  return engineFor(c.env, namespace).fetch(c.req.raw);
};
app.get("/", async (c) => (await upgrade(c, DEFAULT_NAMESPACE)) ?? c.env.ASSETS.fetch(c.req.raw));
app.get("/otel", async (c) => (await upgrade(c, DEFAULT_NAMESPACE)) ?? c.json({ error: { code: "NOT_FOUND", message: "WebSocket only" } }, 404));
app.get("/ns/:ns", async (c) => (await upgrade(c, c.req.param("ns"))) ?? c.json({ error: { code: "NOT_FOUND", message: "WebSocket only" } }, 404));
app.get("/ns/:ns/otel", async (c) => (await upgrade(c, c.req.param("ns"))) ?? c.json({ error: { code: "NOT_FOUND", message: "WebSocket only" } }, 404));
// Channel ends (wire-protocol §10): the SDK appends `/ws/channels/<id>?key=…&dir=…` to the engine
// address as text, so `ws://h` dials `/ws/channels/<id>` and `ws://h/ns/<ns>` dials
// `/ns/<ns>/ws/channels/<id>`. The namespace's Engine object checks the key (404 when wrong).
const channelOnly = (c: { json(b: unknown, s?: number): Response }) => c.json({ error: { code: "INVALID_ARGUMENTS", message: "channels need a WebSocket upgrade" } }, 426);
app.get("/ws/channels/:id", async (c) => (await upgrade(c, DEFAULT_NAMESPACE)) ?? channelOnly(c));
app.get("/ns/:ns/ws/channels/:id", async (c) => (await upgrade(c, c.req.param("ns"))) ?? channelOnly(c));

// The engine's HTTP API: call a function (handy for curl, the demo app and tests).
app.post("/_iii/invoke", async (c) => {
  const body = await c.req.json().catch(() => null);
  if (!body || typeof body !== "object" || typeof (body as { function_id?: unknown }).function_id !== "string") {
    return c.json({ error: { code: "INVALID_ARGUMENTS", message: "body must be {function_id, payload?, namespace?, action?, timeout_ms?}" } }, 400);
  }
  const b = body as { function_id: string; payload?: unknown; namespace?: string; action?: never; timeout_ms?: number };
  const ns = b.namespace ?? DEFAULT_NAMESPACE;
  if (!NAMESPACE.test(ns)) return c.json({ error: { code: "INVALID_ARGUMENTS", message: `invalid namespace '${ns}'` } }, 400);
  const out = (await engineFor(c.env, ns).trigger({ function_id: b.function_id, payload: b.payload, action: b.action, timeout_ms: b.timeout_ms })) as CallOutcome;
  if (out.ok) return c.json({ result: out.result ?? null });
  const status = out.error.code === "function_not_found" ? 404 : out.error.code === "timeout" ? 504 : 500;
  return c.json({ error: out.error }, status);
});

// HTTP-trigger routes, stream sockets and the bench baseline (http-routes.ts); the catch-all goes last.
mountTriggerRoutes(app);

app.notFound(async (c) => {
  if (c.req.path.startsWith("/_iii/")) return c.json({ error: { code: "NOT_FOUND", message: "Not Found" } }, 404);
  return c.env.ASSETS.fetch(c.req.raw);
});

export default {
  fetch: app.fetch,
  queue: consumeDeliveries,
} satisfies ExportedHandler<Env>;
