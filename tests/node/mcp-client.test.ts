// The MCP client worker (workers/mcp) where `npm start`'s engine is part of what is tested: the
// engine's own /mcp as one of its servers (both halves of the package meet), and the worker as its
// own process (`npm run worker -- mcp`). Its handling of servers over Streamable HTTP and stdio —
// tools in the catalog, calls, list_changed, servers going away and coming back — runs on the
// engine core in tests/unit/mcp-client.test.ts.
import { spawn } from "node:child_process";
import path from "node:path";
import { run } from "@iii-edge/worker-mcp/node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, startEngine, type EngineServer } from "@iii-edge/test-support/engine-server";
import { expectStoppedBySigterm } from "@iii-edge/test-support/npm-exit";
import { until } from "@iii-edge/test-support/wait";
import { mcpCalls } from "./mcp-calls.ts";

const STDIO_FIXTURE = path.join(repoRoot, "tests/node/mcp-fixture-stdio.mjs");
/** Catalog changes here wait on a ping, a reconnect backoff and a listing: generous for a busy box. */
const CHANGE_MS = 15_000;
/** `npm run worker` starts npm, then Node with the workspace sources: slow on a busy 2-core box. */
const CLI_START_MS = 60_000;

let engine: EngineServer;
let running: ReturnType<typeof run>;

async function invoke(function_id: string, payload: unknown): Promise<{ result?: unknown; error?: { code: string; message: string } }> {
  const r = await fetch(`${engine.url}/_iii/invoke`, { method: "POST", body: JSON.stringify({ function_id, payload }) });
  return (await r.json()) as { result?: unknown; error?: { code: string; message: string } };
}
const { catalog, callOk } = mcpCalls(invoke);

beforeAll(async () => {
  // The engine's own /mcp (open: loopback, no AUTH_SECRET) as the client's server: edge::hello (a
  // Worker-hosted demo function) comes back as mcp::self::edge__hello.
  engine = await startEngine({ vars: { MCP_EXPOSE: "edge::hello" } });
  running = run(engine.wsUrl, {
    workerName: "mcp",
    config: {
      mcp: {
        servers: [{ name: "self", url: `${engine.url}/mcp` }],
        pingMs: 300,
        reconnectInitialMs: 100,
        reconnectMaxMs: 1_000,
        log: () => undefined,
      },
    },
  });
}, 120_000);

afterAll(async () => {
  await running?.shutdown();
  await engine?.stop();
});

describe("MCP client worker with the engine's own /mcp as a server", () => {
  it("its exposed function comes back as a tool of 'self', and the MCP functions are not served again", async () => {
    await until(async () => (await catalog()).includes("mcp::self::edge__hello"), "the self server's tool in the catalog", CHANGE_MS);
    expect(await callOk("mcp::self::edge__hello", { name: "ada" })).toEqual({
      content: [{ type: "text", text: JSON.stringify({ greeting: "Hello, ada! (from a Worker)" }) }],
      structuredContent: { greeting: "Hello, ada! (from a Worker)" },
    });
    // The server exposes edge::hello only; mcp::* carry expose:false, so no loop even under a wider glob.
    const self = ((await callOk("mcp::servers", {})) as unknown as { servers: { name: string; tools: { tool: string }[] }[] }).servers.find(
      (s) => s.name === "self",
    );
    expect(self?.tools.map((t) => t.tool)).toEqual(["edge__hello"]);
  });
});

describe("npm run worker -- mcp", () => {
  it("reads MCP_SERVERS, registers the servers' tools, and on SIGTERM leaves the catalog with no stdio server left behind", async () => {
    const child = spawn("npm", ["run", "-s", "worker", "--", "mcp"], {
      cwd: repoRoot,
      env: {
        ...process.env,
        III_URL: `${engine.wsUrl}/`,
        MCP_SERVERS: JSON.stringify([{ name: "cli", command: process.execPath, args: [STDIO_FIXTURE] }]),
      },
      stdio: ["ignore", "pipe", "pipe"],
      // Its own process group, signalled as a terminal would (npm runs the script under `sh -c`).
      detached: true,
    });
    let out = "";
    child.stdout?.on("data", (d) => (out += d));
    child.stderr?.on("data", (d) => (out += d));
    try {
      await until(async () => (await catalog("mcp::cli::")).includes("mcp::cli::shout"), "the CLI worker's tools", CLI_START_MS, 200);
      expect(out).toContain(`worker mcp connected to ${engine.wsUrl}/`);
      const pid = (await callOk("mcp::cli::shout", { text: "x" })).structuredContent?.pid as number;
      await expectStoppedBySigterm(child);
      expect(out).not.toMatch(/shutdown failed/);
      await until(async () => (await catalog("mcp::cli::")).length === 0, "the CLI worker's tools gone", CHANGE_MS);
      // No stdio server is left behind.
      await until(
        () => {
          try {
            process.kill(pid, 0);
            return false;
          } catch {
            return true;
          }
        },
        "the stdio server process gone",
        CHANGE_MS,
      );
    } finally {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, "SIGKILL");
    }
  });
});
