// The engine's catalog as an MCP server over Streamable HTTP (MCP 2025-11-25 and earlier), at `/mcp`
// (namespace `default`) and `/ns/<namespace>/mcp`, served by the composite Worker (deploy/worker.ts).
//
// - Tools: the functions the expose rule lets out (expose.ts: metadata `mcp.expose`, else the
//   `MCP_EXPOSE` globs; nothing by default). A function's object `request_format` is the tool's
//   `inputSchema`; one without takes any object, and its description says its arguments go
//   unchecked. A caller sees only what its grant may call.
// - `tools/call` checks the arguments against the tool's `inputSchema` (arguments.ts) and calls the
//   function only when they match: a tool error names the wrong fields otherwise. The call is an
//   invocation with the caller's grant: the bearer token is checked as the front door checks it
//   (auth.ts), and the engine enforces its `call` globs (`forbidden` otherwise).
// - Stateless: a Worker request may land on any isolate, so no session is held and no
//   `Mcp-Session-Id` issued (the transport makes sessions optional). Each POST gets a fresh SDK
//   `Server` over the SDK's web-standard transport, answered as JSON.
// - `notifications/tools/list_changed` goes down the client's standalone GET stream: the stream
//   re-reads the caller's tool list every LIST_POLL_MS and says so when it differs (a Worker cannot
//   hold an engine subscription, and the catalog read is the engine's in-memory built-in). Each
//   stream also carries the list's fingerprint as its SSE event id, so a client that reconnects
//   (after NOTIFY_STREAM_MAX_MS, or a dropped connection) with `Last-Event-ID` is told at once about
//   a change it missed meanwhile.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
} from "@modelcontextprotocol/sdk/types.js";
import type { jsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js";
import { mayCall, type Grant, isRecord } from "@iii-edge/protocol";
import { checkArguments } from "./arguments.ts";
import { authenticateMcp, type AuthEnv, type McpAuth } from "./auth.ts";
import { exposedTools, fingerprintOf, type EngineCaller, type ToolEntry } from "./catalog.ts";
import { exposeRuleFrom, type ExposeRule } from "./expose.ts";

export { exposeRuleFrom, isExposed, toolNameOf, EXPOSE_METADATA_KEY } from "./expose.ts";
export type { ExposeRule } from "./expose.ts";
export type { EngineCaller, ToolEntry } from "./catalog.ts";

/** How often an open notification stream re-reads the tool list: the latency of `list_changed`
 * (plus the engine's 10 ms coalescing), for one catalog read per second per open stream. */
export const LIST_POLL_MS = 1_000;
/** A notification stream is closed after this and the client reconnects (the SDK's client does so
 * within a second, resuming with `Last-Event-ID`): no request is held open without end. */
export const NOTIFY_STREAM_MAX_MS = 5 * 60_000;
/** Largest POST body: one JSON-RPC message with a tool's arguments; an invocation carries at most
 * one 1 MiB frame (protocol MAX_FRAME_BYTES), so nothing bigger could reach a function anyway. */
export const MAX_MCP_BODY_BYTES = 1024 * 1024;
/** Protocol versions from which an SSE event with an id and empty data is understood (the SDK sends
 * its own "priming" events only from this version on; older clients choke on the empty data). */
const EVENT_ID_MIN_PROTOCOL = "2025-11-25";
/** The JSON-RPC notification a changed list is announced with. */
const LIST_CHANGED = JSON.stringify({ jsonrpc: "2.0", method: "notifications/tools/list_changed" });

/** iii namespaces name Durable Objects (the front door's rule). */
const NAMESPACE = /^[A-Za-z0-9._-]{1,64}$/;
const MCP_PATH = /^\/(?:ns\/([^/]+)\/)?mcp\/?$/;

export const SERVER_INFO = { name: "iii-edge", version: "0.1.0" } as const;

/** The namespace an MCP path names (`/mcp` → `default`), or undefined when it is no MCP path. */
export function mcpNamespaceOf(pathname: string): string | undefined {
  const m = MCP_PATH.exec(pathname);
  if (!m) return undefined;
  if (m[1] === undefined) return "default";
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return m[1]; // a malformed escape: not a namespace name, refused as one by the caller (400)
  }
}

export interface McpServerDeps {
  /** The engine of a namespace. */
  engine(namespace: string): EngineCaller;
  /** Who the request is (default: auth.ts over `env`). */
  authenticate(req: Request, namespace: string): Promise<McpAuth>;
  rule: ExposeRule;
  /** Overrides for tests. */
  pollMs?: number;
  streamMaxMs?: number;
}

/** What the Worker's env holds for this server. */
export interface McpEnv extends AuthEnv {
  ENGINE: { getByName(name: string): unknown };
  MCP_EXPOSE?: string;
}

/** The dependencies from a Worker's env: the `ENGINE` Durable Object namespace, auth and `MCP_EXPOSE`. */
export function depsFromEnv(env: McpEnv): McpServerDeps {
  const engine = (ns: string) => env.ENGINE.getByName(ns) as EngineCaller;
  return {
    engine,
    rule: exposeRuleFrom(env.MCP_EXPOSE),
    authenticate: (req, ns) =>
      authenticateMcp(req, ns, env, (function_id, payload, timeout_ms) => engine("default").trigger({ function_id, payload, timeout_ms })),
  };
}

