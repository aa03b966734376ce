// One error set, one casing: every code the engine and the SDKs write is in ERROR_CODES, and every
// code there is lower snake_case.
import { readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { ERROR_CODES } from "@iii-edge/protocol";
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

/** `{ code: "x" …` object literals and `new IIIError("x"` in the engine, protocol and SDK sources. */
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
    for (const c of ERROR_CODES) expect(c).toMatch(/^[a-z][a-z0-9]*(_[a-z0-9]+)*$/);
    expect(new Set(ERROR_CODES).size).toBe(ERROR_CODES.length);
  });
  it("the engine and SDKs write only codes of the closed set", () => {
    const outside = [...codesWritten()].filter(([c]) => !(ERROR_CODES as readonly string[]).includes(c) && c !== "custom");
    // `custom` is zod's issue code (ctx.addIssue), not a wire code.
    expect(outside).toEqual([]);
  });
});
