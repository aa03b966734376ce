// The engine's catalog as an MCP server (workers/mcp/src/server.ts, mounted at /mcp by
// deploy/worker.ts), driven by the official MCP TypeScript SDK's Client over Streamable HTTP against
// `npm start` with AUTH_SECRET set: what is listed (exposed functions with their schemas, only what
// the token may call), a call that reaches a worker's function, refusals, and list_changed while a
// worker comes and goes.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { registerWorker } from "@iii-edge/sdk-edge";
import type { EdgeClient } from "@iii-edge/sdk-edge/client";
import { toolNameOf } from "@iii-edge/worker-mcp/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { until } from "@iii-edge/test-support/wait";

let engine: EngineServer;
let fns: EdgeClient;
let team: EdgeClient;
const clients: Client[] = [];
/** list_changed reaches the client within the server's poll (1 s) plus a catalog read; a new worker must connect first: 20 s is slack for a busy box. */
const LIST_CHANGED_MS = 20_000;

const quiet = { otel: { enabled: false }, enableMetricsReporting: false } as const;

/** A connected SDK client; `streams` counts the notification (GET) streams the server answered. */
async function connect(path: string, tok: string | undefined, onListChanged?: () => void): Promise<Client & { streams: () => number }> {
  const client = new Client({ name: "mcp-server-test", version: "1.0.0" });
  if (onListChanged) client.setNotificationHandler(ToolListChangedNotificationSchema, async () => onListChanged());
  let streams = 0;
  // The server reads its baseline tool list before it answers the GET: once answered, a change is news.
  const observed: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if ((init?.method ?? "GET") === "GET" && res.ok) streams++;
    return res;
  };
  const transport = new StreamableHTTPClientTransport(new URL(`${engine.url}${path}`), {
    requestInit: tok ? { headers: bearer(tok) } : {},
    fetch: observed,
  });
  await client.connect(transport);
  clients.push(client);
  return Object.assign(client, { streams: () => streams });
}
const names = (tools: Tool[]) => tools.map((t) => t.name).sort();

beforeAll(async () => {
  engine = await startSecureEngine({ MCP_EXPOSE: "mcptest::*" });
  fns = registerWorker(engine.wsUrl, { workerName: "mcptest", headers: bearer(await token("mcptest")), ...quiet });
  fns.registerFunction("mcptest::echo", async ({ text }: { text: string }) => ({ echo: text, from: "mcptest worker" }), {
    description: "Echoes its text",
    input: z.object({ text: z.string() }),
  });
  fns.registerFunction("mcptest::hidden", async () => ({ secret: true }), { input: z.object({}), metadata: { mcp: { expose: false } } });
  fns.registerFunction("mcptest::no-schema", async () => ({ ok: true }), { description: "No request_format: a tool that takes anything" });
  fns.registerFunction("other::opted-in", async ({ n }: { n: number }) => ({ doubled: n * 2 }), {
    input: z.object({ n: z.number() }),
    metadata: { mcp: { expose: true } },
  });
  fns.registerFunction("other::plain", async () => ({ ok: true }), { input: z.object({}) });
  // Two ids that read the same as tool names (`::` becomes `__`).
  fns.registerFunction("mcptest::dup", async () => ({ which: "mcptest::dup" }), { input: z.object({}) });
  fns.registerFunction("mcptest__dup", async () => ({ which: "mcptest__dup" }), {
    input: z.object({}),
    metadata: { mcp: { expose: true } },
  });
  team = registerWorker(`${engine.wsUrl}/ns/team`, { workerName: "team", headers: bearer(await token("team")), ...quiet });
  team.registerFunction("mcptest::team-only", async () => ({ ns: "team" }), { input: z.object({}) });
  const admin = await token("admin");
  await until(async () => {
    const r = await fetch(`${engine.url}/_iii/invoke`, {
      method: "POST",
      headers: bearer(admin),
      body: JSON.stringify({ function_id: "engine::functions::list", payload: { prefix: "other::" } }),
    });
    return ((await r.json()) as { result: { functions: unknown[] } }).result.functions.length === 2;
  }, "the test functions in the catalog");
  await until(async () => {
    const r = await fetch(`${engine.url}/_iii/invoke`, {
      method: "POST",
      headers: bearer(admin),
      body: JSON.stringify({ function_id: "engine::functions::list", payload: { prefix: "mcptest" } }),
    });
    return ((await r.json()) as { result: { functions: unknown[] } }).result.functions.length === 5;
  }, "the test functions in the catalog");
}, 120_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await Promise.all([fns?.shutdown(), team?.shutdown()]);
  await engine?.stop();
});

