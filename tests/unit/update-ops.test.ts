// state::update / stream::update operations (protocol/README.md §7.2), as a pure function.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { applyUpdateOps } from "@iii-edge/engine-do/core/update-ops.ts";
import { updateOp, type UpdateOp } from "@iii-edge/protocol";

/** Ops as they arrive on the wire go through the protocol schema (defaults applied). */
const ops = (...raw: unknown[]): UpdateOp[] => raw.map((o) => updateOp.parse(o));
const run = (current: unknown, ...raw: unknown[]) => applyUpdateOps(current, ops(...raw));
const codes = (r: { errors: { op_index: number; code: string }[] }) => r.errors.map((e) => [e.op_index, e.code]);

describe("set", () => {
  it("sets a first-level key; path '' replaces the whole value; missing key starts as {}", () => {
    expect(run(undefined, { type: "set", path: "a", value: 1 })).toEqual({ value: { a: 1 }, errors: [] });
    expect(run({ a: 1 }, { type: "set", path: "", value: [1] }).value).toEqual([1]);
    expect(run({ a: 1 }, { type: "set", value: "x" }).value).toBe("x"); // path defaults to ""
    expect(run(null, { type: "set", path: "b", value: null }).value).toEqual({ b: null });
  });
  it("refuses a non-object target and prototype keys", () => {
    expect(codes(run([1], { type: "set", path: "a", value: 1 }))).toEqual([[0, "set.not_object"]]);
    expect(codes(run({}, { type: "set", path: "__proto__", value: { polluted: true } }))).toEqual([[0, "set.path.proto_polluted"]]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe("increment / decrement", () => {
  it("adds integer `by` (default 1); a missing field starts at ±by", () => {
    expect(run({}, { type: "increment", path: "n" }).value).toEqual({ n: 1 });
    expect(run({ n: 5 }, { type: "increment", path: "n", by: 10 }).value).toEqual({ n: 15 });
    expect(run({}, { type: "decrement", path: "n", by: 3 }).value).toEqual({ n: -3 });
    expect(run({ n: 5 }, { type: "decrement", path: "n", by: 2 }).value).toEqual({ n: 3 });
    expect(run({ n: null }, { type: "increment", path: "n", by: 2 }).value).toEqual({ n: 2 });
  });
  it("reports not_number / not_object; `by` may be any finite number, nothing else", () => {
    expect(codes(run({ n: "x" }, { type: "increment", path: "n" }))).toEqual([[0, "increment.not_number"]]);
    expect(codes(run({ n: {} }, { type: "decrement", path: "n" }))).toEqual([[0, "decrement.not_number"]]);
    expect(codes(run(3, { type: "increment", path: "n" }))).toEqual([[0, "increment.not_object"]]);
    expect(codes(run({}, { type: "increment", path: "constructor" }))).toEqual([[0, "increment.path.proto_polluted"]]);
    expect(run({ n: 1 }, { type: "increment", path: "n", by: 0.5 })).toEqual({ value: { n: 1.5 }, errors: [] });
    expect(updateOp.safeParse({ type: "increment", path: "n", by: Infinity }).success).toBe(false);
    expect(updateOp.safeParse({ type: "increment", path: "n", by: "1" }).success).toBe(false);
  });
});

describe("remove", () => {
  it("deletes a first-level key; absent key is fine", () => {
    expect(run({ a: 1, b: 2 }, { type: "remove", path: "a" })).toEqual({ value: { b: 2 }, errors: [] });
    expect(run({ b: 2 }, { type: "remove", path: "zz" })).toEqual({ value: { b: 2 }, errors: [] });
    expect(codes(run("s", { type: "remove", path: "a" }))).toEqual([[0, "remove.not_object"]]);
  });
});

describe("merge", () => {
  it("shallow-merges into the root, a key, or a nested path created as needed", () => {
    expect(run({ a: 1, o: { x: 1 } }, { type: "merge", value: { b: 2, o: { y: 2 } } }).value).toEqual({ a: 1, b: 2, o: { y: 2 } });
    expect(run({ o: { x: 1 } }, { type: "merge", path: "o", value: { y: 2 } }).value).toEqual({ o: { x: 1, y: 2 } });
    expect(run({}, { type: "merge", path: ["a", "b", "c"], value: { d: 1 } }).value).toEqual({ a: { b: { c: { d: 1 } } } });
    expect(run({ a: 5 }, { type: "merge", path: ["a", "b"], value: { d: 1 } }).value).toEqual({ a: { b: { d: 1 } } });
    expect(run([1, 2], { type: "merge", value: { a: 1 } }).value).toEqual({ a: 1 });
  });
  it("enforces the §7.2 limits with merge.path.* / merge.value.* codes", () => {
    const cases: [unknown, string][] = [
      [{ type: "merge", value: [1] }, "merge.value.not_object"],
      [{ type: "merge", value: 5 }, "merge.value.not_object"],
      [{ type: "merge", path: ["__proto__"], value: { a: 1 } }, "merge.path.proto_polluted"],
      [{ type: "merge", path: "prototype", value: { a: 1 } }, "merge.path.proto_polluted"],
      [{ type: "merge", value: JSON.parse('{"__proto__":{"polluted":1}}') }, "merge.value.proto_polluted"],
      [{ type: "merge", value: { constructor: 1 } }, "merge.value.proto_polluted"],
      [{ type: "merge", path: ["é".repeat(129)], value: { a: 1 } }, "merge.path.segment_too_long"],
      [{ type: "merge", value: Object.fromEntries(Array.from({ length: 1025 }, (_, i) => [`k${i}`, i])) }, "merge.value.too_many_keys"],
    ];
    for (const [op, code] of cases) expect(codes(run({}, op)), code).toEqual([[0, code]]);
    let deep: unknown = 1;
    for (let i = 0; i < 20; i++) deep = { d: deep };
    expect(codes(run({}, { type: "merge", value: deep }))).toEqual([[0, "merge.value.too_deep"]]);
    // 32 path segments is the limit; more fails (schema caps arrays at 32, so build the op directly).
    const tooDeep = applyUpdateOps({}, [{ type: "merge", path: Array.from({ length: 33 }, (_, i) => `s${i}`), value: { a: 1 } }]);
    expect(codes(tooDeep)).toEqual([[0, "merge.path.too_deep"]]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe("append", () => {
  it("pushes onto arrays, concatenates strings, creates a missing target", () => {
    expect(run({}, { type: "append", value: 1 }).value).toEqual([1]);
    expect(run({}, { type: "append", value: "s" }).value).toBe("s");
    expect(run([1], { type: "append", value: 2 }).value).toEqual([1, 2]);
    expect(run("ab", { type: "append", value: "c" }).value).toBe("abc");
    expect(run({}, { type: "append", path: "l", value: { x: 1 } }).value).toEqual({ l: [{ x: 1 }] });
    expect(run({ l: [1] }, { type: "append", path: "l", value: [2] }).value).toEqual({ l: [1, [2]] });
    expect(run({ s: "a" }, { type: "append", path: "s", value: "b" }).value).toEqual({ s: "ab" });
    expect(run({}, { type: "append", path: ["a", "b"], value: 1 }).value).toEqual({ a: { b: [1] } });
  });
  it("refuses object/scalar targets with append.type_mismatch and bad paths with append.path.*", () => {
    expect(codes(run({ a: 1 }, { type: "append", value: 1 }))).toEqual([[0, "append.type_mismatch"]]);
    expect(codes(run({ o: {} }, { type: "append", path: "o", value: 1 }))).toEqual([[0, "append.type_mismatch"]]);
    expect(codes(run({ n: 1 }, { type: "append", path: "n", value: 1 }))).toEqual([[0, "append.type_mismatch"]]);
    expect(codes(run({ s: "a" }, { type: "append", path: "s", value: 1 }))).toEqual([[0, "append.type_mismatch"]]);
    expect(codes(run("a", { type: "append", value: 1 }))).toEqual([[0, "append.type_mismatch"]]);
    expect(codes(run({ a: 1 }, { type: "append", path: ["a", "b"], value: 1 }))).toEqual([[0, "append.type_mismatch"]]);
    expect(codes(run({}, { type: "append", path: "__proto__", value: 1 }))).toEqual([[0, "append.path.proto_polluted"]]);
  });
});

describe("sequences", () => {
  it("applies ops in order; a failing op is skipped, the others still apply", () => {
    const r = run(
      { n: "x" },
      { type: "increment", path: "n" },
      { type: "set", path: "m", value: 1 },
      { type: "increment", path: "m", by: 2 },
      { type: "append", path: "m", value: 1 },
    );
    expect(r.value).toEqual({ n: "x", m: 3 });
    expect(codes(r)).toEqual([
      [0, "increment.not_number"],
      [3, "append.type_mismatch"],
    ]);
  });

  it("property: never throws, never mutates its input, result is JSON, error indices are in range", () => {
    const op = fc.oneof(
      fc.record({
        type: fc.constant("set"),
        path: fc.oneof(fc.constant(""), fc.string({ maxLength: 5 })),
        value: fc.jsonValue({ maxDepth: 2 }),
      }),
      fc.record({
        type: fc.constantFrom("increment", "decrement"),
        path: fc.string({ maxLength: 5 }),
        by: fc.integer({ min: -100, max: 100 }),
      }),
      fc.record({ type: fc.constant("remove"), path: fc.string({ maxLength: 5 }) }),
      fc.record({
        type: fc.constantFrom("merge", "append"),
        path: fc.option(fc.oneof(fc.string({ maxLength: 5 }), fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 })), { nil: undefined }),
        value: fc.jsonValue({ maxDepth: 3 }),
      }),
    );
    fc.assert(
      fc.property(fc.option(fc.jsonValue({ maxDepth: 3 }), { nil: undefined }), fc.array(op, { maxLength: 8 }), (current, raw) => {
        const parsed = raw.map((o) => updateOp.parse(JSON.parse(JSON.stringify(o))));
        const before = JSON.stringify(current);
        const r = applyUpdateOps(current, parsed);
        expect(JSON.stringify(current)).toBe(before);
        // JSON-safe: serialising and reading back changes nothing (−0 prints as 0, as JSON has no −0).
        const text = JSON.stringify(r.value ?? null);
        expect(JSON.stringify(JSON.parse(text))).toBe(text);
        for (const e of r.errors) expect(e.op_index).toBeGreaterThanOrEqual(0), expect(e.op_index).toBeLessThan(parsed.length);
      }),
      { numRuns: 500 },
    );
  });
});
