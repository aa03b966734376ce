// The MCP server's argument check on its own (the flow through /mcp is tests/node/mcp-arguments.test.ts):
// what a refusal names, the drafts a schema may declare, and what a broken or hostile schema gets.
import { describe, expect, it } from "vitest";
import { MAX_CHECK_STEPS, checkArguments } from "../src/arguments.ts";

const refused = (r: ReturnType<typeof checkArguments>) => (r.ok ? "" : r.message);

describe("argument check", () => {
  it("names every wrong field of an object, by its path", () => {
    const schema = {
      type: "object",
      properties: { a: { type: "number" }, opts: { type: "object", properties: { mode: { enum: ["fast", "slow"] } } } },
      required: ["a", "b"],
    };
    const text = refused(checkArguments("t::f", schema, { a: "x", opts: { mode: "medium" } }));
    expect(text).toMatch(/^invalid_input: arguments for t::f do not match its request_format: /);
    expect(text).toContain('arguments: Instance does not have required property "b"');
    expect(text).toContain('a: Instance type "string" is invalid. Expected "number"');
    expect(checkArguments("t::f", schema, { a: 1, b: 2, opts: { mode: "fast" } })).toEqual({ ok: true });
  });

  it("reads the draft a schema declares: 2019-09's $recursiveRef works, and a schema's own $recursiveAnchor is kept", () => {
    const tree = {
      $schema: "https://json-schema.org/draft/2019-09/schema",
      $recursiveAnchor: true,
      type: "object",
      properties: { value: { type: "integer" }, kids: { type: "array", items: { $recursiveRef: "#" } } },
      required: ["value"],
    };
    expect(checkArguments("t::tree", tree, { value: 1, kids: [{ value: 2, kids: [{ value: 3 }] }] })).toEqual({ ok: true });
    expect(refused(checkArguments("t::tree", tree, { value: 1, kids: [{ value: 2, kids: [{ value: "3" }] }] }))).toContain(
      "kids.0.kids.0.value:",
    );
    // draft-04: exclusiveMaximum is a boolean beside maximum.
    const d4 = {
      $schema: "http://json-schema.org/draft-04/schema#",
      type: "object",
      properties: { n: { type: "number", maximum: 5, exclusiveMaximum: true } },
    };
    expect(refused(checkArguments("t::d4", d4, { n: 5 }))).toMatch(/^invalid_input: .*n: /);
    expect(checkArguments("t::d4", d4, { n: 4.9 })).toEqual({ ok: true });
  });

  it("constants inside a schema compare as written (the step counter touches subschemas only)", () => {
    const schema = { type: "object", properties: { cfg: { const: { $recursiveAnchor: true, k: [1, 2] } } } };
    expect(checkArguments("t::const", schema, { cfg: { $recursiveAnchor: true, k: [1, 2] } })).toEqual({ ok: true });
    expect(checkArguments("t::const", schema, { cfg: { k: [1, 2] } }).ok).toBe(false);
  });

  it("a broken schema checks nothing and calls nothing: function_not_invokable, saying why", () => {
    expect(refused(checkArguments("t::ref", { type: "object", properties: { a: { $ref: "#/$defs/none" } } }, { a: 1 }))).toMatch(
      /^function_not_invokable: .*Unresolved \$ref "#\/\$defs\/none"/,
    );
    // Nothing is fetched: a $ref outside the document is as unresolved.
    expect(refused(checkArguments("t::far", { type: "object", $ref: "https://schemas.example/x.json" }, {}))).toMatch(
      /^function_not_invokable: .*Unresolved \$ref/,
    );
    expect(
      refused(checkArguments("t::pattern", { type: "object", properties: { a: { type: "string", pattern: "(" } } }, { a: "x" })),
    ).toMatch(/^function_not_invokable: .*Invalid regular expression/);
    expect(refused(checkArguments("t::loop", { type: "object", $ref: "#/$defs/a", $defs: { a: { $ref: "#/$defs/a" } } }, {}))).toMatch(
      /^function_not_invokable: .*too deep/,
    );
  });

  it("a schema whose $refs fan out is cut off after MAX_CHECK_STEPS visits, and the next check starts afresh", () => {
    const defs: Record<string, unknown> = { d30: { type: "string" } };
    for (let i = 0; i < 30; i++) defs[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i + 1}` }, { $ref: `#/$defs/d${i + 1}` }] };
    const bomb = { type: "object", properties: { v: { $ref: "#/$defs/d0" } }, $defs: defs };
    expect(refused(checkArguments("t::bomb", bomb, { v: 1 }))).toBe(
      `value_too_large: checking the arguments against the request_format of t::bomb took more than ${MAX_CHECK_STEPS} steps; it is not called`,
    );
    // anyOf tries every branch even once one matched: a matching value costs the same.
    expect(refused(checkArguments("t::bomb", bomb, { v: "s" }))).toMatch(/^value_too_large: /);
    // The next check has its own budget: thousands of values of a plain schema stay within it.
    const list = {
      type: "object",
      properties: { rows: { type: "array", items: { type: "object", properties: { n: { type: "integer" } } } } },
    };
    expect(checkArguments("t::rows", list, { rows: Array.from({ length: 10_000 }, (_, n) => ({ n })) })).toEqual({ ok: true });
  });
});
