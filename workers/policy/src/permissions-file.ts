// `iii-permissions.yaml` text → a compiled policy, and the sources a worker reads its policy from.
// Runs in workerd and Node alike.
import { readYaml } from "./yaml-reader.ts";
import { compilePolicy, PermissionsError, type CompiledPolicy } from "./rules.ts";
import { DEFAULT_PERMISSIONS_YAML } from "./default-permissions.ts";

/** Largest permissions file read: a hand-written policy is a few KiB; this keeps a mistaken path
 * (a log, a binary) from being parsed on every reload. */
export const MAX_PERMISSIONS_BYTES = 1024 * 1024;

const versions = new WeakMap<CompiledPolicy, string>();

/** 64-bit FNV-1a of the text, hex: a name for one text of the rules, so a person's decision can be
 * tied to the rules it was asked under (the file is the operator's, so collisions need no defence). */
export function textVersion(text: string): string {
  let h = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(text)) h = BigInt.asUintN(64, (h ^ BigInt(byte)) * 0x100000001b3n);
  return h.toString(16).padStart(16, "0");
}

/** The version of a compiled policy: that of the text it was parsed from. */
export function policyVersion(policy: CompiledPolicy): string {
  return versions.get(policy) ?? "unversioned";
}

/** Parse and validate a permissions file. Throws PermissionsError with a one-line message. */
export function parsePermissions(text: string): CompiledPolicy {
  if (new TextEncoder().encode(text).byteLength > MAX_PERMISSIONS_BYTES)
    throw new PermissionsError(`the file is larger than ${MAX_PERMISSIONS_BYTES} bytes`);
  const value = readYaml(text);
  const policy = compilePolicy(value);
  versions.set(policy, textVersion(text));
  return policy;
}

export function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, " ").trim();
}

/** What a check reads: the rules in force, or why there are none (every check then fails closed). */
export type PolicyState = { ok: true; policy: CompiledPolicy; origin: string } | { ok: false; error: string; origin: string };

export interface PolicySource {
  current(): PolicyState;
}

export type Log = (line: string) => void;

/** A fixed policy from text (`III_PERMISSIONS`, or the built-in default). A text that does not
 * parse leaves the policy unavailable: it never falls back to something more permissive. */
export function staticPolicy(text: string, origin: string, log: Log = console.warn): PolicySource {
  let state: PolicyState;
  try {
    const policy = parsePermissions(text);
    for (const w of policy.warnings) log(`policy: ${origin}: ${w}`);
    state = { ok: true, policy, origin };
  } catch (e) {
    state = { ok: false, error: `${origin}: ${(e as Error).message}`, origin };
    log(`policy: ${state.error} — every check fails until it is fixed`);
  }
  return { current: () => state };
}

let defaultPolicyCache: CompiledPolicy | undefined;
/** The built-in rules (the shipped `iii-permissions.yaml`), compiled once. */
export function defaultPolicy(): CompiledPolicy {
  return (defaultPolicyCache ??= parsePermissions(DEFAULT_PERMISSIONS_YAML));
}
