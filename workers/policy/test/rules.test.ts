// The evaluator of iii-permissions.yaml (docs/harness-contracts.md §3.2), rule kind by rule kind, over files
// parsed as the worker parses them.
import { describe, expect, it } from "vitest";
import { parsePermissions } from "../src/permissions-file.ts";
import { evaluate, functionMatcher, PermissionsError } from "../src/rules.ts";

const policy = (yaml: string) => parsePermissions(yaml);
const decide = (yaml: string, functionId: string, args: unknown = {}) => evaluate(policy(yaml), functionId, args);
const rules = (...lines: string[]) => `version: 1\nrules:\n${lines.map((l) => `  ${l}`).join("\n")}\n`;

/** A file with every rule kind, each commented (docs/harness-contracts.md §3.2). */
const EVERY_KIND_EXAMPLE = `version: 1
rules:                               # evaluated top to bottom, FIRST MATCH WINS
  - state::get                       # bare string  → allow (exact id)
  - 'shell::fs::*'                   # '*' glob      → allow any id matching (anchored)
  - '*::list'                        # leaf glob
  - '!state::set'                    # leading '!'   → deny (quote it: bare ! is a YAML tag)
  - '!provider::*'                   # namespace deny
  - rule_id: no-root-writes          # object form
    function: shell::fs::write       # exact id or '*' glob
    action: deny                     # allow | deny
    args:                            # ALL constraints must match (AND)
      path: { matches: '^/(etc|usr)/' }   # regex on a string arg
  - rule_id: tmp-writes
    function: shell::fs::write
    action: allow
    args:
      path: { matches: '^/tmp/' }
  - rule_id: only-ls
    function: shell::exec
    action: allow
    args:
      command: { equals: ls }        # deep equality
# no rule matched → needs_approval
`;

describe("a file with every rule kind", () => {
  const p = policy(EVERY_KIND_EXAMPLE);
  const check = (id: string, args: unknown = {}) => evaluate(p, id, args);

  it("a bare string allows that exact id, and only it", () => {
    expect(check("state::get")).toEqual({ decision: "allow", rule_id: "state::get" });
    expect(check("state::get_all")).toEqual({ decision: "needs_approval" });
    expect(check("xstate::get")).toEqual({ decision: "needs_approval" });
  });

  it("'*' globs are anchored at both ends", () => {
    expect(check("shell::fs::read")).toEqual({ decision: "allow", rule_id: "shell::fs::*" });
    expect(check("shell::fs::")).toEqual({ decision: "allow", rule_id: "shell::fs::*" });
    expect(check("myshell::fs::read")).toEqual({ decision: "needs_approval" });
    expect(check("state::list")).toEqual({ decision: "allow", rule_id: "*::list" });
    expect(check("state::list_groups")).toEqual({ decision: "needs_approval" });
  });

  it("'!' denies; the rule id is the pattern", () => {
    expect(check("state::set")).toEqual({ decision: "deny", rule_id: "state::set", rule_action: "deny" });
    expect(check("provider::openai::stream")).toEqual({ decision: "deny", rule_id: "provider::*", rule_action: "deny" });
  });

  it("first match wins: shell::fs::write is allowed by the glob before the object rules are reached", () => {
    expect(check("shell::fs::write", { path: "/etc/passwd" })).toEqual({ decision: "allow", rule_id: "shell::fs::*" });
  });

  it("an allow constraint on equality (deep)", () => {
    expect(check("shell::exec", { command: "ls" })).toEqual({ decision: "allow", rule_id: "only-ls" });
    expect(check("shell::exec", { command: "rm -rf /" })).toEqual({ decision: "needs_approval" });
    expect(check("shell::exec", {})).toEqual({ decision: "needs_approval" });
  });

  it("nothing matched → needs_approval", () => {
    expect(check("sandbox::exec")).toEqual({ decision: "needs_approval" });
  });
});

