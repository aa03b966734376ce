// Pure parts, no VM: shell quoting, script assembly, result shaping within the engine's frame.
import { execFileSync } from "node:child_process";
import { describe, expect, test } from "vitest";
import { buildScript, shellQuote } from "../src/command.ts";
import { OUTPUT_LIMIT_BYTES, RESULT_JSON_BUDGET_BYTES } from "../src/limits.ts";
import { shapeResult, TIMEOUT_EXIT_CODE } from "../src/sandboxes.ts";

describe("command assembly", () => {
  test("quoted words survive /bin/sh unchanged", () => {
    const words = ["plain", "a b", "it's", "$(id)", "`id`", "\\", '"', "*", "", "new\nline", "'; rm -rf / #"];
    const out = execFileSync("sh", ["-c", `printf '%s\\0' ${words.map(shellQuote).join(" ")}`]).toString();
    expect(out.split("\0").slice(0, -1)).toEqual(words);
  });

  test("env, cwd and args become a script; NUL is rejected", () => {
    expect(buildScript({ command: "ls", args: ["-l"], cwd: "/tmp", env: [{ A: "1" }, { B: "x y" }] })).toBe(
      "export A='1'\nexport B='x y'\ncd '/tmp' || exit 1\nls '-l'\n",
    );
    expect(buildScript({ command: "pwd", cwd: "-x" })).toContain("cd './-x'");
    expect(() => buildScript({ command: "echo", args: ["a\0b"] })).toThrow(expect.objectContaining({ code: "invalid_argument" }));
  });
});

describe("result shaping", () => {
  test("timeouts report 124 and keep partial output", () => {
    const r = shapeResult({ exitCode: 137, timedOut: true, stdout: Buffer.from("partial"), stderr: Buffer.alloc(0) }, 5);
    expect(r).toEqual({ exit_code: TIMEOUT_EXIT_CODE, stdout: "partial", stderr: "", duration_ms: 5, timed_out: true });
  });

  test("streams past the limit are cut at a character boundary and flagged", () => {
    const big = Buffer.from("é".repeat(OUTPUT_LIMIT_BYTES)); // 2 bytes each
    const r = shapeResult({ exitCode: 0, timedOut: false, stdout: big, stderr: Buffer.from("ok") }, 1);
    expect(r.truncated).toEqual({ stdout: true });
    expect(Buffer.byteLength(r.stdout)).toBeLessThanOrEqual(OUTPUT_LIMIT_BYTES);
    expect(r.stdout.endsWith("é")).toBe(true);
  });

  test("output that escapes badly in JSON is trimmed to fit one engine frame", () => {
    const ctl = Buffer.alloc(OUTPUT_LIMIT_BYTES + 1, 1); // \u0001 is 6 bytes in JSON
    const r = shapeResult({ exitCode: 0, timedOut: false, stdout: ctl, stderr: ctl }, 1);
    expect(Buffer.byteLength(JSON.stringify(r))).toBeLessThanOrEqual(RESULT_JSON_BUDGET_BYTES);
    expect(r.truncated).toEqual({ stdout: true, stderr: true });
  });
});
