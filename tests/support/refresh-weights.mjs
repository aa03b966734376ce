#!/usr/bin/env node
// Rewrites tests/support/file-weights.json from the output of a whole `npm test` run (a clean CI
// log will do): vitest prints one line per file, ` ✓  <project>  <file> (<n> tests) <ms>ms`, with the
// file relative to the project's root. The weights are what tests/support/longest-first.ts starts
// the heaviest files by, so refresh them after a change that moves time between files.
//
//   node tests/support/refresh-weights.mjs <log file>
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { stripVTControlCharacters } from "node:util";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const out = path.join(root, "tests/support/file-weights.json");
/** Files shorter than this start by size anyway: listing them would only add noise. */
const MIN_SECONDS = 2;

const log = process.argv[2];
if (!log) {
  console.error("usage: node tests/support/refresh-weights.mjs <log of a whole npm test run>");
  process.exit(2);
}
// The directories a project's file names are relative to, by where its vitest config sits.
const roots = (project) => [`tests/${project}`, "tests", "workers", "workers/sandbox-host", "demo-app", "tests/sdk"];

const seconds = {};
const text = stripVTControlCharacters(readFileSync(log, "utf8"));
for (const line of text.split("\n")) {
  const m = /^ [✓❯×] {2}(\S+) {2}(\S+) \(\d+ tests?[^)]*\) (\d+)ms/.exec(line);
  if (!m) continue;
  const [, project, file, ms] = m;
  const rel = roots(project)
    .map((dir) => path.posix.join(dir, file))
    .find((p) => existsSync(path.join(root, p)));
  const s = Math.round(Number(ms) / 1000);
  if (rel && s >= MIN_SECONDS) seconds[`${project}:${rel}`] = s;
}
if (Object.keys(seconds).length === 0) {
  console.error(`no per-file lines in ${log}: give it the output of a whole run`);
  process.exit(1);
}
const previous = JSON.parse(readFileSync(out, "utf8"));
const sorted = Object.fromEntries(Object.entries(seconds).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])));
// The microVM list is kept as it is: a run's log does not say which files boot VMs.
writeFileSync(out, `${JSON.stringify({ about: previous.about, microvm: previous.microvm ?? [], seconds: sorted }, null, 2)}\n`);
console.log(`${Object.keys(sorted).length} files weighed, ${Object.values(sorted).reduce((a, b) => a + b, 0)} s in all`);
