// Packages meet at their public entries: no file anywhere in the repo reaches into another
// workspace package by a relative path, and the deployable's bundler aliases (wrangler.toml)
// cover exactly the entries the packages export.
import { readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import { repoRoot, workspaceDirs, workspaceExports } from "../../scripts/workspace-exports.mjs";

const SKIP = new Set(["node_modules", ".git", ".wrangler", "dist", "out", "test-results", "sdk"]);
const SOURCE = /\.(ts|mts|mjs|js|tsx)$/;
/** Relative module specifiers in import/export statements and dynamic imports. */
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["'](\.{1,2}\/[^"']+)["']/g;

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name) || name.startsWith(".")) continue;
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) sourceFiles(p, out);
    else if (SOURCE.test(name)) out.push(p);
  }
  return out;
}

const packages = workspaceDirs().map((d) => path.join(repoRoot, d));
const packageOf = (file: string) =>
  packages.filter((p) => file === p || file.startsWith(p + path.sep)).sort((a, b) => b.length - a.length)[0];

it("no relative import crosses into another package", () => {
  const offenders: string[] = [];
  for (const file of sourceFiles(repoRoot)) {
    const mine = packageOf(file);
    for (const m of readFileSync(file, "utf8").matchAll(IMPORT)) {
      const target = path.resolve(path.dirname(file), m[1]!);
      const theirs = packageOf(target);
      if (theirs && theirs !== mine)
        offenders.push(
          `${path.relative(repoRoot, file)} imports ${m[1]} (use ${JSON.parse(readFileSync(path.join(theirs, "package.json"), "utf8")).name})`,
        );
    }
  }
  expect(offenders).toEqual([]);
});

it("wrangler.toml aliases every exported entry to its source", () => {
  const toml = readFileSync(path.join(repoRoot, "wrangler.toml"), "utf8");
  const block = toml.slice(toml.indexOf("[alias]"));
  const aliased = new Map([...block.matchAll(/^"([^"]+)"\s*=\s*"([^"]+)"/gm)].map((m) => [m[1]!, path.join(repoRoot, m[2]!)]));
  const exported = new Map(
    workspaceExports()
      .filter((e) => !e.specifier.endsWith("*"))
      .map((e) => [e.specifier, e.source]),
  );
  expect(Object.fromEntries(aliased)).toEqual(Object.fromEntries(exported));
});
