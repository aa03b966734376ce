// A tool call's arguments checked against the tool's `inputSchema` (the function's `request_format`)
// before the function is called. A worker that validates its own input (the SDKs' zod `input`)
// would refuse bad arguments anyway; one that only publishes a JSON Schema (iii-sdk's
// `request_format`) would run on whatever arrives, so the check is the server's.
//
// @cfworker/json-schema interprets the schema (workerd forbids the code generation Ajv relies on).
// A schema comes from whoever registered the function, so it is treated as hostile: it is at most
// MAX_SCHEMA_BYTES (the protocol's bound on request_format), a broken one (an unresolved `$ref`, an
// invalid `pattern`, a `$ref` cycle that never reaches the arguments) is reported and not obeyed,
// and one check may visit at most MAX_CHECK_STEPS subschemas, so `$ref`s that fan out cannot make
// a call cost exponential time. Compiled validators are cached per isolate, keyed by the schema.
import { Validator, dereference, type OutputUnit, type Schema, type SchemaDraft } from "@cfworker/json-schema";

/** Subschemas one check may visit. A tool's arguments are a few values, a few visits each; this
 * passes ten thousand objects of a few fields, and stops a schema whose `$ref`s fan out within a
 * few hundred milliseconds (a failing branch's errors are copied up each level, so a visit there
 * costs more than a passing one, and more than this would overflow the stack copying them). */
export const MAX_CHECK_STEPS = 50_000;
/** Compiled validators kept per isolate, least recently used first out: every tool of a full
 * listing (catalog.ts MAX_TOOLS is 512) need not fit, the ones being called do. */
const MAX_CACHED_VALIDATORS = 256;
/** Schema text the cache may hold (each entry keeps its schema, parsed, besides): a cache full of
 * MAX_SCHEMA_BYTES schemas is cut to this, so the cache stays small beside a 128 MB isolate. */
const MAX_CACHED_SCHEMA_CHARS = 4 * 1024 * 1024;
/** Problems named in one refusal: enough for a model to fix its call, short enough to read. */
const MAX_PROBLEMS = 8;

/** The outcome of one check; `message` (when refused) is the tool error's text, code first. */
export type ArgumentCheck = { ok: true } | { ok: false; message: string };

/** Said (and thrown) when a check runs out of steps. */
class StepsExhausted extends Error {}

/** The one budget of the check running now: checks are synchronous, so one counter serves all. */
let stepsLeft = 0;

/** A schema ready to check with, or why it cannot be used (found compiling it). */
type Compiled = { validator: Validator } | { broken: string };

/** Keyed by the schema's JSON text as the catalog gave it: a changed schema is a new entry. */
const cache = new Map<string, Compiled>();
let cachedChars = 0;

/** The JSON Schema draft a schema declares; MCP reads a schema without `$schema` as 2020-12. */
function draftOf(schema: Schema): SchemaDraft {
  const declared = typeof schema.$schema === "string" ? schema.$schema : "";
  if (declared.includes("draft-04")) return "4";
  if (declared.includes("draft-06") || declared.includes("draft-07")) return "7";
  if (declared.includes("2019-09")) return "2019-09";
  return "2020-12";
}

/** A keyword the validator reads from a subschema exactly once each time it enters it (it takes all
 * keywords at once) and that dereferencing never defines: a getter there counts visits. */
const VISIT_KEY = "$recursiveAnchor";
/** What subschemas that declare VISIT_KEY themselves declared (their own value moves here). */
const declaredAnchors = new WeakMap<object, unknown>();
/** The prototype every subschema is given: reading VISIT_KEY through it is one step of the running
 * check. (A getter on each subschema itself would make the validator's reads several times slower.) */
const COUNTING = Object.create(Object.prototype, {
  [VISIT_KEY]: {
    enumerable: false,
    get(this: object) {
      if (--stepsLeft < 0) throw new StepsExhausted();
      return declaredAnchors.get(this);
    },
  },
}) as object;

/** Make every visit of the validator to a subschema of `schema` count against the check's budget. */
function countVisits(schema: Schema): void {
  // dereference lists every subschema (by its address), and only those: constants and defaults
  // inside the schema keep their prototype and their keys.
  for (const node of new Set(Object.values(dereference(schema)))) {
    if (typeof node !== "object" || node === null) continue;
    if (Object.hasOwn(node, VISIT_KEY)) {
      declaredAnchors.set(node, (node as Record<string, unknown>)[VISIT_KEY]);
      delete (node as Record<string, unknown>)[VISIT_KEY];
    }
    Object.setPrototypeOf(node, COUNTING);
  }
}

