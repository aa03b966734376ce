// The edge entry's configuration: III_PERMISSIONS (the text `npm start` passes), else the built-in
// rules; a text that does not parse leaves every check failing (closed), never the defaults.
import { IIIError } from "@iii-edge/protocol";
import type { WorkerHandler, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import { describe, expect, it, vi } from "vitest";
import { CHECK_PERMISSIONS, configFrom, registerPolicy } from "../src/index.ts";

function handlerFor(env: Record<string, string>): WorkerHandler {
  const registered = new Map<string, WorkerHandler>();
  const surface = {
    runtime: "edge",
    env,
    registerFunction: (id: string, h: WorkerHandler) => registered.set(id, h),
  } as unknown as WorkerSurface;
  registerPolicy(surface, configFrom(env));
  return registered.get(CHECK_PERMISSIONS)!;
}
// The engine's catalog as the policy reads it: the built-ins it serves, and one function registered
// by the open local engine's connection, and a harness function with the kernel mark.
const ctx = {
  trigger: async (req: { function_id: string; payload: { function_id: string } }) => {
    if (req.function_id !== "engine::functions::info") throw new Error(`unexpected ${req.function_id}`);
    const id = req.payload.function_id;
    if (id.startsWith("state::")) return { function_id: id, served_by: "engine" };
    if (id === "sandbox::exec") return { function_id: id, served_by: "anonymous" };
    if (id === "approval::resolve") return { function_id: id, metadata: { model: "never" }, served_by: "deployment" };
    throw new IIIError("not_found", `Function ${id} not found`);
  },
} as never;

describe("the edge entry", () => {
  it("reads its rules from III_PERMISSIONS", async () => {
    const check = handlerFor({ III_PERMISSIONS: "version: 1\nrules:\n  - '!sandbox::*'\n" });
    expect(await check({ function_id: "sandbox::exec", args: {} }, ctx)).toEqual({
      decision: "deny",
      rule_id: "sandbox::*",
      rule_action: "deny",
    });
    expect(await check({ function_id: "state::get", args: {} }, ctx)).toEqual({ decision: "needs_approval" });
  });

  it("uses the built-in rules when III_PERMISSIONS is unset", async () => {
    const check = handlerFor({});
    expect(await check({ function_id: "approval::resolve", args: {} }, ctx)).toMatchObject({ decision: "deny" });
    expect(await check({ function_id: "state::get", args: { scope: "session:s1", key: "k" }, session_id: "s1" }, ctx)).toEqual({
      decision: "allow",
      rule_id: "state::get",
    });
  });

  it("an invalid III_PERMISSIONS fails every check (policy_unavailable) and says so once", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const check = handlerFor({ III_PERMISSIONS: "version: 1\nrules:\n  - !state::set\n" });
      expect(warn).toHaveBeenCalledTimes(1);
      expect(() => check({ function_id: "state::get", args: {} }, ctx)).toThrow(IIIError);
      expect(() => check({ function_id: "state::get", args: {} }, ctx)).toThrow(expect.objectContaining({ code: "policy_unavailable" }));
    } finally {
      warn.mockRestore();
    }
  });

  it("bad input is invalid_arguments", () => {
    const check = handlerFor({});
    expect(() => check({ args: {} }, ctx)).toThrow(expect.objectContaining({ code: "invalid_arguments" }));
    expect(() => check("state::get", ctx)).toThrow(expect.objectContaining({ code: "invalid_arguments" }));
  });

  it("judges under rules given with the check instead of those in force; the floor still holds; a bad text is invalid_arguments", async () => {
    const check = handlerFor({ III_PERMISSIONS: "version: 1\nrules:\n  - 'sandbox::*'\n" });
    const given = "version: 1\nrules:\n  - '!sandbox::*'\n  - '*'\n";
    expect(await check({ function_id: "sandbox::exec", args: {}, policy: given }, ctx)).toMatchObject({
      decision: "deny",
      rule_id: "sandbox::*",
    });
    // The rules in force are untouched.
    expect(await check({ function_id: "sandbox::exec", args: {} }, ctx)).toMatchObject({ decision: "allow" });
    // '*' does not open the kernel.
    expect(await check({ function_id: "approval::resolve", args: {}, policy: given }, ctx)).toMatchObject({
      decision: "deny",
      rule_id: "kernel",
    });
    const versioned = (await check({ function_id: "state::get", args: {}, policy: given, with_version: true }, ctx)) as {
      policy_version?: string;
    };
    const inForce = (await check({ function_id: "state::get", args: {}, with_version: true }, ctx)) as { policy_version?: string };
    expect(versioned.policy_version).toMatch(/^[0-9a-f]{16}$/);
    expect(versioned.policy_version).not.toBe(inForce.policy_version);
    expect(() => check({ function_id: "state::get", policy: "rules: [" }, ctx)).toThrow(
      expect.objectContaining({ code: "invalid_arguments" }),
    );
  });
});
