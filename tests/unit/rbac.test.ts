// The one decision every part of iii's RBAC listener shares (protocol/src/rbac.ts): may a connection
// call this function, from its AuthResult and the listener's expose_functions — and what the RBAC
// var and an AuthResult may be.
import { RBAC_CLOSED_SESSION, rbacAuthResult, rbacConfigSchema, rbacMayCall, type RbacSession } from "@iii-edge/protocol";
import { describe, expect, it } from "vitest";

const config = rbacConfigSchema.parse({
  expose_functions: [
    'match("api::public::*")',
    { match: "docs::get" },
    { metadata: { public: true } },
    { metadata: { tier: 'match("free-*")' } },
  ],
});
const session = (over: Partial<RbacSession> = {}): Pick<RbacSession, "allowed_functions" | "forbidden_functions" | "config"> => ({
  allowed_functions: [],
  forbidden_functions: [],
  config,
  ...over,
});

describe("rbacMayCall", () => {
  it("exposes by id pattern, in both of iii's spellings, and by registration metadata", () => {
    const s = session();
    expect(rbacMayCall(s, "api::public::echo")).toBe(true);
    expect(rbacMayCall(s, "docs::get")).toBe(true);
    expect(rbacMayCall(s, "docs::put")).toBe(false);
    expect(rbacMayCall(s, "x::y", { public: true })).toBe(true);
    expect(rbacMayCall(s, "x::y", { public: "true" })).toBe(false);
    expect(rbacMayCall(s, "x::y", { tier: "free-basic" })).toBe(true);
    expect(rbacMayCall(s, "x::y", { tier: "paid" })).toBe(false);
    expect(rbacMayCall(s, "x::y")).toBe(false);
  });

  it("forbidden beats allowed, exposed and the infrastructure carve-out; allowed admits what is not exposed", () => {
    expect(rbacMayCall(session({ allowed_functions: ["secret::*"] }), "secret::read")).toBe(true);
    expect(rbacMayCall(session({ allowed_functions: ["secret::*"], forbidden_functions: ["secret::read"] }), "secret::read")).toBe(false);
    expect(rbacMayCall(session({ forbidden_functions: ['match("api::*")'] }), "api::public::echo")).toBe(false);
    expect(rbacMayCall(session(), "engine::log::info")).toBe(true);
    expect(rbacMayCall(session({ forbidden_functions: ["engine::log::*"] }), "engine::log::info")).toBe(false);
    // Only the listed built-ins: another engine::* id, or one a worker names like them, is not infrastructure.
    expect(rbacMayCall(session(), "engine::functions::list")).toBe(false);
    expect(rbacMayCall(session(), "engine::log::infox")).toBe(false);
  });
});

describe("a session that could not be read back", () => {
  it("allows nothing, not even the infrastructure built-ins or registrations", () => {
    for (const id of ["engine::workers::register", "engine::log::info", "state::get", "x::y"])
      expect(rbacMayCall(RBAC_CLOSED_SESSION, id, { public: true })).toBe(false);
    expect(RBAC_CLOSED_SESSION.allow_function_registration).toBe(false);
    expect(RBAC_CLOSED_SESSION.allow_trigger_type_registration).toBe(false);
    expect(RBAC_CLOSED_SESSION.allowed_trigger_types).toEqual([]);
  });
});

describe("the RBAC var and the AuthResult", () => {
  it("an unknown key or an empty metadata rule is refused, not ignored", () => {
    expect(rbacConfigSchema.safeParse({ expose_function: [] }).success).toBe(false);
    expect(rbacConfigSchema.safeParse({ expose_functions: [{ metadata: {} }] }).success).toBe(false);
    expect(rbacConfigSchema.safeParse({ expose_functions: [{ match: "a", metadata: { b: 1 } }] }).success).toBe(false);
  });

  it("defaults as iii's (no registration of trigger types, registration of functions) and bounds the context", () => {
    expect(rbacAuthResult.parse({})).toMatchObject({
      allowed_functions: [],
      forbidden_functions: [],
      allow_trigger_type_registration: false,
      allow_function_registration: true,
      context: {},
    });
    expect(rbacAuthResult.parse({ context: null, function_registration_prefix: null }).context).toEqual({});
    expect(rbacAuthResult.safeParse({ context: { blob: "x".repeat(9000) } }).success).toBe(false);
    expect(rbacAuthResult.safeParse({ allowed_functions: "*" }).success).toBe(false);
  });
});