/** The Worker's handler for an MCP path (deploy/worker.ts routes `/mcp` and `/ns/<ns>/mcp` here). */
export function serveMcp(req: Request, env: McpEnv): Promise<Response> {
  const namespace = mcpNamespaceOf(new URL(req.url).pathname) ?? "default";
  return handleMcpRequest(req, namespace, depsFromEnv(env));
}

const jsonError = (status: number, code: string, message: string, headers: Record<string, string> = {}) =>
  Response.json({ error: { code, message } }, { status, headers });

/** Elicitation is the only thing the SDK's server validates with JSON Schema, and this server never
 * elicits: a validator that refuses keeps Ajv (which compiles code, not allowed in workerd) unused. */
const noValidator: jsonSchemaValidator = {
  getValidator: () => () => ({ valid: false, data: undefined, errorMessage: "this server validates no JSON Schema" }),
};

/** A function's answer as a tool result: its JSON as text, and as structured content when an object. */
function toolResult(result: unknown): CallToolResult {
  const text = result === undefined ? "null" : JSON.stringify(result);
  const out: CallToolResult = { content: [{ type: "text", text }] };
  if (isRecord(result)) out.structuredContent = result;
  return out;
}

/** The SDK server for one request by `grant` in one namespace. */
function mcpServer(deps: McpServerDeps, namespace: string, grant: Grant, trace: { traceparent?: string; baggage?: string }): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: { listChanged: true } },
    jsonSchemaValidator: noValidator,
    instructions: `The tools of the iii engine's catalog in namespace "${namespace}": each calls one function (named in its description) with your permissions.`,
  });
  const engine = deps.engine(namespace);
  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const tools = await exposedTools(engine, deps.rule, grant);
    return { tools: tools.map(toMcpTool) };
  });
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    // Found among every exposed tool, not only those the grant may call: a tool the caller may not
    // call is refused by the engine as `forbidden`, which says more than "unknown tool".
    const tools = await exposedTools(engine, deps.rule);
    const tool = tools.find((t) => t.name === request.params.name);
    if (!tool)
      throw new McpError(
        ErrorCode.InvalidParams,
        `unknown tool '${request.params.name.slice(0, 80)}': tools/list shows the tools this server exposes`,
      );
    const args = request.params.arguments ?? {};
    // A tool error, not a JSON-RPC one: the model reads it and can call again with better arguments.
    // Only for a caller who may call the function: anyone else hears `forbidden` from the engine,
    // never what the function's schema wants.
    const checked = tool.unchecked === undefined && mayCall(grant, tool.function_id);
    const check = checked ? checkArguments(tool.function_id, tool.inputSchema, args) : { ok: true as const };
    if (!check.ok) return { isError: true, content: [{ type: "text", text: check.message }] };
    const out = await engine.trigger({ function_id: tool.function_id, payload: args, grant, ...trace });
    if (out.ok) return toolResult(out.result);
    return { isError: true, content: [{ type: "text", text: `${out.error.code}: ${out.error.message}` }] };
  });
  return server;
}

function toMcpTool(t: ToolEntry) {
  const lead = t.description ? `${t.description}\n\n` : "";
  // Said where the model and the person wiring it up both look: nothing checks what it sends.
  const warning =
    t.unchecked === undefined
      ? ""
      : `\n\nWarning: arguments are not checked, ${t.unchecked}; any object is passed to the function as it is.`;
  return {
    name: t.name,
    title: t.function_id,
    description: `${lead}(iii function ${t.function_id})${warning}`,
    inputSchema: t.inputSchema,
    _meta: { "iii/function_id": t.function_id },
  };
}

/** One Streamable HTTP request to the MCP endpoint of `namespace`. */
export async function handleMcpRequest(req: Request, namespace: string, deps: McpServerDeps): Promise<Response> {
  if (req.method !== "POST" && req.method !== "GET") {
    // DELETE ends a session, and there are none (stateless); anything else is no MCP method.
    return jsonError(
      405,
      "invalid_arguments",
      `${req.method} is not supported: MCP clients POST JSON-RPC here, and GET for notifications`,
      { Allow: "GET, POST" },
    );
  }
  if (!NAMESPACE.test(namespace)) return jsonError(400, "invalid_arguments", `invalid namespace '${namespace.slice(0, 80)}'`);
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (declared > MAX_MCP_BODY_BYTES) return jsonError(413, "value_too_large", `body of ${declared} bytes exceeds ${MAX_MCP_BODY_BYTES}`);
  const who = await deps.authenticate(req, namespace);
  if (!who.ok) {
    const headers: Record<string, string> = who.status === 401 ? { "WWW-Authenticate": 'Bearer realm="iii-edge"' } : {};
    return jsonError(who.status, who.code, who.message, headers);
  }
  const trace: { traceparent?: string; baggage?: string } = {};
  const tp = req.headers.get("traceparent");
  if (tp) trace.traceparent = tp;
  const bg = req.headers.get("baggage");
  if (bg) trace.baggage = bg;
  const server = mcpServer(deps, namespace, who.grant, trace);
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
    maxRequestBodySize: MAX_MCP_BODY_BYTES,
  });
  await server.connect(transport);
  if (req.method === "POST") {
    try {
      return await transport.handleRequest(req);
    } finally {
      // A JSON answer is complete once handleRequest resolves: nothing of this request stays.
      await server.close();
    }
  }
  return notificationStream(req, server, transport, deps, namespace, who.grant);
}

