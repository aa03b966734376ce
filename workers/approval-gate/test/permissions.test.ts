// The permission model's pure parts (docs/harness-contracts.md §3.7): the mode matrix over the policy's
// answer and its floor, the lists, a sub-agent's narrowing, what a person's allow is bound to, and
// the settings changes the gate stores.
import {
  applyPermissionMode,
  approvalArgsHash,
  bindingChange,
  canonicalJson,
  defaultApprovalSettings,
  expiredReason,
  listMatches,
  narrowSettings,
  parseApprovalSettings,
  type AlwaysAllowEntry,
  type ApprovalSettings,
  type PermissionMode,
  type PolicyDecision,
} from "@iii-edge/protocol/harness";
import { describe, expect, it } from "vitest";
import { applyChange } from "../src/settings.ts";

const entry = (function_id: string): AlwaysAllowEntry => ({ function_id, granted_at: 1, granted_by: "user_click" });
const settings = (mode: PermissionMode, always: string[] = [], approved: string[] = []): ApprovalSettings => ({
  mode,
  always_allow: always.map(entry),
  approved_always: approved.map(entry),
  mode_set_at: 1,
});
const ALLOW: PolicyDecision = { decision: "allow", rule_id: "r" };
const DENY: PolicyDecision = { decision: "deny", rule_id: "no-deletes", rule_action: "deny" };
const ASK: PolicyDecision = { decision: "needs_approval" };
const KERNEL: PolicyDecision = { decision: "deny", rule_id: "kernel", rule_action: "deny" };
const SCOPE: PolicyDecision = { decision: "deny", rule_id: "session-scope", rule_action: "deny" };

describe("the mode matrix (iii's approval-gate)", () => {
  const decide = (s: ApprovalSettings, p: PolicyDecision, fn = "mail::send") => applyPermissionMode(s, fn, p).decision;

  it("manual: the file decides, anything it does not allow asks; always_allow is dormant", () => {
    expect(decide(settings("manual"), ALLOW)).toBe("allow");
    expect(decide(settings("manual"), DENY)).toBe("deny");
    expect(decide(settings("manual"), ASK)).toBe("needs_approval");
    expect(decide(settings("manual", ["mail::send"]), ASK)).toBe("needs_approval");
  });

  it("auto: manual plus the session's always_allow list (exact ids and prefixes ending in *)", () => {
    expect(decide(settings("auto", ["mail::send"]), ASK)).toBe("allow");
    expect(decide(settings("auto", ["mail::*"]), DENY)).toBe("allow");
    expect(decide(settings("auto", ["mail::*"]), ASK, "files::delete")).toBe("needs_approval");
    expect(applyPermissionMode(settings("auto", ["mail::*"]), "mail::send", ASK)).toEqual({ decision: "allow", by: "always_allow" });
  });

  it("approved_always holds in every mode", () => {
    for (const mode of ["manual", "auto"] as const) {
      expect(applyPermissionMode(settings(mode, [], ["mail::send"]), "mail::send", ASK)).toEqual({
        decision: "allow",
        by: "approved_always",
      });
    }
  });

  it("full allows what the file denies or would ask about", () => {
    expect(decide(settings("full"), DENY)).toBe("allow");
    expect(decide(settings("full"), ASK)).toBe("allow");
  });

  it("the floor: the kernel and reads outside the session stay denied in every mode and whatever the lists hold", () => {
    for (const mode of ["manual", "auto", "full"] as const) {
      const s = settings(mode, ["*"], ["*"]);
      expect(decide(s, KERNEL, "approval::set-mode")).toBe("deny");
      expect(decide(s, SCOPE, "state::get")).toBe("deny");
    }
  });
});

describe("lists and narrowing", () => {
  it("an entry is an exact id or a prefix with a final *", () => {
    expect(listMatches([entry("a::b")], "a::b")).toBe(true);
    expect(listMatches([entry("a::b")], "a::bc")).toBe(false);
    expect(listMatches([entry("a::*")], "a::bc")).toBe(true);
    expect(listMatches([entry("a::*")], "b::a")).toBe(false);
  });

  it("a child gets the stricter mode and only the entries its parent also holds; with no record of its own, its parent's", () => {
    const parent = settings("auto", ["weather::*", "mail::send"], ["files::read"]);
    const child = settings("full", ["weather::forecast", "files::delete"], ["files::read", "shell::exec"]);
    const narrowed = narrowSettings(child, parent);
    expect(narrowed.mode).toBe("auto");
    expect(narrowed.always_allow.map((e) => e.function_id)).toEqual(["weather::forecast"]);
    expect(narrowed.approved_always.map((e) => e.function_id)).toEqual(["files::read"]);
    expect(narrowSettings(undefined, parent)).toBe(parent);
    expect(narrowSettings(settings("manual"), settings("full")).mode).toBe("manual");
    // A child in full under a manual parent asks like its parent.
    expect(applyPermissionMode(narrowSettings(settings("full"), settings("manual")), "mail::send", ASK).decision).toBe("needs_approval");
  });
});

describe("what an allow is bound to", () => {
  it("the argument hash ignores key order and sees every value", async () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { f: 2, e: 3 }], c: null } })).toBe('{"a":{"c":null,"d":[1,{"e":3,"f":2}]},"b":1}');
    const h = await approvalArgsHash({ to: "ada@example.com", body: "hi" });
    expect(h).toMatch(/^[0-9a-f]{64}$/);
    expect(await approvalArgsHash({ body: "hi", to: "ada@example.com" })).toBe(h);
    expect(await approvalArgsHash({ to: "all@example.com", body: "hi" })).not.toBe(h);
  });

  it("names which part changed", () => {
    const b = { function_id: "mail::send", args_hash: "a".repeat(64), policy_version: "v1" };
    expect(bindingChange(b, { ...b })).toBeUndefined();
    expect(bindingChange(b, { ...b, function_id: "mail::send_all" })).toBe("function_id");
    expect(bindingChange(b, { ...b, args_hash: "b".repeat(64) })).toBe("args_hash");
    expect(bindingChange(b, { ...b, policy_version: "v2" })).toBe("policy_version");
  });
});

describe("settings changes", () => {
  it("set the mode, add idempotently, remove what is there; never mutate the input", () => {
    const start = defaultApprovalSettings();
    const full = applyChange(start, { kind: "mode", mode: "full" }, 10);
    expect(full).toMatchObject({ mode: "full", mode_set_at: 10 });
    expect(start.mode).toBe("manual");
    const added = applyChange(full, { kind: "add", list: "always_allow", function_id: "mail::send" }, 20);
    expect(added.always_allow).toEqual([{ function_id: "mail::send", granted_at: 20, granted_by: "user_click" }]);
    expect(applyChange(added, { kind: "add", list: "always_allow", function_id: "mail::send" }, 30).always_allow).toEqual(
      added.always_allow,
    );
    expect(applyChange(added, { kind: "remove", list: "always_allow", function_id: "nope" }, 30)).toEqual(added);
    expect(applyChange(added, { kind: "remove", list: "always_allow", function_id: "mail::send" }, 30).always_allow).toEqual([]);
    expect(added.always_allow).toHaveLength(1);
    expect(parseApprovalSettings(added)).toEqual(added);
    expect(parseApprovalSettings({ ...added, mode: "yolo" })).toBeUndefined();
  });

  it("the expiry denial says what happened and what to do", () => {
    expect(expiredReason(1_800_000)).toMatch(/within 30 min, so it was not run/);
    expect(expiredReason(5_000)).toMatch(/within 5 s/);
  });
});
