// The DenialEnvelope builders and the redaction of their `args_excerpt` (docs/harness-contracts.md §3.3):
// the orchestrator builds every envelope; the format's constants are protocol's.
import {
  REDACTED,
  REDACTION_CYCLE_MARKER,
  REDACTION_MAX_DEPTH,
  REDACTION_MAX_DEPTH_MARKER,
  REDACTION_MAX_STRING_CODE_POINTS,
  SECRET_KEYS,
} from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";
import { clipString, gateUnavailableEnvelope, isSecretKey, permissionsDenyEnvelope, redactArgs, userDenyEnvelope } from "../src/denials.ts";

describe("redactArgs", () => {
  it("redacts secret-looking keys at any depth, and keys ending in _<secret>", () => {
    const input = {
      path: "/tmp/x",
      password: "hunter2",
      Token: "t",
      api_key: "k",
      apiKey: "k",
      "X-Api-Key": "k",
      headers: { Authorization: "Bearer abc", accept: "json" },
      openai_api_key: "sk-1",
      github_token: "g",
      db_password: "p",
      aws_secret: "s",
      nested: [{ refresh_token: "r", private_key: { pem: "-----BEGIN" } }],
      author: "keeps",
      tokens: 12,
      max_tokens: 100,
    };
    expect(redactArgs(input)).toEqual({
      path: "/tmp/x",
      password: REDACTED,
      Token: REDACTED,
      api_key: REDACTED,
      apiKey: REDACTED,
      "X-Api-Key": REDACTED,
      headers: { Authorization: REDACTED, accept: "json" },
      openai_api_key: REDACTED,
      github_token: REDACTED,
      db_password: REDACTED,
      aws_secret: REDACTED,
      nested: [{ refresh_token: REDACTED, private_key: REDACTED }],
      author: "keeps",
      tokens: 12,
      max_tokens: 100,
    });
  });

  it.each([...SECRET_KEYS, "x_auth", "my_access_key"])("%s is a secret key", (k) => expect(isSecretKey(k)).toBe(true));
  it.each(["author", "authority", "tokens", "token_count", "secretary", "path", "keyboard"])("%s is not", (k) =>
    expect(isSecretKey(k)).toBe(false),
  );

  it("clips strings to 256 code points plus an ellipsis, never splitting a surrogate pair", () => {
    const emoji = "😀".repeat(300); // 600 UTF-16 units, 300 code points
    const clipped = redactArgs({ text: emoji }) as { text: string };
    expect(Array.from(clipped.text)).toHaveLength(REDACTION_MAX_STRING_CODE_POINTS + 1);
    expect(clipped.text.endsWith("😀…")).toBe(true);
    expect(redactArgs("a".repeat(256))).toBe("a".repeat(256));
    expect(redactArgs("a".repeat(257))).toBe(`${"a".repeat(256)}…`);
    expect(clipString("é".repeat(10), 3)).toBe("ééé…");
  });

  it("caps nesting at depth 64", () => {
    let deep: unknown = "bottom";
    for (let i = 0; i < 100; i++) deep = { d: deep };
    let node = redactArgs(deep) as Record<string, unknown>;
    let depth = 0;
    while (typeof node === "object") {
      node = node.d as Record<string, unknown>;
      depth++;
    }
    expect(node).toBe(REDACTION_MAX_DEPTH_MARKER);
    expect(depth).toBe(REDACTION_MAX_DEPTH);
  });

  it("is cycle-safe and never mutates its input", () => {
    const a: Record<string, unknown> = { name: "a", password: "p" };
    a.self = a;
    a.list = [a, { back: a }];
    const frozen = JSON.stringify({ name: a.name, password: a.password });
    const out = redactArgs(a) as Record<string, unknown>;
    expect(out).toEqual({
      name: "a",
      password: REDACTED,
      self: REDACTION_CYCLE_MARKER,
      list: [REDACTION_CYCLE_MARKER, { back: REDACTION_CYCLE_MARKER }],
    });
    expect(a.password).toBe("p");
    expect(a.self).toBe(a);
    expect(JSON.stringify({ name: a.name, password: a.password })).toBe(frozen);
    // A shared (non-cyclic) sub-object is copied at each place.
    const shared = { v: 1 };
    expect(redactArgs({ x: shared, y: shared })).toEqual({ x: { v: 1 }, y: { v: 1 } });
  });

  it("keeps a __proto__ key a plain key and passes primitives through", () => {
    const input = JSON.parse('{"__proto__": {"token": "t"}, "n": 1}') as unknown;
    const out = redactArgs(input) as Record<string, unknown>;
    expect(Object.hasOwn(out, "__proto__")).toBe(true);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    for (const v of [null, 1, true, undefined]) expect(redactArgs(v)).toBe(v);
  });
});

describe("DenialEnvelope builders", () => {
  const call = { function_id: "shell::fs::write", arguments: { path: "/etc/passwd", token: "sekrit", content: "x".repeat(1000) } };

  it("permissions: names the function, the rule and the constraint, and nudges to other arguments", () => {
    const env = permissionsDenyEnvelope(call, "no-root-writes", { field: "path", operator: "matches", value: "^/(etc|usr)/" });
    expect(env).toMatchObject({
      schema_version: 1,
      status: "denied",
      denied_by: "permissions",
      function_id: "shell::fs::write",
      rule_id: "no-root-writes",
      rule_action: "deny",
      matched_constraint: { field: "path", operator: "matches", value: "^/(etc|usr)/" },
      args_excerpt: { path: "/etc/passwd", token: REDACTED, content: `${"x".repeat(256)}…` },
    });
    expect(env.reason).toContain("shell::fs::write");
    expect(env.reason).toContain("no-root-writes");
    expect(env.reason).toContain("path");
    expect(env.reason).toMatch(/different arguments/);
    expect(env.reason).not.toContain("sekrit");
    expect(call.arguments.token).toBe("sekrit");
  });

  it("permissions without a constraint has no matched_constraint", () => {
    const env = permissionsDenyEnvelope({ function_id: "state::set", arguments: {} }, "state::set");
    expect(env).not.toHaveProperty("matched_constraint");
    expect(env.reason).toMatch(/state::set/);
    expect(env.reason).toMatch(/another function/);
  });

  it("user: the operator's text, or the default", () => {
    expect(userDenyEnvelope(call, "not on prod")).toMatchObject({
      denied_by: "user",
      function_id: "shell::fs::write",
      reason: "not on prod",
      args_excerpt: { token: REDACTED },
    });
    expect(userDenyEnvelope(call).reason).toBe("Rejected by operator.");
    expect(userDenyEnvelope(call, null).reason).toBe("Rejected by operator.");
    expect(userDenyEnvelope(call, "  ").reason).toBe("Rejected by operator.");
    expect(userDenyEnvelope(call)).not.toHaveProperty("rule_id");
  });

  it("gate_unavailable: no rule fields, the transport failure in the reason", () => {
    const env = gateUnavailableEnvelope("shell::exec", "policy unreachable: timeout after 5000 ms");
    expect(env).toEqual({
      schema_version: 1,
      status: "denied",
      denied_by: "gate_unavailable",
      function_id: "shell::exec",
      reason: expect.stringContaining("policy unreachable: timeout after 5000 ms"),
    });
    expect(gateUnavailableEnvelope("f", "trigger_failed: boom", { password: "p" }).args_excerpt).toEqual({ password: REDACTED });
  });
});
