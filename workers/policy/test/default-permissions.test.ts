// The shipped iii-permissions.yaml: it is the built-in default, it parses, and it keeps the model
// away from the kernel while letting it read.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../../tests/support/engine-server.ts";
import { DEFAULT_PERMISSIONS_YAML } from "../src/default-permissions.ts";
import { defaultPolicy, parsePermissions } from "../src/permissions-file.ts";
import { evaluate } from "../src/rules.ts";

const shipped = readFileSync(path.join(repoRoot, "iii-permissions.yaml"), "utf8");

describe("the shipped iii-permissions.yaml", () => {
  it("is the built-in default, byte for byte", () => {
    expect(DEFAULT_PERMISSIONS_YAML).toBe(shipped);
  });

  it("parses without warnings", () => {
    expect(parsePermissions(shipped).warnings).toEqual([]);
  });

  const kernel = [
    "approval::resolve",
    "policy::check_permissions",
    "hook-fanout::publish_collect",
    "state::set",
    "state::update",
    "state::delete",
    "stream::set",
    "iii::durable::publish",
    "auth::get_token",
    "auth::set_token",
    "auth::delete_token",
    "auth::openai::login",
    "run::start",
    "run::steer",
    "provider::openai::stream",
    "provider::anthropic::stream",
    "turn::function_execute",
    "turn::on_approval",
    "session-tree::append",
    "session-inbox::push",
    "engine::channels::create",
    "engine::register_trigger",
    "publish",
  ];
  it.each(kernel)("denies %s to the model", (fn) => {
    expect(evaluate(defaultPolicy(), fn, { anything: true })).toMatchObject({ decision: "deny", rule_action: "deny" });
  });

  it.each(["state::get", "state::list", "models::list", "models::get", "engine::functions::list", "engine::functions::info", "directory::skills::get"])("allows %s (read-only)", (fn) => {
    expect(evaluate(defaultPolicy(), fn, {})).toMatchObject({ decision: "allow" });
  });

  it("denies reading the stored credentials, even through the allowed state::get", () => {
    expect(evaluate(defaultPolicy(), "state::get", { scope: "auth_credentials", key: "openai" })).toMatchObject({
      decision: "deny",
      rule_id: "no-credential-reads",
      matched_constraint: { field: "scope", operator: "matches" },
    });
    expect(evaluate(defaultPolicy(), "state::list", { scope: "auth_credentials" })).toMatchObject({ decision: "deny" });
    expect(evaluate(defaultPolicy(), "state::get", { scope: "turn_state", key: "s1" })).toEqual({ decision: "allow", rule_id: "state::get" });
  });

  it.each(["sandbox::exec", "shell::fs::write", "state::list_groups", "my-worker::do_something"])("asks a person about %s", (fn) => {
    expect(evaluate(defaultPolicy(), fn, {})).toEqual({ decision: "needs_approval" });
  });
});
