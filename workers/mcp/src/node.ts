// The MCP client worker as a Node process (`npm run worker -- mcp`): Streamable HTTP servers and
// stdio servers (a child process per server, restarted with backoff when it exits), configured by
// `MCP_SERVERS` (JSON) or `MCP_SERVERS_FILE` (a JSON file; Claude Desktop's config file works as it
// is). `run` is what scripts/worker.mjs calls: the functions are registered on the EdgeClient
// itself, so a tool a server stops offering, or a server that goes away, leaves the catalog.
import { readFileSync } from "node:fs";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { IIIError } from "@iii-edge/protocol";
import type { EdgeClient } from "@iii-edge/sdk-edge/client";
import { registerWorker } from "@iii-edge/sdk-edge/node";
import { nodeSurface, type NodeWorkersOptions, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import type { WorkerModule } from "@iii-edge/sdk-edge/worker";
import type { FunctionRegistrar, McpClientHandle } from "./client.ts";
import { isStdio, parseServers, type McpServerConfig } from "./config.ts";
import { httpTransport, registerMcpClient, type McpClientConfig } from "./index.ts";

export {
  MCP_SERVERS_FUNCTION,
  clientFunctionId,
  parseServers,
  startMcpClient,
  type McpClientConfig,
  type McpClientHandle,
  type ServerStatus,
} from "./index.ts";

/** Either transport: stdio spawns `command args` (its stderr goes to this process's stderr). */
export function nodeTransport(server: McpServerConfig): Transport {
  if (!isStdio(server)) return httpTransport(server);
  const params: ConstructorParameters<typeof StdioClientTransport>[0] = { command: server.command, stderr: "inherit" };
  if (server.args) params.args = server.args;
  if (server.env) params.env = server.env;
  if (server.cwd) params.cwd = server.cwd;
  return new StdioClientTransport(params);
}

/** `MCP_SERVERS` when set, else the file `MCP_SERVERS_FILE` names. */
export function configFrom(env: Readonly<Record<string, unknown>>): McpClientConfig {
  const text = env.MCP_SERVERS;
  const file = env.MCP_SERVERS_FILE;
  let servers: McpServerConfig[] = [];
  if (typeof text === "string" && text.trim() !== "") servers = parseServers(text);
  else if (typeof file === "string" && file !== "") {
    let content: string;
    try {
      content = readFileSync(file, "utf8");
    } catch (e) {
      throw new IIIError("invalid_arguments", `MCP_SERVERS_FILE ${file}: ${e instanceof Error ? e.message : String(e)}`);
    }
    servers = parseServers(content, `MCP_SERVERS_FILE ${file}`);
  }
  if (servers.length === 0)
    console.warn("mcp: no MCP servers configured (set MCP_SERVERS or MCP_SERVERS_FILE); only mcp::servers is registered");
  return { servers, transportFor: nodeTransport };
}

/** An EdgeClient as a registrar whose registrations can be undone. */
export const clientRegistrar = (client: EdgeClient): FunctionRegistrar => ({
  registerFunction: (id, handler, options) =>
    client.registerFunction(id, (data: unknown, _metadata: unknown, ctx) => handler(data, ctx), options),
});

export const worker: WorkerModule<McpClientConfig> = {
  name: "mcp",
  configFrom,
  register: (iii, config) => void registerMcpClient(iii, config),
};
export default worker;

/** Connect to the engine and run the MCP client on that connection (scripts/worker.mjs). */
export function run(url: string, options: NodeWorkersOptions = {}): RunningWorkers & { mcp: McpClientHandle | undefined } {
  const env = options.env ?? process.env;
  const client = registerWorker(url, { workerName: options.workerName ?? "mcp", ...options });
  const surface = nodeSurface(client, url, env);
  const config = (options.config?.mcp as McpClientConfig | undefined) ?? configFrom(env);
  const mcp = registerMcpClient(surface, {
    ...config,
    transportFor: config.transportFor ?? nodeTransport,
    registrar: clientRegistrar(client),
  });
  return {
    client,
    surface,
    mcp,
    shutdown: async () => {
      await mcp?.close();
      await client.shutdown();
    },
  };
}
