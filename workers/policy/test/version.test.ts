// The policy version (docs/harness-contracts.md §3.7): what a person's allow is bound to besides the call.
import { describe, expect, it } from "vitest";
import { parsePermissions, policyVersion, textVersion } from "../src/permissions-file.ts";

describe("policy_version", () => {
  it("changes with the file's text, and only then", () => {
    const a = "version: 1\nrules:\n  - 'weather::*'\n";
    expect(textVersion(a)).toBe(textVersion(a));
    expect(textVersion(a)).toMatch(/^[0-9a-f]{16}$/);
    expect(textVersion(`${a}  - mail::send\n`)).not.toBe(textVersion(a));
  });

  it("a compiled policy carries the version of its text", () => {
    const text = "version: 1\nrules:\n  - state::get\n";
    expect(policyVersion(parsePermissions(text))).toBe(textVersion(text));
  });
});
