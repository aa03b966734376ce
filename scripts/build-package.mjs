#!/usr/bin/env node
// `npm run build` in protocol/ and sdk-edge/ (`npm run build:package` in sdk-browser/), and their
// `prepack`: the package's dist/ for installs outside the repository — ESM JavaScript and .d.ts
// from `tsc -p tsconfig.build.json` (rewriteRelativeImportExtensions turns the sources' `./x.ts`
// specifiers into `./x.js`; the .d.ts files get the same rewrite here, since tsc keeps `.ts` there).
//
// The other @iii-edge packages a package depends on resolve to *their* dist/ (tsconfig.build.json
// drops the iii-edge-source condition), so they are built first when missing or older than their
// sources. Usage: `node scripts/build-package.mjs [package-dir]` (default: the current directory).
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { repoRoot, workspaceDirs } from "./workspace-exports.mjs";

const tsc = path.join(repoRoot, "node_modules", ".bin", "tsc");

/** Every file under `dir`, recursively. */
function files(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)],
  );
}

const readPkg = (dir) => JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));

/** Workspace package name → folder. */
const workspaces = new Map(workspaceDirs().map((d) => [readPkg(path.join(repoRoot, d)).name, path.join(repoRoot, d)]));

/** dist/ is missing, or some input is newer than its oldest file. */
function stale(dir) {
  const out = files(path.join(dir, "dist"));
  if (out.length === 0) return true;
  const built = Math.min(...out.map((f) => statSync(f).mtimeMs));
  const inputs = [
    ...files(path.join(dir, "src")),
    ...["package.json", "tsconfig.json", "tsconfig.build.json"].map((f) => path.join(dir, f)),
    path.join(repoRoot, "tsconfig.base.json"),
  ];
  return inputs.some((f) => statSync(f).mtimeMs > built);
}

/** `./x.ts` → `./x.js` in relative specifiers (`from "…"`, `import("…")`) of emitted .d.ts files. */
const rewriteDts = (text) => text.replace(/((?:from\s+|import\s*\(\s*)["'])(\.{1,2}\/[^"']*?)\.ts(["'])/g, "$1$2.js$3");

function build(dir, seen = new Set()) {
  seen.add(dir);
  const pkg = readPkg(dir);
  for (const dep of Object.keys(pkg.dependencies ?? {})) {
    const depDir = workspaces.get(dep);
    if (depDir && !seen.has(depDir) && stale(depDir)) build(depDir, seen);
  }
  // Emit next to dist/ and swap it in, so a reader never sees a half-written dist/.
  const tmp = path.join(dir, `dist.tmp-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  try {
    execFileSync(tsc, ["-p", path.join(dir, "tsconfig.build.json"), "--outDir", tmp], { cwd: dir, stdio: "inherit" });
    const emitted = files(tmp);
    for (const f of emitted.filter((f) => f.endsWith(".d.ts"))) writeFileSync(f, rewriteDts(readFileSync(f, "utf8")));
    const leftover = emitted.filter((f) => /(from\s+|import\s*\(\s*)["']\.{1,2}\/[^"']*\.ts["']/.test(readFileSync(f, "utf8")));
    if (leftover.length) throw new Error(`${pkg.name}: .ts specifiers left in ${leftover.map((f) => path.relative(tmp, f)).join(", ")}`);
    rmSync(path.join(dir, "dist"), { recursive: true, force: true });
    renameSync(tmp, path.join(dir, "dist"));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  // stderr: stdout belongs to `npm pack --json` when this runs as prepack.
  console.error(`${pkg.name}: dist/ built (${files(path.join(dir, "dist")).length} files)`);
}

build(path.resolve(process.argv[2] ?? process.cwd()));
