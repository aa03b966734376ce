// The console's JSON Schema helpers (demo-app/src/schema-form/schema.ts): the template a form is
// prefilled with and the problems that stop a call before it is sent, on the schemas functions
// really publish (zod's toJSONSchema, as sdk-edge registers them, and hand-written ones).
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { kindOf, resolve, templateOf, validate, type JsonSchema } from "@iii-edge/demo-app/schema-form";

const fromZod = (t: z.ZodType) => z.toJSONSchema(t, { io: "input", unrepresentable: "any" }) as JsonSchema;

const order = fromZod(
  z.object({
    customer: z.string().min(1),
    express: z.boolean().optional(),
    currency: z.enum(["EUR", "USD"]),
    note: z.string().nullable(),
    items: z.array(z.object({ sku: z.string(), qty: z.number().int().min(1) })).min(1),
    address: z.object({ city: z.string(), zip: z.string().regex(/^\d{5}$/) }).optional(),
  }),
);

describe("templateOf", () => {
  it("fills required fields with empty values of their type, leaves optional ones out", () => {
    expect(templateOf(order)).toEqual({ customer: "", currency: "EUR", note: "", items: [] });
  });
  it("prefers defaults and examples", () => {
    expect(
      templateOf({
        type: "object",
        properties: { n: { type: "integer", default: 5 }, s: { type: "string", examples: ["hi"] } },
        required: ["n", "s"],
      }),
    ).toEqual({ n: 5, s: "hi" });
  });
  it("follows $ref into $defs, recursion bounded", () => {
    const Node = z.object({
      name: z.string(),
      get children(): z.ZodArray<typeof Node> {
        return z.array(Node);
      },
    });
    const tree = fromZod(z.object({ root: Node }));
    expect(templateOf(tree)).toEqual({ root: { name: "", children: [] } });
    expect(validate(tree, { root: { name: "a", children: [{ name: 1, children: [] }] } })).toEqual([
      { path: "root.children[0].name", message: "must be string, not number" },
    ]);
    const selfRef: JsonSchema = {
      $defs: { node: { type: "object", properties: { next: { $ref: "#/$defs/node" } }, required: ["next"] } },
      $ref: "#/$defs/node",
    };
    expect(() => templateOf(selfRef)).not.toThrow();
  });
});

describe("validate", () => {
  it("accepts a payload the function would accept", () => {
    expect(validate(order, { customer: "ada", currency: "USD", note: null, items: [{ sku: "tea", qty: 2 }] })).toEqual([]);
  });
  it("names every problem by its path", () => {
    const problems = validate(order, {
      customer: "",
      currency: "GBP",
      items: [{ sku: "tea", qty: 1.5 }, { qty: 0 }],
      address: { city: "x", zip: "12" },
      extra: 1,
    });
    const byPath = Object.fromEntries(problems.map((p) => [p.path, p.message]));
    expect(byPath).toMatchObject({
      customer: "must not be empty",
      currency: 'must be one of "EUR", "USD"',
      note: "is required",
      "items[0].qty": "must be a whole number",
      "items[1].sku": "is required",
      "items[1].qty": "must be at least 1",
      "address.zip": "must match ^\\d{5}$",
    });
    // zod objects accept unknown keys (their input schema says so); a strict one does not.
    expect(byPath.extra).toBeUndefined();
    expect(validate(fromZod(z.strictObject({ a: z.string() })), { a: "x", b: 1 })).toEqual([
      { path: "b", message: "is not a field of this payload" },
    ]);
  });
  it("reads nullable unions and type lists", () => {
    const s: JsonSchema = {
      type: "object",
      properties: { a: { anyOf: [{ type: "number" }, { type: "null" }] }, b: { type: ["string", "null"] } },
      required: ["a", "b"],
    };
    expect(validate(s, { a: null, b: null })).toEqual([]);
    expect(validate(s, { a: "1", b: 2 }).map((p) => p.path)).toEqual(["a", "b"]);
    expect(kindOf(resolve(s.properties!.a!, s).schema)).toBe("number");
  });
  it("a schema it cannot show as fields is JSON, and checks only what it knows", () => {
    expect(kindOf({ type: "object", additionalProperties: { type: "number" } })).toBe("json");
    expect(validate({ type: "object", additionalProperties: { type: "number" } }, { x: "no" })).toEqual([
      { path: "x", message: "must be number, not string" },
    ]);
    expect(validate({}, { anything: [1, 2] })).toEqual([]);
  });
});
