// The rules of an `iii-permissions.yaml` (docs/harness-contracts.md §3.2): validation of the parsed document,
// compilation into matchers, and the evaluation `policy::check_permissions` answers with. Pure: no
// YAML, no I/O.
import { z } from "zod";
import type { PolicyDecision } from "@iii-edge/protocol/harness";

/** Most rules one file may hold: every check walks them in order, and a policy people read stays
 * far below this; past it the file is rejected rather than slowing every function call. */
export const MAX_RULES = 10_000;
/** Longest function pattern or rule id: function ids are short (`worker::area::fn`), and the engine
 * itself caps an id well below this. */
export const MAX_PATTERN_LENGTH = 512;
/** Longest `matches` regex: enough for any argument check a person writes by hand. */
export const MAX_REGEX_LENGTH = 1_024;
/** Most constraints on one rule: one per argument field, of which a function has a handful. */
export const MAX_CONSTRAINTS = 64;

export type RuleAction = "allow" | "deny";
export type ConstraintOperator = "equals" | "matches";

export interface CompiledConstraint {
  field: string;
  operator: ConstraintOperator;
  /** What the file says: the value to equal, or the regex source. */
  value: unknown;
  test(arg: unknown): boolean;
}

export interface CompiledRule {
  rule_id: string;
  /** The function pattern as written (exact id, or a glob with `*`). */
  function: string;
  action: RuleAction;
  /** Sorted by field name (the first is the one a deny reports). */
  constraints: CompiledConstraint[];
  matchesFunction(functionId: string): boolean;
}

export interface CompiledPolicy {
  rules: CompiledRule[];
  /** `trusted:` (or DEFAULT_TRUSTED): which principals may serve the ids the rules allow. */
  trusted: TrustedEntry[];
  /** `state_scopes:` — scopes a model may read besides its own session's. */
  stateScopes: ((scope: string) => boolean)[];
  /** `stream_names:` — streams a model may read in any group, besides its own session's groups. */
  streamNames: ((name: string) => boolean)[];
  /** Things worth a log line that do not make the file invalid (duplicate rule ids). */
  warnings: string[];
}

/** A file that cannot be used: the message names the place (`rules[3]: …`). */
export class PermissionsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PermissionsError";
  }
}

// ------------------------------------------------------------------ validation (zod)

const functionPattern = z
  .string({
    error: (issue) => (issue.input === undefined ? "function is required (an exact id or a '*' glob)" : "function must be a string"),
  })
  .min(1, "a function pattern must not be empty")
  .max(MAX_PATTERN_LENGTH)
  .refine((s) => s.trim() === s && !/\s/.test(s), "a function pattern has no spaces")
  .refine((s) => !s.startsWith("!"), "'!' only negates a rule written as a string ('!fn::id'); an object rule says action: deny");

const constraintSchema = z.record(z.string(), z.unknown()).superRefine((c, ctx) => {
  const keys = Object.keys(c);
  if (keys.length !== 1 || (keys[0] !== "equals" && keys[0] !== "matches")) {
    ctx.addIssue({
      code: "custom",
      message: `a constraint is { equals: <value> } or { matches: '<regex>' }, got keys [${keys.join(", ")}]`,
    });
    return;
  }
  if (keys[0] === "matches") {
    const source = c.matches;
    if (typeof source !== "string" || source === "") ctx.addIssue({ code: "custom", message: "matches takes a non-empty regex string" });
    else if (source.length > MAX_REGEX_LENGTH)
      ctx.addIssue({ code: "custom", message: `matches regex is longer than ${MAX_REGEX_LENGTH} characters` });
    else {
      try {
        new RegExp(source);
      } catch (e) {
        ctx.addIssue({ code: "custom", message: `matches is not a valid regex: ${(e as Error).message}` });
      }
    }
  } else if (c.equals === undefined) {
    ctx.addIssue({ code: "custom", message: "equals needs a value (write null for null)" });
  }
});

// Strict: an unknown key is almost always a typo (`arg:` for `args:`), and a typo that dropped the
// constraints of an allow rule would allow every call of that function.
const objectRuleSchema = z.strictObject({
  rule_id: z.string().min(1).max(MAX_PATTERN_LENGTH).optional(),
  function: functionPattern,
  action: z.enum(["allow", "deny"], { error: "action is allow or deny" }),
  args: z
    .record(z.string().min(1, "an argument field name must not be empty"), constraintSchema)
    .refine((a) => Object.keys(a).length <= MAX_CONSTRAINTS, `at most ${MAX_CONSTRAINTS} constraints per rule`)
    .optional(),
});

