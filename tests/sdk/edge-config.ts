// A wrangler config for a test-only engine Worker, derived from the root wrangler.toml so it keeps
// every binding, var and alias in step: another `main`, and the Worker-hosted hosts the test names
// instead of the root's. Written to a temporary folder, so every relative path becomes absolute
// (wrangler resolves them from the config's folder).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { repoRoot } from "@iii-edge/test-support/engine-server";

export interface EdgeTestConfig {
  /** For `startEngine({ env: { III_WRANGLER_CONFIG: path } })` (scripts/start.mjs). */
  path: string;
  dispose(): void;
}

/** Keys whose value is a path relative to the config (besides the `[alias]` entries). */
const PATH_KEYS = new Set(["main", "directory", "migrations_dir"]);

export function edgeTestConfig(opts: { main: string; hosts: { binding: string; entrypoint: string }[] }): EdgeTestConfig {
  const source = readFileSync(path.join(repoRoot, "wrangler.toml"), "utf8");
  const abs = (p: string) => path.resolve(repoRoot, p);
  // Sections start at a `[header]` line; the root's [[services]] entries are replaced by ours.
  const sections: string[][] = [[]];
  for (const line of source.split("\n")) {
    if (/^\s*\[/.test(line)) sections.push([]);
    sections[sections.length - 1]!.push(line);
  }
  const kept = sections.filter((s) => s[0]?.trim() !== "[[services]]");
  const out: string[] = [];
  for (const section of kept) {
    const alias = section[0]?.trim() === "[alias]";
    for (const line of section) {
      const kv = /^(\s*)([A-Za-z_][\w-]*|"[^"]+")(\s*=\s*)"([^"]*)"(.*)$/.exec(line);
      if (!kv) {
        out.push(line);
        continue;
      }
      const [, indent, key, eq, value, rest] = kv;
      let v: string;
      if (key === "EDGE_HOSTS") v = opts.hosts.map((h) => h.binding).join(",");
      else if (key === "main") v = path.resolve(opts.main);
      else if (alias || PATH_KEYS.has(key!)) v = abs(value!);
      else v = value!;
      // Paths and host names hold no TOML escapes; every other line is kept as written.
      out.push(v === value ? line : `${indent}${key}${eq}${JSON.stringify(v)}${rest}`);
    }
  }
  const name = /^name\s*=\s*"([^"]+)"/m.exec(source)?.[1] ?? "iii-edge";
  for (const h of opts.hosts)
    out.push("", "[[services]]", `binding = "${h.binding}"`, `service = "${name}"`, `entrypoint = "${h.entrypoint}"`);
  const dir = mkdtempSync(path.join(tmpdir(), "iii-edge-config-"));
  const file = path.join(dir, "wrangler.toml");
  writeFileSync(file, `${out.join("\n")}\n`);
  return { path: file, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}