function compile(schemaText: string): Compiled {
  const schema = JSON.parse(schemaText) as Schema;
  try {
    // shortCircuit: a subschema stops at its first wrong field, so a call with thousands of wrong
    // values costs no more than one; the refusal names the first wrong field of each object.
    const validator = new Validator(schema, draftOf(schema), true);
    countVisits(schema);
    return { validator };
  } catch (e) {
    // Two subschemas claiming one `$id`, an `$id` that is no URI, nesting past the stack.
    return { broken: e instanceof RangeError ? "it nests too deeply" : e instanceof Error ? e.message : String(e) };
  }
}

function compiledFor(schemaText: string): Compiled {
  const hit = cache.get(schemaText);
  if (hit) {
    // Most recently used last: the first entry is the one to drop.
    cache.delete(schemaText);
    cache.set(schemaText, hit);
    return hit;
  }
  const made = compile(schemaText);
  cache.set(schemaText, made);
  cachedChars += schemaText.length;
  for (const [key] of cache) {
    if (cache.size <= MAX_CACHED_VALIDATORS && cachedChars <= MAX_CACHED_SCHEMA_CHARS) break;
    if (key === schemaText) break;
    cache.delete(key);
    cachedChars -= key.length;
  }
  return made;
}

/** The argument a JSON pointer (`#/items/0/name`) points at, as a model reads it (`items.0.name`). */
function fieldOf(instanceLocation: string): string {
  const path = instanceLocation.replace(/^#\/?/, "");
  if (path === "") return "arguments";
  return path
    .split("/")
    .map((s) => decodeURIComponent(s).replace(/~1/g, "/").replace(/~0/g, "~"))
    .join(".");
}

/** Errors that only say "something below failed": the errors below say what. */
const SUMMARY_KEYWORDS = new Set([
  "properties",
  "patternProperties",
  "additionalProperties",
  "unevaluatedProperties",
  "items",
  "prefixItems",
  "additionalItems",
  "unevaluatedItems",
  "$ref",
  "$recursiveRef",
  "allOf",
  "dependentSchemas",
  "propertyNames",
  "if",
  "then",
  "else",
]);

function describeProblems(errors: readonly OutputUnit[]): string {
  const specific = errors.filter((e) => !SUMMARY_KEYWORDS.has(e.keyword));
  const shown = (specific.length > 0 ? specific : errors).slice(0, MAX_PROBLEMS);
  const lines = [...new Set(shown.map((e) => `${fieldOf(e.instanceLocation)}: ${e.error}`))];
  const more = specific.length > MAX_PROBLEMS ? ` (and ${specific.length - MAX_PROBLEMS} more)` : "";
  return `${lines.join("; ")}${more}`;
}

/**
 * Check `args` against `schema`, a function's object `request_format`. The function is called only
 * when this answers ok: otherwise `message` says which fields are wrong (`invalid_input`), or why
 * the function's schema cannot check anything (`function_not_invokable`, `value_too_large`).
 */
export function checkArguments(functionId: string, schema: unknown, args: Record<string, unknown>): ArgumentCheck {
  const compiled = compiledFor(JSON.stringify(schema));
  if ("broken" in compiled) {
    return {
      ok: false,
      message: `function_not_invokable: the request_format of ${functionId} cannot check arguments, so it is not called: ${compiled.broken.split("\n")[0]}`,
    };
  }
  stepsLeft = MAX_CHECK_STEPS;
  let errors: readonly OutputUnit[];
  try {
    const result = compiled.validator.validate(args);
    if (result.valid) return { ok: true };
    errors = result.errors;
  } catch (e) {
    if (e instanceof StepsExhausted) {
      return {
        ok: false,
        message: `value_too_large: checking the arguments against the request_format of ${functionId} took more than ${MAX_CHECK_STEPS} steps; it is not called`,
      };
    }
    // A `$ref` cycle that never reaches the arguments overflows the stack; an invalid `pattern`
    // throws when first used. Either way the schema, not the caller, is at fault.
    const why =
      e instanceof RangeError
        ? "too deep: its $refs loop or fan out without end, or the arguments nest too deeply"
        : e instanceof Error
          ? e.message.split("\n")[0]
          : String(e);
    return {
      ok: false,
      message: `function_not_invokable: the request_format of ${functionId} cannot check these arguments, so it is not called: ${why}`,
    };
  }
  return { ok: false, message: `invalid_input: arguments for ${functionId} do not match its request_format: ${describeProblems(errors)}` };
}