const stringRuleSchema = z
  .string()
  .min(1, "a rule must not be empty")
  .max(MAX_PATTERN_LENGTH + 1)
  .transform((s, ctx) => {
    const deny = s.startsWith("!");
    const pattern = deny ? s.slice(1) : s;
    const checked = functionPattern.safeParse(pattern);
    if (!checked.success) {
      ctx.addIssue({ code: "custom", message: checked.error.issues[0]?.message ?? "invalid function pattern" });
      return z.NEVER;
    }
    return { rule_id: pattern, function: pattern, action: (deny ? "deny" : "allow") as RuleAction, args: undefined };
  });

/** Most principals named for one pattern of `trusted:`, and most entries in it or in a scope list:
 * a deployment names a handful of services; past this it is a generated file, not a policy. */
export const MAX_TRUSTED_NAMES = 1_000;

/** A principal as the engine names a function's server: a token's `sub` (1–128 characters),
 * `deployment`, or `*` (anyone). */
const principalName = z.string().min(1).max(128);

const fileSchema = z.strictObject({
  version: z.literal(1, { error: "version must be 1" }).optional(),
  rules: z.array(z.unknown(), { error: "rules must be a list" }).max(MAX_RULES, `at most ${MAX_RULES} rules`),
  trusted: z
    .record(functionPattern, z.array(principalName, { error: "each trusted pattern names a list of principals" }).max(MAX_TRUSTED_NAMES))
    .refine((t) => Object.keys(t).length <= MAX_TRUSTED_NAMES, `at most ${MAX_TRUSTED_NAMES} trusted patterns`)
    .optional(),
  state_scopes: z.array(functionPattern, { error: "state_scopes is a list of scope names or '*' globs" }).max(MAX_TRUSTED_NAMES).optional(),
  stream_names: z
    .array(functionPattern, { error: "stream_names is a list of stream names or '*' globs" })
    .max(MAX_TRUSTED_NAMES)
    .optional(),
});

/** Who may serve the functions the rules allow without asking, when the file does not say:
 * `anonymous`, the one principal of the open local engine (`npm start` without AUTH_SECRET, where
 * every connection is a process on the developer's machine). With AUTH_SECRET set no connection is
 * anonymous (do not mint a token with that `sub`), so a tenant is never trusted by default; the
 * engine's built-ins and the deployed Worker's own functions are always trusted. */
export const DEFAULT_TRUSTED: Readonly<Record<string, readonly string[]>> = Object.freeze({ "*": Object.freeze(["anonymous"]) });

export interface TrustedEntry {
  pattern: string;
  principals: readonly string[];
  matches(functionId: string): boolean;
}

type RuleSpec = { rule_id?: string; function: string; action: RuleAction; args?: Record<string, Record<string, unknown>> };

function describe(rule: unknown): string {
  if (typeof rule === "string") return `'${rule.length > 60 ? `${rule.slice(0, 60)}…` : rule}'`;
  if (rule && typeof rule === "object" && !Array.isArray(rule)) {
    const r = rule as Record<string, unknown>;
    if (typeof r.rule_id === "string") return `(rule_id ${r.rule_id})`;
    if (typeof r.function === "string") return `(function ${r.function})`;
  }
  return "";
}

function firstIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return "invalid";
  const where = issue.path.length > 0 ? `${issue.path.map(String).join(".")}: ` : "";
  return `${where}${issue.message}`;
}