/** The standalone GET stream: list_changed whenever the caller's tool list changes. */
async function notificationStream(
  req: Request,
  server: Server,
  transport: WebStandardStreamableHTTPServerTransport,
  deps: McpServerDeps,
  namespace: string,
  grant: Grant,
): Promise<Response> {
  const engine = deps.engine(namespace);
  const listNow = async () => fingerprintOf(await exposedTools(engine, deps.rule, grant));
  let fingerprint: string;
  try {
    fingerprint = await listNow();
  } catch (e) {
    await server.close();
    return jsonError(503, "invocation_failed", `the catalog could not be read: ${e instanceof Error ? e.message : String(e)}`);
  }
  const res = await transport.handleRequest(req);
  if (!res.ok || !res.body) {
    await server.close();
    return res;
  }
  const version = req.headers.get("mcp-protocol-version");
  const withIds = version !== null && version >= EVENT_ID_MIN_PROTOCOL;
  const encoder = new TextEncoder();
  /** An SSE event carrying only an id: the client remembers it and sends it back as Last-Event-ID. */
  const idEvent = (fp: string) => encoder.encode(`id: ${eventIdOf(fp)}\ndata: \n\n`);
  const missed = (req.headers.get("last-event-id") ?? "") !== "" && req.headers.get("last-event-id") !== eventIdOf(fingerprint);

  const upstream = res.body.getReader();
  /** Our own events, ahead of the transport's. At most one per poll while a client does not read:
   * bounded by NOTIFY_STREAM_MAX_MS / LIST_POLL_MS. */
  const pending: Uint8Array[] = withIds ? [idEvent(fingerprint)] : [];
  /** The one read of the transport's stream in flight (a second concurrent read would lose data). */
  let reading: ReturnType<typeof upstream.read> | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  let wake: (() => void) | undefined;
  const openedAt = Date.now();
  const pollMs = deps.pollMs ?? LIST_POLL_MS;
  const maxMs = deps.streamMaxMs ?? NOTIFY_STREAM_MAX_MS;

  const stop = () => {
    if (stopped) return;
    stopped = true;
    if (timer) clearTimeout(timer);
    wake?.();
    void server.close().catch(() => undefined);
  };
  // The notification and the list's new id in one SSE event, so a client never holds the new id
  // without the news (the transport's own writer would send them as two).
  const notify = (fp: string) => {
    pending.push(encoder.encode(`${withIds ? `id: ${eventIdOf(fp)}\n` : ""}event: message\ndata: ${LIST_CHANGED}\n\n`));
    wake?.();
  };
  const poll = async () => {
    timer = undefined;
    if (stopped) return;
    if (Date.now() - openedAt >= maxMs) return stop();
    try {
      const fp = await listNow();
      if (fp !== fingerprint) {
        fingerprint = fp;
        notify(fp);
      }
    } catch {
      // The engine did not answer this time (a deploy, an eviction): the next poll tries again.
    }
    if (!stopped) timer = setTimeout(() => void poll(), pollMs);
  };
  if (missed) notify(fingerprint);
  timer = setTimeout(() => void poll(), pollMs);

  // The transport's stream, with the id events put between its whole events, and a hook on the
  // client going away (a Worker would otherwise keep polling for a reader that is gone).
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        const next = pending.shift();
        if (next) return controller.enqueue(next);
        if (stopped) {
          controller.close();
          return;
        }
        const own = new Promise<"own">((r) => (wake = () => r("own")));
        reading ??= upstream.read();
        const r = await Promise.race([reading, own]);
        wake = undefined;
        if (r === "own") continue;
        reading = undefined;
        if (r.done) {
          stop();
          controller.close();
          return;
        }
        controller.enqueue(r.value);
        return;
      }
    },
    cancel(reason) {
      stop();
      void upstream.cancel(reason).catch(() => undefined);
    },
  });
  return new Response(body, { status: res.status, headers: res.headers });
}

/** The SSE event id of a tool list: a short hash of its fingerprint (ids travel in headers). */
function eventIdOf(fingerprint: string): string {
  let h1 = 0x811c9dc5;
  let h2 = 0x01000193;
  for (let i = 0; i < fingerprint.length; i++) {
    const c = fingerprint.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193);
    h2 = Math.imul(h2 ^ c, 0x5bd1e995);
  }
  return `tools-${(h1 >>> 0).toString(16)}${(h2 >>> 0).toString(16)}`;
}
