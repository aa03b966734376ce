// The MCP package's pure rules: which functions the server exposes and under which tool names, the
// function ids the client registers tools under, and how MCP_SERVERS is read (bad settings are a
// typed error that names the problem).
import { IIIError } from "@iii-edge/protocol";
import { describe, expect, it } from "vitest";
import { parseServers } from "../src/config.ts";
import { MAX_TOOL_NAME_CHARS, clientFunctionId, exposeRuleFrom, isExposed, toolNameOf } from "../src/expose.ts";

describe("expose rule", () => {
  const rule = exposeRuleFrom(" demo::*, edge::hello ,,");
  it("reads MCP_EXPOSE as globs; unset exposes nothing", () => {
    expect(rule.globs).toEqual(["demo::*", "edge::hello"]);
    expect(isExposed(exposeRuleFrom(undefined), "demo::x", undefined)).toBe(false);
    expect(isExposed(exposeRuleFrom(""), "demo::x", {})).toBe(false);
  });
  it("a glob exposes; metadata mcp.expose decides over any glob, either way", () => {
    expect(isExposed(rule, "demo::echo", undefined)).toBe(true);
    expect(isExposed(rule, "edge::hello-http", undefined)).toBe(false);
    expect(isExposed(rule, "demo::secret", { mcp: { expose: false } })).toBe(false);
    expect(isExposed(rule, "other::fn", { mcp: { expose: true } })).toBe(true);
    expect(isExposed(exposeRuleFrom("*"), "mcp::calc::add", { mcp: { expose: false, server: "calc" } })).toBe(false);
  });
  it("harness plumbing (metadata.internal) is never matched by a glob, only by its own opt-in", () => {
    expect(isExposed(exposeRuleFrom("*"), "harness::sweep", { internal: true })).toBe(false);
    expect(isExposed(exposeRuleFrom("*"), "harness::sweep", { internal: true, mcp: { expose: true } })).toBe(true);
  });
  it("a malformed mcp metadata value is no decision", () => {
    expect(isExposed(rule, "other::fn", { mcp: { expose: "yes" } })).toBe(false);
    expect(isExposed(rule, "demo::fn", { mcp: "no" })).toBe(true);
  });
});

describe("tool names", () => {
  it("are what MCP clients accept: [A-Za-z0-9_-], at most 64", async () => {
    expect(await toolNameOf("demo::echo")).toBe("demo__echo");
    expect(await toolNameOf("other::opted-in")).toBe("other__opted-in");
    expect(await toolNameOf("a.b/c d::e-f")).toMatch(/^a_b_c_d__e-f_[0-9a-f]{16}$/);
    const long = `team::${"x".repeat(100)}::a`;
    const other = `team::${"x".repeat(100)}::b`;
    for (const id of [long, other, "::", "é"])
      expect(await toolNameOf(id)).toMatch(new RegExp(`^[A-Za-z0-9_-]{1,${MAX_TOOL_NAME_CHARS}}$`));
    expect(await toolNameOf(long)).not.toBe(await toolNameOf(other));
    expect(await toolNameOf(long)).toBe(await toolNameOf(long));
  });
  it("one name never stands for two ids: only the id a readable name reads back as gets it", async () => {
    // `pay.:charge`, `pay__charge` and `pay::charge` all sanitise to pay__charge; only the last
    // reads back from it, so only it is called that, in whatever order they were registered.
    expect(await toolNameOf("pay::charge")).toBe("pay__charge");
    const squatters = ["pay.:charge", "pay__charge", "pay:.charge", "pay::charge "];
    const names = await Promise.all(squatters.map(toolNameOf));
    for (const n of names) expect(n).toMatch(/^pay__charge_+[0-9a-f]{16}$/);
    expect(new Set(names).size).toBe(squatters.length);
    // An id shaped like another's distinguished name does not get that name either.
    const taken = await toolNameOf("pay.:charge");
    const lookalike = taken.replace(/^pay__/, "pay::");
    expect(await toolNameOf(lookalike)).not.toBe(taken);
  });
  it("client function ids keep the tool's name readable and the id well-formed", () => {
    expect(clientFunctionId("calc", "add")).toBe("mcp::calc::add");
    expect(clientFunctionId("fs", "read file/now")).toBe("mcp::fs::read_file_now");
    expect(clientFunctionId("fs", "")).toBe("mcp::fs::_");
  });
});

describe("MCP_SERVERS", () => {
  it("a list of HTTP and stdio servers, or Claude Desktop's mcpServers object", () => {
    expect(parseServers(undefined)).toEqual([]);
    expect(parseServers("  ")).toEqual([]);
    expect(parseServers('[{"name":"docs","url":"http://127.0.0.1:9/mcp"},{"name":"fs","command":"node","args":["s.mjs"]}]')).toEqual([
      { name: "docs", url: "http://127.0.0.1:9/mcp" },
      { name: "fs", command: "node", args: ["s.mjs"] },
    ]);
    expect(parseServers('{"mcpServers":{"fs":{"command":"npx","args":["-y","x"],"env":{"A":"1"}}}}')).toEqual([
      { name: "fs", command: "npx", args: ["-y", "x"], env: { A: "1" } },
    ]);
  });
  const refused = (text: string) => {
    try {
      parseServers(text, "MCP_SERVERS");
    } catch (e) {
      expect(e).toBeInstanceOf(IIIError);
      expect((e as IIIError).code).toBe("invalid_arguments");
      return (e as Error).message;
    }
    throw new Error("accepted");
  };
  it("refuses what it cannot use, saying why", () => {
    expect(refused("[{")).toMatch(/^MCP_SERVERS is not JSON/);
    expect(refused('[{"name":"a b","url":"http://x/mcp"}]')).toMatch(/server name/);
    expect(refused('[{"name":"a","url":"not a url"}]')).toMatch(/MCP_SERVERS/);
    expect(refused('[{"name":"a"}]')).toMatch(/MCP_SERVERS/);
    expect(refused('[{"name":"a","url":"http://x/mcp"},{"name":"a","command":"node"}]')).toBe('MCP_SERVERS: two servers are named "a"');
  });
});
