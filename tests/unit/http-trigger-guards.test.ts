// The http trigger's guards as pure functions (engine-do/src/core/triggers/http.ts): which decoded
// path params are refused, and who counts as the same owner of a route.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { TriggerRecord } from "@iii-edge/engine-do/core/catalog.ts";
import { sameOwner, unsafePathParam } from "@iii-edge/engine-do/core/triggers/http.ts";

describe("unsafePathParam", () => {
  it.each(["../../etc/passwd", "a/b", "..\\windows", "\\", "/", ".", "..", "a\0b"])("refuses %j", (v) => {
    expect(unsafePathParam(v)).toBeDefined();
  });
  it.each(["42", "a b", "report.pdf", "...", "..a", "ü", "a%2Fb"])("accepts %j", (v) => {
    expect(unsafePathParam(v)).toBeUndefined();
  });

  it("property: a param is refused exactly when its decoded text could leave its segment", () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom("a", ".", "/", "\\", "\0", "%", " ", "é") }), (decoded) => {
        const escapes = decoded.includes("/") || decoded.includes("\\") || decoded.includes("\0") || decoded === "." || decoded === "..";
        expect(unsafePathParam(decodeURIComponent(encodeURIComponent(decoded))) !== undefined).toBe(escapes);
      }),
    );
  });
});

describe("sameOwner", () => {
  const b = (owner: string | null, principal?: string): TriggerRecord => ({
    id: "t",
    trigger_type: "http",
    function_id: "f",
    config: {},
    owner,
    status: "active",
    ...(principal ? { principal } : {}),
  });
  it("compares worker ids when either binding has an owner", () => {
    expect(sameOwner(b("w1"), b("w1"))).toBe(true);
    expect(sameOwner(b("w1", "alice"), b("w2", "alice"))).toBe(false);
    expect(sameOwner(b("edge:X"), b("edge:X"))).toBe(true);
    expect(sameOwner(b(null, "alice"), b("w1", "alice"))).toBe(false);
  });
  it("compares principals for engine-held bindings, none counting as anonymous", () => {
    expect(sameOwner(b(null, "alice"), b(null, "alice"))).toBe(true);
    expect(sameOwner(b(null, "alice"), b(null, "bob"))).toBe(false);
    expect(sameOwner(b(null), b(null))).toBe(true);
    expect(sameOwner(b(null), b(null, "anonymous"))).toBe(true);
    expect(sameOwner(b(null), b(null, "alice"))).toBe(false);
  });
});
