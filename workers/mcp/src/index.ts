// @iii-edge/worker-mcp: the engine and MCP, both ways.
// - The MCP client worker (this entry, `npm run worker -- mcp`): connects to the MCP servers of
//   `MCP_SERVERS` and registers their tools as functions `mcp::<server>::<tool>` (client.ts).
//   Streamable HTTP servers here; stdio servers need a process to spawn, so only the Node entry
//   (./node) takes them. It is not part of the composite edge Worker (deploy/harness.ts): a
//   Worker-hosted module declares its functions once, but a server's tools are learned after
//   connecting and change while it runs.
// - The MCP server (./server): the engine's catalog at `/mcp`, mounted by deploy/worker.ts.
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { IIIError } from "@iii-edge/protocol";
import type { WorkerModule, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { startMcpClient, surfaceRegistrar, type FunctionRegistrar, type McpClientHandle, type McpClientOptions } from "./client.ts";
import { isStdio, parseServers, type McpServerConfig } from "./config.ts";

export {
  MCP_SERVERS_FUNCTION,
  startMcpClient,
  type FunctionRegistrar,
  type McpClientHandle,
  type McpClientOptions,
  type ServerStatus,
} from "./client.ts";
export { parseServers, type McpServerConfig } from "./config.ts";
export { clientFunctionId } from "./expose.ts";

export interface McpClientConfig extends Omit<McpClientOptions, "transportFor"> {
  transportFor?: McpClientOptions["transportFor"];
  /** Instead of the surface: a registrar that can unregister (node.ts passes its EdgeClient). */
  registrar?: FunctionRegistrar;
}

/** Streamable HTTP only (what a Worker or any runtime with fetch can open). */
export function httpTransport(server: McpServerConfig): Transport {
  if (isStdio(server))
    throw new IIIError("invalid_arguments", `MCP server ${server.name} is a stdio server: run the worker in Node (npm run worker -- mcp)`);
  return new StreamableHTTPClientTransport(new URL(server.url), server.headers ? { requestInit: { headers: server.headers } } : undefined);
}

/** `MCP_SERVERS` (JSON: a list of {name, url, headers?}, or Claude Desktop's {mcpServers:{…}}). */
export function configFrom(env: Readonly<Record<string, unknown>>): McpClientConfig {
  const text = env.MCP_SERVERS;
  return { servers: parseServers(typeof text === "string" ? text : undefined) };
}

export function registerMcpClient(iii: WorkerSurface, config: McpClientConfig): McpClientHandle | undefined {
  if (iii.runtime === "edge") {
    // Said, not thrown: a composite that lists this module by mistake still serves the rest.
    console.warn("mcp: the MCP client worker runs as a Node process (npm run worker -- mcp), not inside the Worker; nothing registered");
    return undefined;
  }
  return startMcpClient(config.registrar ?? surfaceRegistrar(iii), { ...config, transportFor: config.transportFor ?? httpTransport });
}

export const worker: WorkerModule<McpClientConfig> = {
  name: "mcp",
  configFrom,
  register: (iii, config) => void registerMcpClient(iii, config),
};
export default worker;
