// The MCP client worker (workers/mcp, what `npm run worker -- mcp` runs) against servers built with
// the official MCP TypeScript SDK's McpServer, through the engine core served in this process
// (@iii-edge/test-support/node-engine): one server over Streamable HTTP on a local port, one over
// stdio as a child process. Their tools appear in the engine's catalog as mcp::<server>::<tool>
// with the tool's inputSchema as request_format, calls through the engine return the tools'
// results, a tool added later appears, and a server that goes away and comes back (the HTTP one
// restarted, the stdio one killed) has its tools leave the catalog and return. The engine's own
// /mcp as a server, and the worker as its own process, are in tests/node/mcp-client.test.ts.
import path from "node:path";
import { run } from "@iii-edge/worker-mcp/node";
import { runWorkers, type RunningWorkers } from "@iii-edge/sdk-edge/worker-node";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { freePort, repoRoot } from "@iii-edge/test-support/engine-server";
import { startNodeEngine, type NodeEngine } from "@iii-edge/test-support/node-engine";
import { until } from "@iii-edge/test-support/wait";
import { httpFixture, type HttpFixture } from "../node/mcp-fixture-http.ts";
import { mcpCalls } from "../node/mcp-calls.ts";

const STDIO_FIXTURE = path.join(repoRoot, "tests/node/mcp-fixture-stdio.mjs");
/** The client's ping in this suite: a server that went away is noticed within it. */
const PING_MS = 300;
/** Catalog changes here wait on a ping, a reconnect backoff and a listing: generous for a busy box. */
const CHANGE_MS = 15_000;

// Catalog changes wait on a ping, a reconnect backoff and a listing (CHANGE_MS): more than the unit
// project's 5 s default on a loaded machine.
vi.setConfig({ testTimeout: 30_000 });

let engine: NodeEngine;
let calc: HttpFixture;
let running: ReturnType<typeof run>;
let caller: RunningWorkers;

/** A call through the engine, its answer or its typed error (as /_iii/invoke would put it). */
async function invoke(function_id: string, payload: unknown): Promise<{ result?: unknown; error?: { code: string; message: string } }> {
  try {
    return { result: await caller.client.trigger<unknown, unknown>({ function_id, payload }) };
  } catch (e) {
    const { code, message } = e as { code: string; message: string };
    return { error: { code, message } };
  }
}
const { catalog, callOk } = mcpCalls(invoke);

beforeAll(async () => {
  [engine, calc] = await Promise.all([startNodeEngine(), freePort().then(httpFixture)]);
  caller = runWorkers(engine.wsUrl, [], { workerName: "mcp-test-caller" });
  running = run(engine.wsUrl, {
    workerName: "mcp",
    config: {
      mcp: {
        servers: [
          { name: "calc", url: calc.url },
          { name: "local", command: process.execPath, args: [STDIO_FIXTURE] },
        ],
        pingMs: PING_MS,
        reconnectInitialMs: 100,
        reconnectMaxMs: 1_000,
        log: () => undefined,
      },
    },
  });
});

afterAll(async () => {
  await running?.shutdown();
  await caller?.shutdown();
  await calc?.stop();
  await engine?.stop();
});

describe("MCP client worker (official SDK McpServer over Streamable HTTP and stdio)", () => {
  it("registers each server's tools as mcp::<server>::<tool>, with the tool's inputSchema as request_format", async () => {
    const want = ["mcp::calc::add", "mcp::local::fail", "mcp::local::shout", "mcp::servers"];
    await until(async () => JSON.stringify(await catalog()) === JSON.stringify(want), "both servers' tools in the catalog", CHANGE_MS);
    const info = (await invoke("engine::functions::info", { function_id: "mcp::calc::add" })).result as {
      request_schema: unknown;
      description: string;
      metadata: unknown;
    };
    expect(info.request_schema).toMatchObject({
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
    });
    expect(info.description).toContain("Adds two numbers");
    // Never served back out by this engine's own MCP server.
    expect(info.metadata).toMatchObject({ mcp: { expose: false, server: "calc", tool: "add" } });
  });

  it("a call through the engine returns the tool's result (HTTP and stdio), and a tool error is the call's error", async () => {
    expect(await callOk("mcp::calc::add", { a: 2, b: 3 })).toEqual({
      content: [{ type: "text", text: "5" }],
      structuredContent: { sum: 5 },
    });
    const shouted = await callOk("mcp::local::shout", { text: "hi" });
    expect(shouted.content).toEqual([{ type: "text", text: "HI" }]);
    expect(shouted.structuredContent?.shouted).toBe("HI");
    expect(shouted.structuredContent?.pid).not.toBe(process.pid);
    const failed = await invoke("mcp::local::fail", {});
    expect(failed.error?.code).toBe("invocation_failed");
    expect(failed.error?.message).toContain("this tool always fails");
    // Arguments the tool's schema refuses: the server's own validation error, as the call's error.
    const bad = await invoke("mcp::calc::add", { a: "two" });
    expect(bad.error?.code).toBe("invocation_failed");
  });

  it("a tool the server adds later (list_changed) is registered", async () => {
    calc.addTool("mul");
    await until(async () => (await catalog()).includes("mcp::calc::mul"), "mcp::calc::mul after list_changed", CHANGE_MS);
    expect((await callOk("mcp::calc::mul", { a: 6, b: 7 })).structuredContent).toEqual({ product: 42 });
  });

  it("a server that goes away leaves the catalog, and its tools come back when it does", async () => {
    await calc.stop();
    await until(async () => !(await catalog()).includes("mcp::calc::add"), "calc's tools gone while it is down", CHANGE_MS);
    const status = (await callOk("mcp::servers", {})) as unknown as { servers: { name: string; connected: boolean }[] };
    expect(status.servers.find((s) => s.name === "calc")?.connected).toBe(false);
    await calc.start();
    await until(async () => (await catalog()).includes("mcp::calc::add"), "calc's tools back after it restarted", CHANGE_MS);
    expect((await callOk("mcp::calc::add", { a: 1, b: 1 })).structuredContent).toEqual({ sum: 2 });
  });

  it("a stdio server that dies is started again", async () => {
    const pid = (await callOk("mcp::local::shout", { text: "a" })).structuredContent?.pid as number;
    process.kill(pid, "SIGKILL");
    const next = await until(
      async () => {
        const r = await invoke("mcp::local::shout", { text: "b" });
        const p = (r.result as { structuredContent?: { pid?: number } } | undefined)?.structuredContent?.pid;
        return p !== undefined && p !== pid ? p : undefined;
      },
      "a new stdio server process answering",
      CHANGE_MS,
    );
    expect(next).not.toBe(pid);
  });

  it("on shutdown its functions leave the catalog", async () => {
    await running.shutdown();
    await until(async () => (await catalog()).length === 0, "no mcp:: functions after shutdown", CHANGE_MS);
    expect(await invoke("mcp::calc::add", { a: 1, b: 2 })).toMatchObject({ error: { code: "function_not_found" } });
  });
});
