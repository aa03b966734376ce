// One wording for a schema's refusal (protocol/src/issues.ts), used by the engine, the kit and the
// workers: the first issue's dotted path and message, every issue when asked, a name for the root.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { formatIssues } from "@iii-edge/protocol";

const body = z.object({ function_id: z.string(), payload: z.object({ items: z.array(z.number()) }) });
const refusal = (schema: z.ZodType, v: unknown) => {
  const r = schema.safeParse(v);
  if (r.success) throw new Error("expected a refusal");
  return r.error;
};

describe("formatIssues", () => {
  it("names the first issue by its dotted path", () => {
    const e = refusal(body, { function_id: 1, payload: { items: [1, "x"] } });
    expect(formatIssues(e)).toBe("function_id: Invalid input: expected string, received number");
  });

  it("lists every issue when asked, joined by '; '", () => {
    const e = refusal(body, { function_id: 1, payload: { items: [1, "x"] } });
    expect(formatIssues(e, { all: true })).toBe(
      "function_id: Invalid input: expected string, received number; payload.items.1: Invalid input: expected number, received string",
    );
  });

  it("a refusal of the whole value is its message alone, or named by `root`", () => {
    const e = refusal(z.string().min(3), "ab");
    expect(formatIssues(e)).toBe("Too small: expected string to have >=3 characters");
    expect(formatIssues(e, { root: "session_id" })).toBe("session_id: Too small: expected string to have >=3 characters");
  });

  it("says invalid when a failure carries no issue", () => {
    expect(formatIssues({ issues: [] })).toBe("invalid");
  });
});
