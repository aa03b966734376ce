// iii's hook contract (protocol/src/harness/hooks.ts): the five trigger types, a binding's config
// with iii's defaults, and the outputs a hook may answer. The engine refuses a binding whose config
// this rejects (engine-do/src/core/builtins/hook-points.ts; shown end to end in
// tests/harness/hook-points.test.ts).
import {
  HOOK_POINT_DEFAULT_TIMEOUT_MS,
  HOOK_POINTS,
  HOOK_TRIGGER_TYPES,
  hookOutput,
  hookPointOf,
  parseHookConfig,
} from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";

describe("hook trigger types", () => {
  it("are iii's five names, each naming its point back", () => {
    expect(Object.values(HOOK_TRIGGER_TYPES)).toEqual([
      "harness::hook::pre_turn",
      "harness::hook::pre_generate",
      "harness::hook::post_generate",
      "harness::hook::pre_trigger",
      "harness::hook::post_trigger",
    ]);
    for (const p of HOOK_POINTS) expect(hookPointOf(HOOK_TRIGGER_TYPES[p])).toBe(p);
    expect(hookPointOf("harness::hook::during_turn")).toBeUndefined();
    expect(hookPointOf("state")).toBeUndefined();
  });
});

describe("hook config", () => {
  it("fills iii's defaults: priority 0, 5 s, fail_closed before, fail_open after", () => {
    for (const p of HOOK_POINTS) {
      const r = parseHookConfig(p, undefined);
      expect(r.success).toBe(true);
      expect(r.data).toEqual({
        priority: 0,
        timeout_ms: HOOK_POINT_DEFAULT_TIMEOUT_MS,
        on_error: p.startsWith("pre_") ? "fail_closed" : "fail_open",
      });
    }
    expect(HOOK_POINT_DEFAULT_TIMEOUT_MS).toBe(5_000);
    expect(
      parseHookConfig("post_trigger", { functions: ["shell::*"], priority: -3, timeout_ms: 250, on_error: "fail_closed" }).data,
    ).toEqual({
      functions: ["shell::*"],
      priority: -3,
      timeout_ms: 250,
      on_error: "fail_closed",
    });
    expect(parseHookConfig("pre_turn", null).success).toBe(true);
  });

  it.each([
    ["pre_turn", { functions: ["a::*"] }, "functions"],
    ["pre_generate", { functions: [] }, "functions"],
    ["pre_trigger", { functions: "shell::*" }, "functions"],
    ["pre_trigger", { functions: [""] }, "functions"],
    ["pre_trigger", { timeout_ms: 0 }, "timeout_ms"],
    ["pre_trigger", { timeout_ms: 600_000 }, "timeout_ms"],
    ["post_trigger", { priority: 1.5 }, "priority"],
    ["post_generate", { on_error: "ignore" }, "on_error"],
    ["pre_turn", { prority: 1 }, "prority"],
    ["pre_turn", [1], ""],
  ] as const)("%s refuses %j, naming %s", (point, config, field) => {
    const r = parseHookConfig(point, config);
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toContain(field);
  });
});

describe("hook output", () => {
  it.each([
    [undefined],
    [null],
    [{ decision: "continue" }],
    [{ decision: "continue", mutations: { arguments: { a: 1 } }, annotations: { by: "x" } }],
    [{ decision: "continue", mutations: { system_prompt: "be brief", append_messages: [{ role: "user", content: "ctx" }] } }],
    [{ decision: "continue", mutations: { content: [{ type: "text", text: "redacted" }], details: null, is_error: true } }],
    [{ decision: "deny", reason: "no" }],
    [{ decision: "hold" }],
    [{ decision: "hold", pending_timeout_ms: 60_000 }],
  ])("reads %j", (out) => expect(hookOutput.safeParse(out).success).toBe(true));

  it.each([
    [{}],
    [{ decision: "allow" }],
    [{ decision: "deny" }],
    [{ decision: "hold", pending_timeout_ms: -1 }],
    [{ decision: "continue", mutations: { content: "text" } }],
    [{ decision: "continue", mutations: { append_messages: Array.from({ length: 17 }, () => ({ role: "user", content: "x" })) } }],
    ["continue"],
  ])("refuses %j", (out) => expect(hookOutput.safeParse(out).success).toBe(false));
});
