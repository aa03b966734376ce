#!/usr/bin/env node
// `npm run typecheck`: every TypeScript project in the repository (each folder with a
// tsconfig.json), one `tsc -p` each, so a new package or suite is checked without editing a list.
import { execFileSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const skip = new Set(["node_modules", ".git", ".wrangler", "dist", "test-results"]);
const projects = [];
(function walk(dir, depth) {
  if (depth > 3) return;
  for (const name of readdirSync(dir)) {
    if (skip.has(name) || name.startsWith(".")) continue;
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) walk(p, depth + 1);
    else if (name === "tsconfig.json" && dir !== root) projects.push(path.relative(root, dir));
  }
})(root, 0);

const tsc = path.join(root, "node_modules", ".bin", "tsc");
let failed = 0;
for (const p of projects.sort()) {
  try {
    execFileSync(tsc, ["-p", p], { cwd: root, stdio: "inherit" });
  } catch {
    failed++;
    console.error(`typecheck failed: ${p}`);
  }
}
console.log(`typecheck: ${projects.length - failed}/${projects.length} projects clean`);
process.exit(failed ? 1 : 0);
