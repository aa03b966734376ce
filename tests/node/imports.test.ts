// Packages meet at their public entries: no file anywhere in the repo reaches into another
// workspace package by a relative path (the suites' shared support included: it is the package
// @iii-edge/test-support), test support stays out of the deployable, and the deployable's bundler
// aliases (wrangler.toml) cover exactly the entries the packages it bundles export.
import { readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot, workspaceDirs, workspaceExports } from "../../scripts/workspace-exports.mjs";

const SKIP = new Set(["node_modules", ".git", ".wrangler", "dist", "out", "test-results"]);
const SOURCE = /\.(ts|mts|mjs|js|tsx)$/;
/** Relative module specifiers in import/export statements and dynamic imports. */
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["'](\.{1,2}\/[^"']+)["']/g;
const TEST_SUPPORT = "@iii-edge/test-support";
/** The folders of a package whose code ships: a Worker's or a library's sources, the console's Worker side. */
const SHIPPED_DIRS = ["src", "edge"];

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
/** The innermost workspace package holding `file`; undefined for the repository's own files (tests/, scripts/, deploy/). */
const packageOf = (file: string) =>
  packages.filter((p) => file === p || file.startsWith(p + path.sep)).sort((a, b) => b.length - a.length)[0];
const packageName = (dir: string): string => JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")).name;

/** The relative imports in `code` (the text of `file`) that land in a package other than the file's own. */
function crossings(file: string, code: string): string[] {
  const mine = packageOf(file);
  const out: string[] = [];
  for (const m of code.matchAll(IMPORT)) {
    const theirs = packageOf(path.resolve(path.dirname(file), m[1]!));
    if (theirs && theirs !== mine) out.push(`${path.relative(repoRoot, file)} imports ${m[1]} (use ${packageName(theirs)})`);
  }
  return out;
}

describe("no relative import crosses into another package", () => {
  it("finds one where there is one (the check can fail)", () => {
    const suite = path.join(repoRoot, "tests", "unit", "x.test.ts");
    const worker = path.join(repoRoot, "workers", "policy", "test", "x.test.ts");
    // The samples' specifiers are spliced in, so this file's own text holds no such import.
    const up = "..";
    expect(crossings(suite, `import { until } from "${up}/support/wait.ts";`)).toEqual([
      `tests/unit/x.test.ts imports ../support/wait.ts (use ${TEST_SUPPORT})`,
    ]);
    expect(crossings(worker, `const m = await import("${up}/../harness/src/index.ts");`)).toHaveLength(1);
    expect(
      crossings(worker, `import { rules } from "${up}/src/rules.ts";\nimport { d1 } from "${up}/../../scripts/d1-migrations.mjs";`),
    ).toEqual([]);
  });

  it("every file in the repository", () => {
    const files = sourceFiles(repoRoot);
    expect(files.length).toBeGreaterThan(300);
    expect(files.flatMap((file) => crossings(file, readFileSync(file, "utf8")))).toEqual([]);
  });
});

it("no shipped source imports the test support", () => {
  const shipped = [
    path.join(repoRoot, "deploy"),
    ...packages.filter((p) => packageName(p) !== TEST_SUPPORT).flatMap((p) => SHIPPED_DIRS.map((d) => path.join(p, d))),
  ].filter((dir) => statSync(dir, { throwIfNoEntry: false })?.isDirectory());
  const offenders = shipped.flatMap((dir) => sourceFiles(dir)).filter((file) => readFileSync(file, "utf8").includes(TEST_SUPPORT));
  expect(offenders.map((f) => path.relative(repoRoot, f))).toEqual([]);
});

it("wrangler.toml aliases every exported entry of the deployable's packages to its source", () => {
  const toml = readFileSync(path.join(repoRoot, "wrangler.toml"), "utf8");
  const block = toml.slice(toml.indexOf("[alias]"));
  const aliased = new Map([...block.matchAll(/^"([^"]+)"\s*=\s*"([^"]+)"/gm)].map((m) => [m[1]!, path.join(repoRoot, m[2]!)]));
  const exported = new Map(
    workspaceExports()
      .filter((e) => !e.specifier.endsWith("*") && e.name !== TEST_SUPPORT)
      .map((e) => [e.specifier, e.source]),
  );
  expect(Object.fromEntries(aliased)).toEqual(Object.fromEntries(exported));
});
