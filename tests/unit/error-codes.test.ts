// Closed error sets, one casing. `IIIError` accepts only codes of ERROR_CODES or HARNESS_ERROR_CODES
// (or a relayed one), which the type checks; what the type cannot see is an error body written as an
// object literal, so those are read from the sources here. Anything thrown keeps its causes.
import { readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { ERROR_CODES, HARNESS_ERROR_CODES, IIIError, toErrorBody } from "@iii-edge/protocol";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../scripts/workspace-exports.mjs";

function files(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) files(p, out);
    else if (name.endsWith(".ts")) out.push(p);
  }
  return out;
}

/** `{ code: "x" …` object literals in the engine, protocol and SDK sources (and `new IIIError("x"`,
 * which the type already holds to the closed sets). */
function codesWritten(): Map<string, string> {
  const found = new Map<string, string>();
  for (const dir of ["engine-do/src", "protocol/src", "sdk-edge/src", "sdk-browser/src"]) {
    for (const f of files(path.join(repoRoot, dir))) {
      const text = readFileSync(f, "utf8");
      for (const m of text.matchAll(/(?:\{\s*code:\s*|new IIIError\(\s*)"([^"]+)"/g)) found.set(m[1]!, path.relative(repoRoot, f));
    }
  }
  return found;
}

describe("error codes", () => {
  it("are lower snake_case, each once", () => {
    const all = [...ERROR_CODES, ...HARNESS_ERROR_CODES];
    for (const c of all) expect(c).toMatch(/^[a-z][a-z0-9]*(_[a-z0-9]+)*$/);
    expect(new Set(all).size).toBe(all.length);
  });
  it("a thrown error's body keeps what its causes said, once each", () => {
    const store = new Error("SQLITE_BUSY: database is locked");
    const write = new Error("saving the turn record failed", { cause: store });
    const body = toErrorBody(new IIIError("state_conflict", "turn t1 not advanced", { cause: write }));
    expect(body).toEqual({
      code: "state_conflict",
      message: "turn t1 not advanced (cause: saving the turn record failed) (cause: SQLITE_BUSY: database is locked)",
    });
    // A message that already says its cause does not say it twice; a relayed code passes as sent.
    const relayed = IIIError.relayed({ code: "mail_bounced", message: "no such mailbox" });
    expect(toErrorBody(new IIIError(relayed.code, `mail::send: ${relayed.message}`, { cause: relayed }))).toEqual({
      code: "mail_bounced",
      message: "mail::send: no such mailbox",
    });
  });
  it("the engine and SDKs write only codes of the closed set", () => {
    const outside = [...codesWritten()].filter(([c]) => !(ERROR_CODES as readonly string[]).includes(c) && c !== "custom");
    // `custom` is zod's issue code (ctx.addIssue), not a wire code.
    expect(outside).toEqual([]);
  });
});
