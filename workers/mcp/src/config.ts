// The MCP client worker's settings: which MCP servers to connect to. `MCP_SERVERS` holds JSON, one
// of two shapes:
//   [{"name": "docs", "url": "https://…/mcp", "headers": {"Authorization": "Bearer …"}},
//    {"name": "files", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}]
// or the `mcpServers` object Claude Desktop's config file uses ({"mcpServers": {"files": {…}}}), so
// such a file can be pointed at as it is (`MCP_SERVERS_FILE`, Node only).
import { IIIError } from "@iii-edge/protocol";
import { z } from "zod";

/** A server's name becomes the middle of its tools' function ids (`mcp::<name>::<tool>`). */
const serverName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "a server name is 1–64 letters, digits, '_' or '-'");
/** Most servers one worker connects to: each holds a connection (a child process for stdio). */
export const MAX_SERVERS = 32;

const httpServer = z.object({
  name: serverName,
  url: z.string().url(),
  /** Sent on every request (e.g. the server's bearer token). */
  headers: z.record(z.string(), z.string()).optional(),
});
const stdioServer = z.object({
  name: serverName,
  command: z.string().min(1),
  args: z.array(z.string()).max(256).optional(),
  env: z.record(z.string(), z.string()).optional(),
  cwd: z.string().optional(),
});
export const mcpServerConfig = z.union([httpServer, stdioServer]);
export type McpServerConfig = z.infer<typeof mcpServerConfig>;
export type HttpServerConfig = z.infer<typeof httpServer>;
export type StdioServerConfig = z.infer<typeof stdioServer>;

const desktopEntry = z.union([httpServer.omit({ name: true }), stdioServer.omit({ name: true })]);
const serversSetting = z.union([
  z.array(mcpServerConfig).max(MAX_SERVERS),
  z
    .object({ mcpServers: z.record(z.string(), desktopEntry) })
    .transform((o) => Object.entries(o.mcpServers).map(([name, s]) => ({ name, ...s }))),
]);

export const isStdio = (s: McpServerConfig): s is StdioServerConfig => "command" in s;

/** Parse `MCP_SERVERS`-shaped JSON text (from `where`, named in the error). Empty text: no servers. */
export function parseServers(text: string | undefined, where = "MCP_SERVERS"): McpServerConfig[] {
  if (text === undefined || text.trim() === "") return [];
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new IIIError("invalid_arguments", `${where} is not JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  const parsed = serversSetting.safeParse(json);
  if (!parsed.success) throw new IIIError("invalid_arguments", `${where}: ${z.prettifyError(parsed.error)}`);
  const servers = parsed.data.map((s) => mcpServerConfig.parse(s));
  if (servers.length > MAX_SERVERS) throw new IIIError("invalid_arguments", `${where}: ${servers.length} servers, at most ${MAX_SERVERS}`);
  const seen = new Set<string>();
  for (const s of servers) {
    if (seen.has(s.name)) throw new IIIError("invalid_arguments", `${where}: two servers are named "${s.name}"`);
    seen.add(s.name);
  }
  return servers;
}
