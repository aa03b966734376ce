// An MCP server built with the official SDK's McpServer over Streamable HTTP (stateful sessions) on
// a local port, for the MCP client worker's suites (tests/unit/mcp-client.test.ts,
// tests/harness/mcp-turn.test.ts). Tools: `add` {a, b} → {sum}, and any `addTool(name)` adds later
// ({a, b} → {product}); each live session is told with list_changed.
import { randomUUID } from "node:crypto";
import { createServer, type Server as HttpServer } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

/** An McpServer (official SDK) over Streamable HTTP, stateful sessions, on `port`. */
export interface HttpFixture {
  url: string;
  /** Register another tool on every session (each sends list_changed) and on later ones. */
  addTool(name: string): void;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function httpFixture(port: number): Promise<HttpFixture> {
  const extra: string[] = [];
  let sessions = new Map<string, { transport: StreamableHTTPServerTransport; server: McpServer }>();
  let http: HttpServer | undefined;
  const withTool = (server: McpServer, name: string) =>
    server.registerTool(name, { description: `Multiplies (${name})`, inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => ({
      content: [{ type: "text", text: String(a * b) }],
      structuredContent: { product: a * b },
    }));
  const make = () => {
    const server = new McpServer({ name: "fixture-http", version: "1.0.0" });
    server.registerTool("add", { description: "Adds two numbers", inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => ({
      content: [{ type: "text", text: String(a + b) }],
      structuredContent: { sum: a + b },
    }));
    for (const name of extra) withTool(server, name);
    return server;
  };
  const start = async () => {
    sessions = new Map();
    http = createServer(async (req, res) => {
      const sid = req.headers["mcp-session-id"];
      let entry = typeof sid === "string" ? sessions.get(sid) : undefined;
      if (!entry) {
        if (sid !== undefined)
          return void res
            .writeHead(404, { "content-type": "application/json" })
            .end('{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}');
        const server = make();
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => void sessions.set(id, { transport, server }),
        });
        await server.connect(transport);
        entry = { transport, server };
      }
      await entry.transport.handleRequest(req, res);
    });
    await new Promise<void>((resolve) => http!.listen(port, "127.0.0.1", resolve));
  };
  await start();
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    addTool(name) {
      extra.push(name);
      for (const { server } of sessions.values()) withTool(server, name);
    },
    start,
    async stop() {
      const h = http;
      http = undefined;
      await Promise.all([...sessions.values()].map((s) => s.server.close().catch(() => undefined)));
      h?.closeAllConnections();
      await new Promise((r) => h?.close(r));
    },
  };
}
