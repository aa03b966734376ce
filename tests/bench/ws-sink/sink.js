// The least a Durable Object can do with WebSocket messages: count them. `?mode=hibernate`
// (default) accepts with ctx.acceptWebSocket and counts in webSocketMessage; `?mode=plain` uses
// ws.accept() and an event listener. The text "count?" is answered with the count so far (a
// socket's messages are handled in order, so the answer comes once all before it are). Plain
// JavaScript, so the tests' Node tsconfig does not type-check a Worker file.
import { DurableObject } from "cloudflare:workers";

export class Sink extends DurableObject {
  received = 0;

  async fetch(request) {
    if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket") return Response.json({ received: this.received });
    const [client, server] = Object.values(new WebSocketPair());
    if (new URL(request.url).searchParams.get("mode") === "plain") {
      server.accept();
      server.addEventListener("message", (ev) => this.webSocketMessage(server, ev.data));
    } else {
      this.ctx.acceptWebSocket(server);
    }
    return new Response(null, { status: 101, webSocket: client });
  }

  webSocketMessage(ws, message) {
    this.received++;
    if (message === "count?") ws.send(String(this.received));
  }
}

export default {
  fetch(request, env) {
    const url = new URL(request.url);
    // Answered by the Worker itself: how busy the process is, not the object's queue.
    if (url.pathname === "/healthz") return new Response("ok");
    // `/count` goes through the object's input queue, like the engine's /healthz.
    return env.SINK.getByName("sink").fetch(request);
  },
};
