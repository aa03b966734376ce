// The order `npm test` starts its files in: the longest first, so the run does not end with one
// long file still going on one core while the other core has nothing left to do.
//
// vitest's own order groups the files by project name and, on a clean clone (no results cache),
// takes each project's files by size; the `workers` project's long files then start among the
// last. Here every file is weighed by how long it took: the duration vitest cached from this
// machine's last run when there is one, else its line in tests/support/file-weights.json (seconds in a
// whole run, three files at a time). Files with neither come after the weighed ones, by size.
import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

const WEIGHTS = path.join(path.dirname(new URL(import.meta.url).pathname), "file-weights.json");

function listedWeights(): Record<string, number> {
  const json = JSON.parse(readFileSync(WEIGHTS, "utf8")) as { seconds: Record<string, number> };
  return json.seconds;
}

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const listed = listedWeights();
    const root = this.ctx.config.root;
    const weigh = (spec: TestSpecification): { seconds?: number; size: number } => {
      const file = path.relative(root, spec.moduleId).split(path.sep).join("/");
      const cached = this.ctx.cache.getFileTestResults(`${spec.project.name}:${path.relative(root, spec.moduleId)}`);
      const seconds = cached && !cached.failed ? cached.duration / 1000 : listed[`${spec.project.name}:${file}`];
      let size = 0;
      try {
        size = statSync(spec.moduleId).size;
      } catch {
        // a virtual module: no size
      }
      return { seconds, size };
    };
    const weights = new Map(files.map((f) => [f, weigh(f)]));
    return [...files].sort((a, b) => {
      // Projects that ask for an order of their own keep it.
      const group = a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder;
      if (group !== 0) return group;
      const wa = weights.get(a)!;
      const wb = weights.get(b)!;
      if (wa.seconds !== undefined && wb.seconds !== undefined) return wb.seconds - wa.seconds;
      if (wa.seconds !== undefined) return -1;
      if (wb.seconds !== undefined) return 1;
      return wb.size - wa.size;
    });
  }
}
