// The MCP server checks a tool call's arguments against the tool's inputSchema before the function
// runs (workers/mcp/src/arguments.ts): the unmodified iii-sdk publishes a `request_format` but
// validates nothing, so without the check `{a: "x"}` to `add` answered `{"sum": "xundefined"}`.
// Driven by the official MCP SDK client against `npm start` (real workerd, real sockets); each
// handler counts its calls, so "not called" is observed, not assumed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { registerWorker, type IIIClient } from "iii-sdk";
import type { RegisterFunctionFormat } from "iii-sdk/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { until } from "@iii-edge/test-support/wait";

let engine: EngineServer;
let worker: IIIClient;
let client: Client;
const calls = { add: 0, loose: 0, tree: 0, fanOut: 0 };
const textOf = (r: Record<string, unknown>) => (r.content as { type: string; text: string }[]).map((c) => c.text).join("\n");

const addFormat: RegisterFunctionFormat = {
  type: "object",
  properties: { a: { type: "number", description: "first addend" }, b: { type: "number" } },
  required: ["a", "b"],
};

beforeAll(async () => {
  engine = await startSecureEngine({ MCP_EXPOSE: "calc::*" });
  worker = registerWorker(engine.wsUrl, {
    workerName: "calc",
    otel: { enabled: false },
    invocationTimeoutMs: 10_000,
    headers: bearer(await token("calc")),
  });
  worker.registerFunction(
    "calc::add",
    async (data: { a: number; b: number }) => {
      calls.add++;
      return { sum: data.a + data.b };
    },
    { description: "Adds a and b", request_format: addFormat },
  );
  worker.registerFunction(
    "calc::loose",
    async (data: Record<string, unknown>) => {
      calls.loose++;
      return {
        got: Object.keys(data)
          .filter((k) => !k.startsWith("_"))
          .sort(),
      };
    },
    { description: "Takes anything" },
  );
  // Nested and recursive through $ref: a wrong value deep inside is named by its path.
  worker.registerFunction(
    "calc::tree-sum",
    async () => {
      calls.tree++;
      return { ok: true };
    },
    {
      request_format: {
        type: "object",
        properties: { root: { $ref: "#/$defs/node" } },
        required: ["root"],
        $defs: {
          node: {
            type: "object",
            properties: { value: { type: "integer" }, children: { type: "array", items: { $ref: "#/$defs/node" } } },
            required: ["value"],
          },
        },
      },
    },
  );
  // A schema whose $refs fan out (2^40 paths): checking any value against it must stop, not hang.
  const defs: Record<string, unknown> = { d40: { type: "string" } };
  for (let i = 0; i < 40; i++) defs[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i + 1}` }, { $ref: `#/$defs/d${i + 1}` }] };
  worker.registerFunction(
    "calc::fan-out",
    async () => {
      calls.fanOut++;
      return { ok: true };
    },
    { request_format: { type: "object", properties: { v: { $ref: "#/$defs/d0" } }, $defs: defs } },
  );
  const admin = await token("admin");
  await until(async () => {
    const r = await fetch(`${engine.url}/_iii/invoke`, {
      method: "POST",
      headers: bearer(admin),
      body: JSON.stringify({ function_id: "engine::functions::list", payload: { prefix: "calc::" } }),
    });
    return ((await r.json()) as { result: { functions: unknown[] } }).result.functions.length === 4;
  }, "the calc functions in the catalog");
  client = new Client({ name: "mcp-arguments-test", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${engine.url}/mcp`), { requestInit: { headers: bearer(await token("alice")) } }),
  );
}, 120_000);

afterAll(async () => {
  await client?.close().catch(() => undefined);
  await worker?.shutdown();
  await engine?.stop();
});

describe("tools/call arguments are checked against the tool's inputSchema", () => {
  it("a wrong argument is a tool error naming the field, and the function is not called", async () => {
    const before = calls.add;
    const bad = await client.callTool({ name: "calc__add", arguments: { a: "x" } });
    expect(bad.isError).toBe(true);
    const text = textOf(bad);
    expect(text).toMatch(/^invalid_input: arguments for calc::add do not match its request_format/);
    expect(text).toMatch(/\ba: Instance type "string" is invalid\. Expected "number"/);
    expect(text).toContain('required property "b"');
    expect(text).not.toContain("xundefined");
    const missing = await client.callTool({ name: "calc__add", arguments: {} });
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toMatch(/required property "a"/);
    // Proven by a call that does reach it: the count moves by that one call only.
    expect((await client.callTool({ name: "calc__add", arguments: { a: 2, b: 3 } })).structuredContent).toEqual({ sum: 5 });
    expect(calls.add).toBe(before + 1);
  });

  it("a valid call works, and the tool lists the function's request_format as its inputSchema", async () => {
    const add = (await client.listTools()).tools.find((t) => t.name === "calc__add")!;
    expect(add.inputSchema).toEqual(addFormat);
    expect(add.description).not.toMatch(/not checked/);
    const r = await client.callTool({ name: "calc__add", arguments: { a: 1.5, b: -4 } });
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent).toEqual({ sum: -2.5 });
  });

  it("a wrong value deep in a recursive schema is named by its path", async () => {
    const before = calls.tree;
    const bad = await client.callTool({
      name: "calc__tree-sum",
      arguments: { root: { value: 1, children: [{ value: 2 }, { value: 3, children: [{ value: "four" }] }] } },
    });
    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toContain('root.children.1.children.0.value: Instance type "string" is invalid. Expected "integer"');
    expect(calls.tree).toBe(before);
    expect(
      (await client.callTool({ name: "calc__tree-sum", arguments: { root: { value: 1, children: [{ value: 2, children: [] }] } } }))
        .isError,
    ).toBeFalsy();
    expect(calls.tree).toBe(before + 1);
  });

  it("a schema that would take exponential time to check is cut off, the function not called, and the server keeps serving", async () => {
    const r = await client.callTool({ name: "calc__fan-out", arguments: { v: 1 } });
    expect(r.isError).toBe(true);
    expect(textOf(r)).toMatch(
      /^value_too_large: checking the arguments against the request_format of calc::fan-out took more than \d+ steps/,
    );
    expect(calls.fanOut).toBe(0);
    expect((await client.callTool({ name: "calc__add", arguments: { a: 1, b: 1 } })).structuredContent).toEqual({ sum: 2 });
  });

  it("a function without a request_format is listed with a permissive schema and a warning, and can be called with anything", async () => {
    const loose = (await client.listTools()).tools.find((t) => t.name === "calc__loose");
    expect(loose).toBeDefined();
    expect(loose!.inputSchema).toEqual({ type: "object" });
    expect(loose!.description).toContain("Takes anything");
    expect(loose!.description).toMatch(/Warning: arguments are not checked, it publishes no request_format/);
    const before = calls.loose;
    const r = await client.callTool({ name: "calc__loose", arguments: { anything: [1, 2], goes: "yes" } });
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent).toEqual({ got: ["anything", "goes"] });
    expect(calls.loose).toBe(before + 1);
  });

  it("a caller who may not call the function hears forbidden, not what its schema wants", async () => {
    const bob = new Client({ name: "mcp-arguments-bob", version: "1.0.0" });
    await bob.connect(
      new StreamableHTTPClientTransport(new URL(`${engine.url}/mcp`), {
        requestInit: { headers: bearer(await token("bob", { call: ["calc::loose"] })) },
      }),
    );
    try {
      const r = await bob.callTool({ name: "calc__add", arguments: { a: "x" } });
      expect(r.isError).toBe(true);
      expect(textOf(r)).toMatch(/^forbidden: 'bob' may not call calc::add/);
    } finally {
      await bob.close();
    }
  });
});
