// How the policy reads its file (src/yaml-reader.ts, the `yaml` library held strict): YAML 1.2 as
// written, and a refusal with the line for what could silently change the rules.
import { describe, expect, it } from "vitest";
import { readYaml } from "../src/yaml-reader.ts";

describe("readYaml", () => {
  it("reads block and flow collections with comments", () => {
    const text = [
      "# leading comment",
      "version: 1   # trailing comment",
      "rules:",
      "  - a::b",
      "  - '!c::*'",
      "  - rule_id: r",
      "    function: f",
      "    args:",
      "      path: { matches: '^/tmp/' }",
      "      list: [1, 'two', [3], {k: v}]",
    ].join("\n");
    expect(readYaml(text)).toEqual({
      version: 1,
      rules: ["a::b", "!c::*", { rule_id: "r", function: "f", args: { path: { matches: "^/tmp/" }, list: [1, "two", [3], { k: "v" }] } }],
    });
  });

  it("an empty document is null; a '---' start is fine", () => {
    expect(readYaml("")).toBeNull();
    expect(readYaml("---\na: 1\n")).toEqual({ a: 1 });
  });

  it.each([
    ["rules:\n  - !state::set", /line 2: .*quote it/],
    ["a: 1\na: 2", /line 2: Map keys must be unique/],
    ["a: 1\n---\nb: 2", /line 2: .*multiple documents/],
    ["a:\n\t- x", /line 2: Tabs are not allowed/],
    ["a: [1, 2", /line 1: /],
    ["a: b: c", /line 1: /],
    ["- *alias", /alias/i],
  ])("refuses %j", (text, message) => {
    expect(() => readYaml(text)).toThrow(message);
  });

  it("bounds alias expansion", () => {
    const bomb = [
      "a: &a [x, x, x, x, x, x, x, x, x, x]",
      "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]",
      "c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]",
    ].join("\n");
    expect(() => readYaml(bomb)).toThrow();
  });
});
