// The MCP client worker's core: one link per configured MCP server (the official SDK's `Client`),
// each server's tools registered as functions `mcp::<server>::<tool>` with the tool's inputSchema as
// `request_format`, so any worker, tab or agent turn calls them through the engine — policy and
// approvals apply as to any function. A link re-lists on `notifications/tools/list_changed`,
// watches its server with a ping, and reconnects with backoff; while a server is away its tools
// leave the catalog (where the registrar can unregister) and come back with it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ToolListChangedNotificationSchema, type CallToolResult, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { IIIError, isRecord } from "@iii-edge/protocol";
import { withoutCallerId } from "@iii-edge/sdk-edge/client";
import type { WorkerHandler, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { isStdio, type McpServerConfig } from "./config.ts";
import { EXPOSE_METADATA_KEY, clientFunctionId } from "./expose.ts";

export const CLIENT_INFO = { name: "iii-edge-mcp-client", version: "0.1.0" } as const;
/** The status function this worker registers: which servers are connected, with which tools. */
export const MCP_SERVERS_FUNCTION = "mcp::servers";

/** Most tools taken from one server: a server listing more is cut (with a log line), so one server
 * cannot flood the catalog. */
export const MAX_TOOLS_PER_SERVER = 256;
/** Most `tools/list` pages read from one server (a server whose cursor never ends is cut short). */
const MAX_LIST_PAGES = 32;
/** Reconnect backoff: the first retry after this, doubling per failure… */
export const RECONNECT_INITIAL_MS = 500;
/** …up to this, so a server that comes back is found within half a minute. */
export const RECONNECT_MAX_MS = 30_000;
/** A connection that lasted this long resets the backoff; one that dies sooner (a stdio server in a
 * crash loop) keeps backing off, so it is restarted at most every RECONNECT_MAX_MS. */
export const STABLE_CONNECTION_MS = 10_000;
/** How often a connected server is pinged: an HTTP server that went away, or restarted and forgot
 * its session, is only noticed by a request, so one is made. */
export const PING_INTERVAL_MS = 15_000;
/** A ping, initialize or listing answers within this, or the server is taken for gone. */
export const CONTROL_TIMEOUT_MS = 10_000;
/** A tool call answers within this (the SDK's own default request timeout): past it the caller gets
 * `timeout`. A longer invocation deadline does not make an MCP server answer sooner. */
export const TOOL_CALL_TIMEOUT_MS = 60_000;

/** Registers a function; its result may undo it (sdk-edge's EdgeClient does; a WorkerSurface does not). */
export interface FunctionRegistrar {
  registerFunction(
    id: string,
    handler: WorkerHandler,
    options: { description?: string; request_format?: unknown; metadata?: Record<string, unknown> },
  ): { unregister(): void } | void;
}

export interface McpClientOptions {
  servers: readonly McpServerConfig[];
  /** The transport to a server (index.ts: Streamable HTTP; node.ts adds stdio). */
  transportFor(server: McpServerConfig): Transport;
  log?: (line: string) => void;
  /** Overrides for tests. */
  pingMs?: number;
  reconnectInitialMs?: number;
  reconnectMaxMs?: number;
}

export interface ServerStatus {
  name: string;
  transport: "http" | "stdio";
  connected: boolean;
  tools: { tool: string; function_id: string }[];
  /** Why it is not connected, when it is not. */
  last_error?: string;
}

export interface McpClientHandle {
  status(): ServerStatus[];
  /** Disconnect every server (stdio children end) and unregister their functions. */
  close(): Promise<void>;
}

/** The tool's arguments: the caller's payload as it came (a model's call arrives unchanged; who
 * called travels as invocation metadata), less the keys the engine stamps on object payloads (iii
 * §4.6), which a server with a strict schema would refuse. */
function toolArguments(args: unknown): Record<string, unknown> {
  const out = withoutCallerId(args);
  return isRecord(out) ? out : {};
}
const oneLine = (e: unknown) => (e instanceof Error ? e.message : String(e)).replace(/\s+/g, " ").slice(0, 300);

/** A tool's answer as the function's result: its content (and structured content when given). A
 * tool error is the call's error, with the tool's text as the message. */
function resultOf(server: string, tool: string, r: CallToolResult): unknown {
  if (r.isError) {
    const text = r.content.map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join("\n");
    throw new IIIError("invocation_failed", `MCP tool ${tool} of ${server}: ${text.slice(0, 2000) || "failed"}`);
  }
  const out: { content: CallToolResult["content"]; structuredContent?: Record<string, unknown> } = { content: r.content };
  if (r.structuredContent !== undefined) out.structuredContent = r.structuredContent;
  return out;
}

/** One configured server and the functions its tools are registered as. */
class ServerLink {
  private client: Client | undefined;
  private readonly registered = new Map<string, { function_id: string; key: string; ref: { unregister(): void } | undefined }>();
  private attempt = 0;
  private connectedAt = 0;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private pingTimer: ReturnType<typeof setInterval> | undefined;
  private closed = false;
  private refreshing: Promise<void> | undefined;
  private refreshAgain = false;
  lastError: string | undefined;

  readonly config: McpServerConfig;
  private readonly registrar: FunctionRegistrar;
  private readonly options: McpClientOptions;
  private readonly log: (line: string) => void;

  constructor(config: McpServerConfig, registrar: FunctionRegistrar, options: McpClientOptions, log: (line: string) => void) {
    this.config = config;
    this.registrar = registrar;
    this.options = options;
    this.log = log;
  }

  get connected(): boolean {
    return this.client !== undefined;
  }

  status(): ServerStatus {
    const s: ServerStatus = {
      name: this.config.name,
      transport: isStdio(this.config) ? "stdio" : "http",
      connected: this.connected,
      tools: [...this.registered.entries()].map(([tool, r]) => ({ tool, function_id: r.function_id })),
    };
    if (!this.connected && this.lastError !== undefined) s.last_error = this.lastError;
    return s;
  }

  async connect(): Promise<void> {
    if (this.closed) return;
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => this.refresh());
    client.onclose = () => {
      if (this.client === client) this.lost("the connection closed");
    };
    try {
      await client.connect(this.options.transportFor(this.config), { timeout: CONTROL_TIMEOUT_MS });
    } catch (e) {
      client.onclose = undefined;
      await client.close().catch(() => undefined);
      this.lastError = oneLine(e);
      this.log(`mcp: ${this.config.name}: cannot connect (${this.lastError}); retrying`);
      return this.scheduleReconnect();
    }
    if (this.closed) {
      await client.close().catch(() => undefined);
      return;
    }
    this.client = client;
    this.connectedAt = Date.now();
    this.lastError = undefined;
    this.log(
      `mcp: ${this.config.name}: connected (${client.getServerVersion()?.name ?? "?"} ${client.getServerVersion()?.version ?? ""})`.trimEnd(),
    );
    const pingMs = this.options.pingMs ?? PING_INTERVAL_MS;
    this.pingTimer = setInterval(() => {
      client.ping({ timeout: CONTROL_TIMEOUT_MS }).catch((e: unknown) => {
        if (this.client === client) this.lost(`ping failed: ${oneLine(e)}`);
      });
    }, pingMs);
    (this.pingTimer as { unref?: () => void }).unref?.();
    await this.refresh();
  }

  /** The server went away: its functions leave the catalog, and a reconnect is scheduled. */
  private lost(reason: string): void {
    const client = this.client;
    if (!client) return;
    this.client = undefined;
    this.lastError = reason;
    if (Date.now() - this.connectedAt >= STABLE_CONNECTION_MS) this.attempt = 0;
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = undefined;
    this.unregisterAll();
    void client.close().catch(() => undefined);
    if (this.closed) return;
    this.log(`mcp: ${this.config.name}: disconnected (${reason}); reconnecting`);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed) return;
    const base = this.options.reconnectInitialMs ?? RECONNECT_INITIAL_MS;
    const delay = Math.min(base * 2 ** this.attempt, this.options.reconnectMaxMs ?? RECONNECT_MAX_MS) * (0.8 + 0.4 * Math.random());
    this.attempt++;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.connect();
    }, delay);
    (this.reconnectTimer as { unref?: () => void }).unref?.();
  }

  /** Re-list the tools and bring the registrations in step. One at a time: a change announced
   * during a listing runs another listing after it. */
  refresh(): Promise<void> {
    if (this.refreshing) {
      this.refreshAgain = true;
      return this.refreshing;
    }
    this.refreshing = (async () => {
      do {
        this.refreshAgain = false;
        await this.listAndRegister();
      } while (this.refreshAgain && this.client);
    })().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async listAndRegister(): Promise<void> {
    const client = this.client;
    if (!client) return;
    const tools: Tool[] = [];
    try {
      let cursor: string | undefined;
      for (let page = 0; page < MAX_LIST_PAGES; page++) {
        const r = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: CONTROL_TIMEOUT_MS });
        tools.push(...r.tools);
        cursor = r.nextCursor;
        if (cursor === undefined || tools.length >= MAX_TOOLS_PER_SERVER) break;
      }
    } catch (e) {
      if (this.client === client) this.lost(`tools/list failed: ${oneLine(e)}`);
      return;
    }
    if (this.client !== client) return;
    if (tools.length > MAX_TOOLS_PER_SERVER)
      this.log(`mcp: ${this.config.name}: ${tools.length} tools, only the first ${MAX_TOOLS_PER_SERVER} are registered`);
    const offered = new Map(tools.slice(0, MAX_TOOLS_PER_SERVER).map((t) => [t.name, t]));
    for (const [name, r] of [...this.registered]) {
      if (offered.has(name)) continue;
      r.ref?.unregister();
      this.registered.delete(name);
    }
    for (const [name, tool] of offered) {
      const key = JSON.stringify([tool.description ?? null, tool.inputSchema]);
      if (this.registered.get(name)?.key === key) continue;
      // New or changed: registering the id again replaces it (same connection, so same owner).
      const function_id = clientFunctionId(this.config.name, name);
      const ref = this.registrar.registerFunction(function_id, (args: unknown) => this.call(name, args), {
        description: `${tool.description ?? tool.title ?? name} (tool ${name} of MCP server ${this.config.name})`,
        request_format: tool.inputSchema,
        // Never served back out by this engine's own MCP server (expose.ts): it is someone else's tool.
        metadata: { [EXPOSE_METADATA_KEY]: { expose: false, server: this.config.name, tool: name } },
      });
      this.registered.set(name, { function_id, key, ref: ref ?? undefined });
    }
  }

  private async call(tool: string, args: unknown): Promise<unknown> {
    const client = this.client;
    if (!client)
      throw new IIIError(
        "not_connected",
        `MCP server ${this.config.name} is not connected${this.lastError ? ` (${this.lastError})` : ""}; reconnecting`,
      );
    const entry = this.registered.get(tool);
    if (!entry) throw new IIIError("function_not_found", `MCP server ${this.config.name} no longer offers tool ${tool}`);
    let r: CallToolResult;
    try {
      r = (await client.callTool({ name: tool, arguments: toolArguments(args) }, undefined, {
        timeout: TOOL_CALL_TIMEOUT_MS,
      })) as CallToolResult;
    } catch (e) {
      const message = oneLine(e);
      if (/timed out|timeout/i.test(message)) throw new IIIError("timeout", `MCP tool ${tool} of ${this.config.name}: ${message}`);
      throw new IIIError("invocation_failed", `MCP tool ${tool} of ${this.config.name}: ${message}`);
    }
    return resultOf(this.config.name, tool, r);
  }

  private unregisterAll(): void {
    // A registrar that cannot unregister (a plain WorkerSurface) keeps the functions; their calls
    // answer `not_connected` until the server is back.
    if ([...this.registered.values()].some((r) => r.ref === undefined)) return;
    for (const r of this.registered.values()) r.ref?.unregister();
    this.registered.clear();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    if (this.pingTimer) clearInterval(this.pingTimer);
    const client = this.client;
    this.client = undefined;
    for (const r of this.registered.values()) r.ref?.unregister();
    this.registered.clear();
    await client?.close().catch(() => undefined);
  }
}

/**
 * Connect to every configured server and keep their tools registered through `registrar` (an
 * EdgeClient, or a WorkerSurface). Returns at once; connections are made in the background.
 */
export function startMcpClient(registrar: FunctionRegistrar, options: McpClientOptions): McpClientHandle {
  const log = options.log ?? ((line: string) => console.warn(line));
  const links = options.servers.map((s) => new ServerLink(s, registrar, options, log));
  registrar.registerFunction(MCP_SERVERS_FUNCTION, () => ({ servers: links.map((l) => l.status()) }), {
    description:
      "The MCP servers this worker connects to: for each, whether it is connected and the functions (mcp::<server>::<tool>) its tools are registered as",
    request_format: { type: "object", properties: {} },
    metadata: { [EXPOSE_METADATA_KEY]: { expose: false } },
  });
  for (const l of links) void l.connect();
  return {
    status: () => links.map((l) => l.status()),
    close: async () => {
      await Promise.all(links.map((l) => l.close()));
    },
  };
}

/** A WorkerSurface as a registrar (its registrations cannot be undone). */
export const surfaceRegistrar = (iii: WorkerSurface): FunctionRegistrar => ({
  registerFunction: (id, handler, options) => iii.registerFunction(id, handler, options),
});
