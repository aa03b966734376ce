// The DenialEnvelope a model reads when one of its calls is not run (docs/harness-contracts.md §3.3),
// and the redaction of its `args_excerpt`. The approval gate owns the format (the constants and the
// DenialEnvelope type in `@iii-edge/protocol/harness`); the orchestrator is the one that builds
// envelopes, for the policy's denials, a person's, and a gate it could not consult.
import {
  type DenialEnvelope,
  type DeniedCall,
  type MatchedConstraint,
  REDACTED,
  REDACTION_CYCLE_MARKER,
  REDACTION_MAX_DEPTH,
  REDACTION_MAX_DEPTH_MARKER,
  REDACTION_MAX_NODES,
  REDACTION_MAX_STRING_CODE_POINTS,
  REDACTION_TRUNCATED_MARKER,
  SECRET_KEYS,
  USER_DENIAL_DEFAULT_REASON,
} from "@iii-edge/protocol/harness";

/** Whether a key names a secret: one of SECRET_KEYS or ending in `_<one of them>`, compared in lower
 * case, with `-` read as `_` and camelCase split (`apiKey`, `X-Api-Key`, `githubToken` count). */
export function isSecretKey(key: string): boolean {
  const forms = new Set([
    key.toLowerCase().replaceAll("-", "_"),
    key
      .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
      .toLowerCase()
      .replaceAll("-", "_"),
  ]);
  for (const form of forms) for (const secret of SECRET_KEYS) if (form === secret || form.endsWith(`_${secret}`)) return true;
  return false;
}

/** `s` clipped to REDACTION_MAX_STRING_CODE_POINTS code points plus "…" (never splits a surrogate pair). */
export function clipString(s: string, max = REDACTION_MAX_STRING_CODE_POINTS): string {
  if (s.length <= max) return s; // fewer UTF-16 units than the limit: fewer code points too
  let n = 0;
  let end = 0;
  for (const ch of s) {
    if (n === max) return `${s.slice(0, end)}…`;
    n++;
    end += ch.length;
  }
  return s;
}

/** A redacted copy of `value` for an `args_excerpt` (§3.3): secret-looking keys → REDACTED, strings
 * clipped, nesting capped at REDACTION_MAX_DEPTH, cycles and oversized graphs cut. Never mutates or
 * throws on its input; the copy is plain JSON-shaped data. */
export function redactArgs(value: unknown): unknown {
  const ancestors = new Set<object>();
  let visited = 0;
  const copy = (v: unknown, depth: number): unknown => {
    if (typeof v === "string") return clipString(v);
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "function" || typeof v === "symbol") return undefined;
    if (v === null || typeof v !== "object") return v;
    if (depth >= REDACTION_MAX_DEPTH) return REDACTION_MAX_DEPTH_MARKER;
    if (ancestors.has(v)) return REDACTION_CYCLE_MARKER;
    if (++visited > REDACTION_MAX_NODES) return REDACTION_TRUNCATED_MARKER;
    ancestors.add(v);
    try {
      if (Array.isArray(v)) return v.map((item) => copy(item, depth + 1));
      // fromEntries defines own properties, so a `__proto__` key stays a key.
      return Object.fromEntries(Object.keys(v).map((k) => [k, isSecretKey(k) ? REDACTED : copy(readProperty(v, k), depth + 1)]));
    } finally {
      ancestors.delete(v);
    }
  };
  return copy(value, 0);
}

/** A property read that a throwing getter cannot break. */
function readProperty(o: object, k: string): unknown {
  try {
    return (o as Record<string, unknown>)[k];
  } catch {
    return REDACTED;
  }
}

/** A short JSON rendering of a constraint value for a reason text. */
function describeValue(v: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(redactArgs(v)) ?? String(v);
  } catch {
    text = String(v);
  }
  return clipString(text, 120);
}

/** The policy denied the call (`policy::check_permissions` answered `deny`). */
export function permissionsDenyEnvelope(call: DeniedCall, ruleId: string, matchedConstraint?: MatchedConstraint): DenialEnvelope {
  const constraint = matchedConstraint
    ? ` because argument \`${matchedConstraint.field}\` ${matchedConstraint.operator} ${describeValue(matchedConstraint.value)}`
    : "";
  const envelope: DenialEnvelope = {
    schema_version: 1,
    status: "denied",
    denied_by: "permissions",
    function_id: call.function_id,
    rule_id: ruleId,
    rule_action: "deny",
    args_excerpt: redactArgs(call.arguments),
    reason:
      `Permission denied: the call to \`${call.function_id}\` was blocked by policy rule \`${ruleId}\`${constraint}. ` +
      `It was not run. ${matchedConstraint ? "Try different arguments, or" : "Try"} another function that does what you need; do not retry the same call.`,
  };
  if (matchedConstraint)
    envelope.matched_constraint = {
      field: matchedConstraint.field,
      operator: matchedConstraint.operator,
      value: redactArgs(matchedConstraint.value),
    };
  return envelope;
}

/** A person denied the call (an `approval::resolve` decision `deny`); `reason` is their text. */
export function userDenyEnvelope(call: DeniedCall, reason?: string | null): DenialEnvelope {
  const text = typeof reason === "string" && reason.trim() !== "" ? reason.trim() : USER_DENIAL_DEFAULT_REASON;
  return {
    schema_version: 1,
    status: "denied",
    denied_by: "user",
    function_id: call.function_id,
    args_excerpt: redactArgs(call.arguments),
    reason: clipString(text, 2_000),
  };
}

/** The gate could not decide (policy unreachable, timed out, a transport failure): fail closed.
 * `detail` says what failed, e.g. "policy unreachable: timeout" or "trigger_failed: …". */
export function gateUnavailableEnvelope(functionId: string, detail: string, args?: unknown): DenialEnvelope {
  const envelope: DenialEnvelope = {
    schema_version: 1,
    status: "denied",
    denied_by: "gate_unavailable",
    function_id: functionId,
    reason:
      `The call to \`${functionId}\` was not run: the permission gate could not be consulted (${clipString(detail, 500)}). ` +
      "Nothing was executed. Continue without it, or try again later.",
  };
  if (args !== undefined) envelope.args_excerpt = redactArgs(args);
  return envelope;
}
