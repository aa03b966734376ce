// The benchmark's Worker: the engine exactly as `npm start` runs it, plus the baselines measured in
// the same run on the same runtime: `EchoBench`, a hibernatable WebSocket echo Durable Object at
// /_bench/echo (run.mjs), the plain Worker route /_iii/bench/plain (triggers-bench.mjs), and the same
// JSON through one RPC to that object at /_iii/bench/object (queue-flood-bench.ts).
import { DurableObject } from "cloudflare:workers";
import engine from "../../deploy/worker.ts";
import { BENCH_OBJECT_PATH, BENCH_PLAIN_BODY, BENCH_PLAIN_PATH } from "./baseline.ts";

export * from "../../deploy/worker.ts";

interface BenchEnv extends Env {
  ECHO: DurableObjectNamespace<EchoBench>;
}

/**
 * The least a Durable Object can do per WebSocket message. `/_bench/echo`: send it back.
 * `/_bench/relay` + `/_bench/relay-responder`: the same two-hop shape as a routed call (caller →
 * object → responder process → object → caller) with no engine logic at all, tagging each message
 * with the caller's socket id — the floor a routed invoke could reach on this runtime.
 */
export class EchoBench extends DurableObject<BenchEnv> {
  private readonly callers = new Map<string, WebSocket>();
  /** Per-socket role and id cached in memory, like the engine's WeakMap; tags after hibernation. */
  private readonly roles = new WeakMap<WebSocket, string>();
  private responder: WebSocket | undefined;

  /** The plain route's JSON, answered by the object (the Worker → object hop and nothing else). */
  json(): typeof BENCH_PLAIN_BODY {
    return BENCH_PLAIN_BODY;
  }

  override async fetch(request: Request): Promise<Response> {
    if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket") return new Response("WebSocket only", { status: 426 });
    const path = new URL(request.url).pathname;
    const pair = new WebSocketPair();
    const server = pair[1];
    if (path.endsWith("/relay-responder")) {
      this.ctx.acceptWebSocket(server, ["responder"]);
      this.responder = server;
      this.roles.set(server, "responder");
    } else if (path.endsWith("/relay")) {
      const id = crypto.randomUUID();
      this.ctx.acceptWebSocket(server, ["caller", `c:${id}`]);
      server.serializeAttachment(id);
      this.callers.set(id, server);
      this.roles.set(server, `c:${id}`);
    } else {
      this.ctx.acceptWebSocket(server, ["echo"]);
      this.roles.set(server, "echo");
    }
    return new Response(null, { status: 101, webSocket: pair[0] });
  }

  override async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    let role = this.roles.get(ws);
    if (role === undefined) {
      const tags = this.ctx.getTags(ws);
      role = tags[0] === "caller" ? `c:${ws.deserializeAttachment() as string}` : (tags[0] ?? "echo");
      this.roles.set(ws, role);
    }
    if (role === "echo") return ws.send(message);
    const text = typeof message === "string" ? message : new TextDecoder().decode(message);
    if (role !== "responder") {
      const responder = this.responder ?? this.ctx.getWebSockets("responder")[0];
      responder?.send(`${role.slice(2)}|${text}`);
      return;
    }
    const bar = text.indexOf("|");
    const id = text.slice(0, bar);
    const caller = this.callers.get(id) ?? this.ctx.getWebSockets(`c:${id}`)[0];
    caller?.send(text.slice(bar + 1));
  }
  override async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    if (ws === this.responder) this.responder = undefined;
    const id = this.ctx.getTags(ws)[0] === "caller" ? (ws.deserializeAttachment() as string) : undefined;
    if (id) this.callers.delete(id);
    try {
      ws.close(code === 1005 || code === 1006 ? 1000 : code, "bye");
    } catch {
      // already closed
    }
  }
}

export default {
  ...engine,
  fetch(request: Request<unknown, IncomingRequestCfProperties>, env: BenchEnv, ctx: ExecutionContext): Response | Promise<Response> {
    const path = new URL(request.url).pathname;
    if (path.startsWith("/_bench/")) return env.ECHO.getByName("echo").fetch(request);
    // The same JSON as the bench's http-trigger route, from the Worker alone.
    if (path === BENCH_PLAIN_PATH && request.method === "GET") return Response.json(BENCH_PLAIN_BODY);
    // …and from an object, one RPC away: what every route served by an object pays at least.
    if (path === BENCH_OBJECT_PATH && request.method === "GET")
      return env.ECHO.getByName("echo")
        .json()
        .then((body) => Response.json(body));
    return engine.fetch(request, env, ctx);
  },
} satisfies ExportedHandler<BenchEnv>;
