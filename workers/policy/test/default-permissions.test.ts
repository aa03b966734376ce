// The shipped iii-permissions.yaml: it is the built-in default, it parses, and it keeps the model
// away from the kernel and other sessions' data while letting it read its own.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "@iii-edge/test-support/engine-server";
import { DEFAULT_PERMISSIONS_YAML } from "../src/default-permissions.ts";
import { defaultPolicy, parsePermissions } from "../src/permissions-file.ts";
import { decide, KERNEL_RULE_ID, SCOPE_RULE_ID } from "../src/floor.ts";

const shipped = readFileSync(path.join(repoRoot, "iii-permissions.yaml"), "utf8");

describe("the shipped iii-permissions.yaml", () => {
  it("is the built-in default, byte for byte", () => {
    expect(DEFAULT_PERMISSIONS_YAML).toBe(shipped);
  });

  it("parses without warnings", () => {
    expect(parsePermissions(shipped).warnings).toEqual([]);
  });

  // The engine's writing built-ins are the kernel by their id; the harness's functions by the mark
  // their workers register them with (tests/security/model-kernel.test.ts checks the live catalog).
  const builtinKernel = [
    "state::set",
    "state::update",
    "state::delete",
    "stream::set",
    "stream::send",
    "iii::durable::publish",
    "engine::channels::create",
    "engine::register_trigger",
    "engine::queue::enqueue",
    "publish",
    "state::list_groups",
    "engine::traces::list",
  ];
  it.each(builtinKernel)("denies the built-in %s to the model before any rule, even under an allow-all file", (fn) => {
    expect(decide(defaultPolicy(), fn, { anything: true }, "s1", { served_by: "engine" })).toMatchObject({
      decision: "deny",
      rule_id: KERNEL_RULE_ID,
    });
    expect(decide(parsePermissions("version: 1\nrules:\n  - '*'\n"), fn, {}, "s1", undefined)).toMatchObject({
      decision: "deny",
      rule_id: KERNEL_RULE_ID,
    });
  });

  const marked = { metadata: { model: "never" }, served_by: "deployment" };
  it.each([
    "approval::resolve",
    "policy::check_permissions",
    "auth::get_token",
    "run::start",
    "provider::openai::stream",
    "turn::function_execute",
    "session-tree::append",
    "models::register",
  ])("denies %s, marked model: never, even where a rule allows it", (fn) => {
    expect(decide(defaultPolicy(), fn, {}, "s1", marked)).toMatchObject({ decision: "deny", rule_id: KERNEL_RULE_ID });
    expect(decide(parsePermissions(`version: 1\nrules:\n  - '${fn}'\n  - '*'\n`), fn, {}, "s1", marked)).toMatchObject({
      decision: "deny",
      rule_id: KERNEL_RULE_ID,
    });
  });

  const engine = { served_by: "engine" };
  it.each([
    "models::list",
    "models::get",
    "engine::functions::list",
    "engine::functions::info",
    "directory::skills::get",
    "harness::spawn",
  ])("allows %s (served by the deployment)", (fn) => {
    expect(decide(defaultPolicy(), fn, {}, "s1", { served_by: "deployment" })).toMatchObject({ decision: "allow" });
  });

  it("state and stream reads reach the session's own scopes only", () => {
    expect(decide(defaultPolicy(), "state::get", { scope: "session:s1", key: "notes" }, "s1", engine)).toEqual({
      decision: "allow",
      rule_id: "state::get",
    });
    expect(decide(defaultPolicy(), "state::list", { scope: "session:s1:drafts" }, "s1", engine)).toEqual({
      decision: "allow",
      rule_id: "state::list",
    });
    for (const scope of ["turn_state", "run_request", "auth_credentials", "session:s2", "session:s1x", "models"]) {
      expect(decide(defaultPolicy(), "state::get", { scope, key: "s1" }, "s1", engine)).toMatchObject({
        decision: "deny",
        rule_id: SCOPE_RULE_ID,
        matched_constraint: { field: "scope", value: scope },
      });
    }
    expect(decide(defaultPolicy(), "stream::list_items", { stream_name: "agent::events", group_id: "s1" }, "s1", engine)).toMatchObject({
      decision: "allow",
    });
    expect(decide(defaultPolicy(), "stream::list_items", { stream_name: "agent::events", group_id: "s2" }, "s1", engine)).toMatchObject({
      decision: "deny",
      rule_id: SCOPE_RULE_ID,
    });
    // Without a session, only what the file names.
    expect(decide(defaultPolicy(), "state::get", { scope: "session:s1", key: "k" }, undefined, engine)).toMatchObject({
      decision: "deny",
      rule_id: SCOPE_RULE_ID,
    });
  });

  it.each(["sandbox::exec", "shell::fs::write", "my-worker::do_something"])("asks a person about %s", (fn) => {
    expect(decide(defaultPolicy(), fn, {}, "s1", { served_by: "anonymous" })).toEqual({ decision: "needs_approval" });
  });

  it("an auto-allowed id served by an untrusted principal asks a person", () => {
    expect(decide(defaultPolicy(), "directory::skills::search", {}, "s1", { served_by: "tenant-a" })).toEqual({
      decision: "needs_approval",
    });
    expect(decide(defaultPolicy(), "models::sync", {}, "s1", { served_by: "tenant-a" })).toEqual({ decision: "needs_approval" });
    // The open local engine's connections are trusted by default; a file's `trusted:` replaces that.
    expect(decide(defaultPolicy(), "models::sync", {}, "s1", { served_by: "anonymous" })).toMatchObject({ decision: "allow" });
    const named = parsePermissions("version: 1\nrules:\n  - 'directory::*'\ntrusted:\n  'directory::*': [dir-svc]\n");
    expect(decide(named, "directory::skills::search", {}, "s1", { served_by: "dir-svc" })).toMatchObject({ decision: "allow" });
    expect(decide(named, "directory::skills::search", {}, "s1", { served_by: "anonymous" })).toEqual({ decision: "needs_approval" });
    expect(decide(named, "directory::skills::search", {}, "s1", { served_by: "deployment" })).toMatchObject({ decision: "allow" });
  });
});
