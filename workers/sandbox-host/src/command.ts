// Turns an exec request into the /bin/sh script the guest runs. Every value from the caller is
// single-quoted, so nothing but `command` itself is ever interpreted by the shell.
import { SandboxError } from "./errors.ts";

/** POSIX single-quoting: 'it'\''s' — safe for any string without NUL. */
export function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function checkEnv(env: Record<string, string> | undefined, field: string): void {
  for (const [k, v] of Object.entries(env ?? {})) {
    if (!ENV_NAME.test(k)) throw new SandboxError("invalid_argument", `${field}: ${JSON.stringify(k)} is not a valid variable name`);
    if (v.includes("\0")) throw new SandboxError("invalid_argument", `${field}.${k}: contains a NUL byte`);
  }
}

export interface ScriptParts {
  /** A shell command line, run by /bin/sh. */
  command: string;
  /** Appended to `command` as separately quoted words. */
  args?: string[];
  cwd?: string;
  /** Applied in order: later maps win. */
  env?: (Record<string, string> | undefined)[];
}

export function buildScript(p: ScriptParts): string {
  const lines: string[] = [];
  for (const env of p.env ?? []) {
    for (const [k, v] of Object.entries(env ?? {})) lines.push(`export ${k}=${shellQuote(v)}`);
  }
  if (p.cwd !== undefined) lines.push(`cd ${shellQuote(p.cwd.startsWith("-") ? `./${p.cwd}` : p.cwd)} || exit 1`);
  const words = [p.command, ...(p.args ?? []).map(shellQuote)];
  lines.push(words.join(" "));
  const script = `${lines.join("\n")}\n`;
  if (script.includes("\0")) throw new SandboxError("invalid_argument", "command, args, cwd and env must not contain NUL bytes");
  return script;
}
