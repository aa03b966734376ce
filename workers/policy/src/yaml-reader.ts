// The permissions file as YAML, read with the `yaml` library. Strict on purpose: duplicate keys,
// several documents and every *warning* are refused with their line — in YAML an unquoted
// `- !state::set` is a tag (only a warning there), and accepting it would silently drop a deny rule.
import { parseDocument } from "yaml";
import { PermissionsError } from "./rules.ts";

/** Aliases a permissions file may expand: it needs none; a few keep hand-written files working
 * while bounding the "billion laughs" expansion. */
const MAX_ALIAS_COUNT = 50;

/** What to tell the author for the library's codes that have an obvious fix. */
const HINTS: Record<string, string> = {
  TAG_RESOLVE_FAILED: "a leading '!' is a YAML tag: quote it ('!x') to write a deny rule",
};

/** Parse one YAML document into plain JSON-shaped values. Throws PermissionsError with the line. */
export function readYaml(source: string): unknown {
  const doc = parseDocument(source, { uniqueKeys: true, prettyErrors: true });
  const problem = doc.errors[0] ?? doc.warnings[0];
  if (problem) {
    const line = problem.linePos?.[0]?.line;
    const text = HINTS[problem.code] ?? problem.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "");
    throw new PermissionsError(line ? `line ${line}: ${text}` : text);
  }
  try {
    return doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (e) {
    // Unresolved or over-expanded aliases surface only here.
    throw new PermissionsError(e instanceof Error ? e.message : String(e));
  }
}