describe("MCP server at /mcp (official SDK client)", () => {
  it("initializes, and lists exactly the exposed functions, with their schemas", async () => {
    const client = await connect("/mcp", await token("alice"));
    expect(client.getServerVersion()?.name).toBe("iii-edge");
    expect(client.getServerCapabilities()?.tools?.listChanged).toBe(true);
    const { tools } = await client.listTools();
    // mcptest::dup reads back from mcptest__dup; the id mcptest__dup does not, so it is told apart
    // by a hash of its id (never by the order of registration or listing).
    expect(names(tools)).toEqual(
      ["mcptest__dup", await toolNameOf("mcptest__dup"), "mcptest__echo", "mcptest__no-schema", "other__opted-in"].sort(),
    );
    expect(await toolNameOf("mcptest__dup")).toMatch(/^mcptest__dup_[0-9a-f]{16}$/);
    const echo = tools.find((t) => t.name === "mcptest__echo")!;
    expect(echo.title).toBe("mcptest::echo");
    expect(echo.description).toContain("Echoes its text");
    expect(echo.inputSchema).toMatchObject({ type: "object", properties: { text: { type: "string" } }, required: ["text"] });
    // Without a request_format: any object, and a description that says so.
    const loose = tools.find((t) => t.name === "mcptest__no-schema")!;
    expect(loose.inputSchema).toEqual({ type: "object" });
    expect(loose.description).toMatch(/Warning: arguments are not checked/);
    await client.ping();
  });

  it("a tool call is an invocation of the worker's function", async () => {
    const client = await connect("/mcp", await token("alice"));
    const r = await client.callTool({ name: "mcptest__echo", arguments: { text: "hi" } });
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent).toEqual({ echo: "hi", from: "mcptest worker" });
    expect(r.content).toEqual([{ type: "text", text: JSON.stringify({ echo: "hi", from: "mcptest worker" }) }]);
    // Arguments that do not match the tool's inputSchema answer as a tool error the model can read.
    const bad = await client.callTool({ name: "mcptest__echo", arguments: { text: 42 } });
    expect(bad.isError).toBe(true);
    expect(JSON.stringify(bad.content)).toMatch(/invalid_input: arguments for mcptest::echo .*text: /);
  });

  it("refuses an unexposed function, and one the token may not call", async () => {
    const client = await connect("/mcp", await token("bob", { call: ["mcptest::*"] }));
    // bob's grant may not call other::opted-in: it is not listed for him…
    expect(names((await client.listTools()).tools)).toEqual(["mcptest__dup", "mcptest__echo", "mcptest__no-schema"]);
    // …and calling it is refused by the engine, with his name.
    const forbidden = await client.callTool({ name: "other__opted-in", arguments: { n: 2 } });
    expect(forbidden.isError).toBe(true);
    expect(JSON.stringify(forbidden.content)).toContain("forbidden: 'bob' may not call other::opted-in");
    // Not exposed (metadata says no, no glob): no such tool, whatever the grant.
    for (const name of ["mcptest__hidden", "other__plain"]) {
      await expect(client.callTool({ name, arguments: {} })).rejects.toThrow(/unknown tool/);
    }
  });

  it("a tool's name is the same whoever lists it, so it always calls the same function", async () => {
    // Only mcptest__dup is callable for dave: it has its distinguished name, as in everyone's listing.
    const client = await connect("/mcp", await token("dave", { call: ["mcptest__dup"] }));
    const dup = await toolNameOf("mcptest__dup");
    expect((await client.listTools()).tools.map((t) => [t.name, t.title])).toEqual([[dup, "mcptest__dup"]]);
    expect((await client.callTool({ name: dup, arguments: {} })).structuredContent).toEqual({ which: "mcptest__dup" });
    expect((await client.callTool({ name: "mcptest__dup", arguments: {} })).isError).toBe(true);
  });

  it("without a valid token: 401 before anything is read", async () => {
    const noToken = await fetch(`${engine.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(noToken.status).toBe(401);
    expect(noToken.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect(((await noToken.json()) as { error: { code: string } }).error.code).toBe("unauthorized");
    await expect(connect("/mcp", "not-a-token")).rejects.toThrow();
    // A token for other namespaces only: 403 here.
    const elsewhere = await fetch(`${engine.url}/mcp`, {
      method: "POST",
      headers: { ...bearer(await token("carol", { ns: ["team"] })), "content-type": "application/json" },
      body: "{}",
    });
    expect(elsewhere.status).toBe(403);
  });

  it("/ns/<ns>/mcp serves that namespace's catalog", async () => {
    const client = await connect("/ns/team/mcp", await token("alice"));
    const { tools } = await client.listTools();
    expect(names(tools)).toEqual(["mcptest__team-only"]);
    expect((await client.callTool({ name: "mcptest__team-only", arguments: {} })).structuredContent).toEqual({ ns: "team" });
  });

  it("notifies list_changed when a worker registers an exposed function, and again when it leaves", async () => {
    let changes = 0;
    const client = await connect("/mcp", await token("alice"), () => changes++);
    expect(names((await client.listTools()).tools)).not.toContain("mcptest__late");
    await until(() => client.streams() > 0, "the client's notification stream");
    const baseline = changes;
    const late = registerWorker(engine.wsUrl, { workerName: "late", headers: bearer(await token("late")), ...quiet });
    try {
      late.registerFunction("mcptest::late", async () => ({ late: true }), { input: z.object({}) });
      await until(() => changes > baseline, "list_changed after the registration", LIST_CHANGED_MS);
      expect(names((await client.listTools()).tools)).toContain("mcptest__late");
      expect((await client.callTool({ name: "mcptest__late", arguments: {} })).structuredContent).toEqual({ late: true });
    } finally {
      await late.shutdown();
    }
    const afterJoin = changes;
    await until(() => changes > afterJoin, "list_changed after the worker left", LIST_CHANGED_MS);
    expect(names((await client.listTools()).tools)).not.toContain("mcptest__late");
  });

  it("a notification stream carries the tool list's id; reconnecting with a stale Last-Event-ID is told at once that the list changed", async () => {
    const tok = await token("alice");
    const open = (lastEventId?: string) =>
      fetch(`${engine.url}/mcp`, {
        headers: {
          ...bearer(tok),
          accept: "text/event-stream",
          "mcp-protocol-version": "2025-11-25",
          ...(lastEventId ? { "last-event-id": lastEventId } : {}),
        },
      });
    /** The stream's text until `done` says so (or the deadline), then the stream is dropped. */
    const readUntil = async (res: Response, done: (text: string) => boolean) => {
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = "";
      const deadline = Date.now() + LIST_CHANGED_MS;
      while (!done(text) && Date.now() < deadline) {
        const r = await Promise.race([reader.read(), new Promise<undefined>((ok) => setTimeout(ok, deadline - Date.now()))]);
        if (!r || r.done) break;
        text += decoder.decode(r.value, { stream: true });
      }
      await reader.cancel();
      return text;
    };
    const first = await open();
    expect(first.status).toBe(200);
    expect(first.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const id = /^id: (tools-[0-9a-f]+)$/m.exec(await readUntil(first, (t) => /^id: /m.test(t)))?.[1];
    expect(id).toBeDefined();
    // The id is the list's: the same list, the same id.
    expect(await readUntil(await open(), (t) => /^id: /m.test(t))).toContain(`id: ${id}`);
    const stale = await readUntil(await open("tools-0"), (t) => t.includes("notifications/tools/list_changed"));
    expect(stale).toContain('"method":"notifications/tools/list_changed"');
  });

  it("answers other methods with 405 and a bad namespace with 400", async () => {
    const del = await fetch(`${engine.url}/mcp`, { method: "DELETE", headers: bearer(await token("alice")) });
    expect(del.status).toBe(405);
    const badNs = await fetch(`${engine.url}/ns/${"x".repeat(80)}/mcp`, {
      method: "POST",
      headers: bearer(await token("alice")),
      body: "{}",
    });
    expect(badNs.status).toBe(400);
  });
});