describe("object rules", () => {
  const file = rules(
    "- rule_id: no-root-writes",
    "  function: shell::fs::write",
    "  action: deny",
    "  args:",
    "    path: { matches: '^/(etc|usr)/' }",
    "    mode: { equals: { recursive: true, perms: [7, 5, 5] } }",
    "- rule_id: tmp-writes",
    "  function: shell::fs::write",
    "  action: allow",
    "  args:",
    "    path: { matches: '^/tmp/' }",
    "- rule_id: any-write-denied",
    "  function: 'shell::*'",
    "  action: deny",
  );
  const p = policy(file);

  it("every constraint must match (AND); the matched_constraint is the first by field name", () => {
    expect(evaluate(p, "shell::fs::write", { path: "/etc/hosts", mode: { perms: [7, 5, 5], recursive: true } })).toEqual({
      decision: "deny",
      rule_id: "no-root-writes",
      rule_action: "deny",
      // "mode" sorts before "path"
      matched_constraint: { field: "mode", operator: "equals", value: { recursive: true, perms: [7, 5, 5] } },
    });
    // One constraint fails → the rule does not apply, the next ones are tried.
    expect(evaluate(p, "shell::fs::write", { path: "/etc/hosts", mode: { perms: [7, 7, 7], recursive: true } })).toEqual({
      decision: "deny",
      rule_id: "any-write-denied",
      rule_action: "deny",
    });
    expect(evaluate(p, "shell::fs::write", { path: "/tmp/x" })).toEqual({ decision: "allow", rule_id: "tmp-writes" });
  });

  it("matches needs a string; equals is deep and order-insensitive for keys only", () => {
    expect(evaluate(p, "shell::fs::write", { path: 42 })).toMatchObject({ rule_id: "any-write-denied" });
    expect(evaluate(p, "shell::fs::write", { path: ["/tmp/x"] })).toMatchObject({ rule_id: "any-write-denied" });
    expect(evaluate(p, "shell::fs::write", { path: "/etc/x", mode: { recursive: true, perms: [5, 7, 5] } })).toMatchObject({
      rule_id: "any-write-denied",
    });
  });

  it("the regex is not anchored unless it says so", () => {
    const q = policy(rules("- { rule_id: r, function: f, action: deny, args: { q: { matches: 'secret' } } }"));
    expect(evaluate(q, "f", { q: "my secret plan" })).toMatchObject({
      decision: "deny",
      matched_constraint: { field: "q", operator: "matches", value: "secret" },
    });
  });

  it("non-object args are read as {}: a constrained rule cannot match them, an unconstrained one can", () => {
    for (const args of [null, undefined, "text", 7, ["/tmp/x"]]) {
      expect(evaluate(p, "shell::fs::write", args)).toEqual({ decision: "deny", rule_id: "any-write-denied", rule_action: "deny" });
    }
  });

  it("equals null and inherited keys", () => {
    const q = policy(rules("- rule_id: n", "  function: f", "  action: allow", "  args:", "    x: { equals: null }"));
    expect(evaluate(q, "f", { x: null })).toEqual({ decision: "allow", rule_id: "n" });
    expect(evaluate(q, "f", {})).toEqual({ decision: "needs_approval" });
    const r = policy(rules("- rule_id: c", "  function: f", "  action: allow", "  args:", "    constructor: { matches: '.' }"));
    expect(evaluate(r, "f", {})).toEqual({ decision: "needs_approval" });
  });

  it("rule_id defaults to the function pattern", () => {
    expect(decide(rules("- function: 'a::*'", "  action: deny"), "a::b")).toEqual({
      decision: "deny",
      rule_id: "a::*",
      rule_action: "deny",
    });
  });
});

describe("function patterns", () => {
  it("only '*' is special: every other regex metacharacter is literal", () => {
    expect(functionMatcher("a.b")("a.b")).toBe(true);
    expect(functionMatcher("a.b")("axb")).toBe(false);
    expect(functionMatcher("a.*")("a.anything")).toBe(true);
    expect(functionMatcher("a.*")("ab")).toBe(false);
    expect(functionMatcher("(x|y)+::*")("(x|y)+::z")).toBe(true);
    expect(functionMatcher("(x|y)+::*")("x::z")).toBe(false);
    expect(functionMatcher("a?b[c]^$\\d")("a?b[c]^$\\d")).toBe(true);
    expect(functionMatcher("*")("anything::at::all")).toBe(true);
    expect(functionMatcher("a::*::c")("a::b::x::c")).toBe(true);
    expect(functionMatcher("a::*::c")("a::b::cd")).toBe(false);
  });
});

describe("validation: a bad file is refused with the rule's index", () => {
  const refused = (yaml: string, message: RegExp) => {
    expect(() => policy(yaml)).toThrow(PermissionsError);
    expect(() => policy(yaml)).toThrow(message);
  };
  it("names the rule", () => {
    refused(rules("- state::get", "- function: x", "  action: maybe"), /rules\[1\].*action is allow or deny/);
    refused(rules("- state::get", "- rule_id: r", "  action: allow"), /rules\[1\] \(rule_id r\).*function/);
    refused(rules("- a", "- b", "- rule_id: r", "  function: f", "  action: deny", "  arg:", "    x: { equals: 1 }"), /rules\[2\].*arg/);
    refused(rules("- rule_id: r", "  function: f", "  action: deny", "  args:", "    x: { like: 1 }"), /rules\[0\].*equals.*matches/);
    refused(
      rules("- rule_id: r", "  function: f", "  action: deny", "  args:", "    x: { matches: '(' }"),
      /rules\[0\].*not a valid regex/,
    );
    refused(rules("- rule_id: r", "  function: f", "  action: deny", "  args:", "    x: { equals: 1, matches: a }"), /rules\[0\]/);
    refused(rules("- '!'"), /rules\[0\]/);
    refused(rules("- '!!x'"), /rules\[0\]/);
    refused(rules("- ''"), /rules\[0\]/);
    refused(rules("- 7"), /rules\[0\]/);
    refused(rules("- function: '!x'", "  action: deny"), /rules\[0\].*action: deny/);
  });
  it("checks the file's shape", () => {
    refused("version: 2\nrules: []\n", /version must be 1/);
    refused("rules: state::get\n", /rules must be a list/);
    refused("- state::get\n", /mapping/);
    refused("", /mapping/);
    refused("version: 1\nrules: []\nextra: true\n", /extra/);
  });
  it("refuses an unquoted '!' (a YAML tag) instead of dropping the deny", () => {
    refused(rules("- !state::set"), /quote/);
  });
  it("an empty rule list is valid: everything needs approval", () => {
    expect(decide("version: 1\nrules: []\n", "state::get")).toEqual({ decision: "needs_approval" });
  });
  it("duplicate rule ids are a warning, not an error", () => {
    const p = policy(rules("- state::get", "- rule_id: state::get", "  function: other", "  action: deny"));
    expect(p.warnings).toEqual([expect.stringMatching(/rules\[1\].*state::get.*rules\[0\]/)]);
  });
});
