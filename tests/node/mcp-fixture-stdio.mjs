// An MCP server on stdio, built with the official SDK's McpServer: what the MCP client worker
// spawns in tests/unit/mcp-client.test.ts and tests/node/mcp-client.test.ts. Ends when its stdin closes (the SDK's stdio transport).
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "fixture-stdio", version: "1.0.0" });
server.registerTool("shout", { description: "Upper-cases its text", inputSchema: { text: z.string() } }, async ({ text }) => ({
  content: [{ type: "text", text: text.toUpperCase() }],
  structuredContent: { shouted: text.toUpperCase(), pid: process.pid },
}));
server.registerTool("fail", { description: "Always fails", inputSchema: {} }, async () => ({
  isError: true,
  content: [{ type: "text", text: "this tool always fails" }],
}));
await server.connect(new StdioServerTransport());