/** Validate a parsed document and compile it. Throws PermissionsError naming the rule index. */
export function compilePolicy(doc: unknown): CompiledPolicy {
  if (doc === null || typeof doc !== "object" || Array.isArray(doc))
    throw new PermissionsError("the file must be a mapping with `version: 1` and a `rules:` list");
  const file = fileSchema.safeParse(doc);
  if (!file.success) throw new PermissionsError(firstIssue(file.error));
  const rules: CompiledRule[] = [];
  const warnings: string[] = [];
  const seen = new Map<string, number>();
  file.data.rules.forEach((raw, index) => {
    const parsed = typeof raw === "string" ? stringRuleSchema.safeParse(raw) : objectRuleSchema.safeParse(raw);
    if (!parsed.success) {
      const hint = raw === null ? " (an unquoted '!' starts a YAML tag: write '!fn::id' in quotes)" : "";
      throw new PermissionsError(`rules[${index}] ${describe(raw)}: ${firstIssue(parsed.error)}${hint}`.replace(/\s+:/, ":"));
    }
    const rule = compileRule(parsed.data);
    const earlier = seen.get(rule.rule_id);
    if (earlier !== undefined) warnings.push(`rules[${index}]: rule_id ${rule.rule_id} repeats rules[${earlier}]`);
    else seen.set(rule.rule_id, index);
    rules.push(rule);
  });
  const trusted = Object.entries(file.data.trusted ?? DEFAULT_TRUSTED).map(
    ([pattern, principals]): TrustedEntry => ({ pattern, principals, matches: functionMatcher(pattern) }),
  );
  return {
    rules,
    warnings,
    trusted,
    stateScopes: (file.data.state_scopes ?? []).map(functionMatcher),
    streamNames: (file.data.stream_names ?? []).map(functionMatcher),
  };
}

// ------------------------------------------------------------------ compilation

/** An anchored matcher for a pattern: `*` is any run of characters, everything else is literal. */
export function functionMatcher(pattern: string): (functionId: string) => boolean {
  if (!pattern.includes("*")) return (id) => id === pattern;
  const re = new RegExp(`^${pattern.split("*").map(escapeRegex).join(".*")}$`, "s");
  return (id) => re.test(id);
}

function escapeRegex(s: string): string {
  return s.replace(/[\\^$.|?+()[\]{}*/-]/g, "\\$&");
}

function compileRule(spec: RuleSpec): CompiledRule {
  const constraints = Object.keys(spec.args ?? {})
    .sort(compareCodeUnits)
    .map((field): CompiledConstraint => {
      const c = spec.args![field];
      if ("matches" in c) {
        const source = c.matches as string;
        const re = new RegExp(source);
        return { field, operator: "matches", value: source, test: (v) => typeof v === "string" && re.test(v) };
      }
      const expected = c.equals;
      return { field, operator: "equals", value: expected, test: (v) => deepEqual(v, expected) };
    });
  return {
    rule_id: spec.rule_id ?? spec.function,
    function: spec.function,
    action: spec.action,
    constraints,
    matchesFunction: functionMatcher(spec.function),
  };
}

/** Field names sort by UTF-16 code units: the same order in every runtime and locale. */
function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** JSON deep equality: same primitives, arrays element by element, objects with the same keys (any
 * order). Recursion follows the rule's value, so its depth is bounded by the file. */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((v, i) => deepEqual(v, bb[i]));
  }
  const ak = Object.keys(a);
  const bk = Object.keys(b);
  if (ak.length !== bk.length) return false;
  const bo = b as Record<string, unknown>;
  return ak.every((k) => Object.hasOwn(bo, k) && deepEqual((a as Record<string, unknown>)[k], bo[k]));
}

// ------------------------------------------------------------------ evaluation

/** The decision for one call: the first rule whose function pattern and every constraint match
 * decides; nothing matched → needs_approval. Non-object `args` are read as `{}`. */
export function evaluate(policy: CompiledPolicy, functionId: string, args: unknown): PolicyDecision {
  const fields: Record<string, unknown> =
    args !== null && typeof args === "object" && !Array.isArray(args) ? (args as Record<string, unknown>) : {};
  for (const rule of policy.rules) {
    if (!rule.matchesFunction(functionId)) continue;
    if (!rule.constraints.every((c) => Object.hasOwn(fields, c.field) && c.test(fields[c.field]))) continue;
    if (rule.action === "allow") return { decision: "allow", rule_id: rule.rule_id };
    const first = rule.constraints[0];
    return first
      ? {
          decision: "deny",
          rule_id: rule.rule_id,
          rule_action: "deny",
          matched_constraint: { field: first.field, operator: first.operator, value: first.value },
        }
      : { decision: "deny", rule_id: rule.rule_id, rule_action: "deny" };
  }
  return { decision: "needs_approval" };
}
