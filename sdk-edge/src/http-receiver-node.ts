// Serve a fetch-style handler (e.g. `httpFunctionHandler`) from `node:http`, which has no
// Request/Response of its own.
import type { IncomingMessage, ServerResponse } from "node:http";

/** Bodies above this are refused with 413: the engine never sends more than one frame's worth. */
export const MAX_NODE_BODY_BYTES = 2 * 1024 * 1024;

export function nodeHttpListener(handler: (request: Request) => Promise<Response>): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_NODE_BODY_BYTES) {
        res.writeHead(413).end();
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on("end", async () => {
      if (res.writableEnded) return;
      try {
        const headers = new Headers();
        for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
        const method = req.method ?? "GET";
        const body = method === "GET" || method === "HEAD" ? undefined : Buffer.concat(chunks);
        const response = await handler(
          new Request(`http://${req.headers.host ?? "localhost"}${req.url ?? "/"}`, { method, headers, body }),
        );
        res.writeHead(response.status, Object.fromEntries(response.headers));
        res.end(Buffer.from(await response.arrayBuffer()));
      } catch (err) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { code: "invocation_failed", message: String(err) } }));
      }
    });
  };
}
