// The order `npm test` starts its files in: the longest first, so the run does not end with one
// long file still going on one core while the other core has nothing left to do.
//
// vitest's own order groups the files by project name and, on a clean clone (no results cache),
// takes each project's files by size; the `workers` project's long files then start among the
// last. Here every file is weighed by how long it took: the duration vitest cached from this
// machine's last run when there is one, else its line in tests/support/file-weights.json (seconds in a
// whole run, three files at a time). Files with neither come after the weighed ones, by size.
//
// Files that boot microVMs (the `microvm` list in file-weights.json) are kept apart: their guests
// run on QEMU's software CPU, and two such files side by side beside the heaviest engine files
// starved guests past their deadlines. The order plays the run forward on the weights (each worker
// takes the next file when its last one ends) and starts a microVM file only where the previous one
// has ended by then, and never sooner than MICROVM_GAP_FILES other files after it, so that wrong
// weights still leave other files between them.
import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

const WEIGHTS = path.join(path.dirname(new URL(import.meta.url).pathname), "file-weights.json");

/** Other files that start after a microVM file before the next one may, whatever the weights say. */
export const MICROVM_GAP_FILES = 2;
/** What the order assumes a file with no weight lasts (unweighed files took under 2 s). */
const UNWEIGHED_SECONDS = 1;

interface Weights {
  seconds: Record<string, number>;
  microvm: string[];
}

function listedWeights(): Weights {
  const json = JSON.parse(readFileSync(WEIGHTS, "utf8")) as Partial<Weights>;
  return { seconds: json.seconds ?? {}, microvm: json.microvm ?? [] };
}

/** One file as the order sees it. */
export interface WeighedFile<T> {
  file: T;
  /** The project's `sequence.groupOrder`: lower groups run first, and files never cross groups. */
  group: number;
  /** Seconds it took last time, when known. */
  seconds?: number;
  size: number;
  /** It boots microVMs. */
  microvm: boolean;
}

function heaviestFirst<T>(a: WeighedFile<T>, b: WeighedFile<T>): number {
  if (a.group !== b.group) return a.group - b.group;
  if (a.seconds !== undefined && b.seconds !== undefined) return b.seconds - a.seconds;
  if (a.seconds !== undefined) return -1;
  if (b.seconds !== undefined) return 1;
  return b.size - a.size;
}

/**
 * The heaviest files first, with microVM files moved later where they would run beside another:
 * `workers` files run at once, each lasting its weight. When only microVM files are left they run
 * anyway, one after another.
 */
export function orderFiles<T>(files: readonly WeighedFile<T>[], workers = 3): T[] {
  const rest = [...files].sort(heaviestFirst);
  const out: T[] = [];
  const free = Array.from({ length: Math.max(1, workers) }, () => 0);
  let microvmEnds = Number.NEGATIVE_INFINITY;
  let sinceMicrovm = Number.POSITIVE_INFINITY;
  while (rest.length > 0) {
    const worker = free.indexOf(Math.min(...free));
    const startsAt = free[worker];
    let i = 0;
    if (rest[0].microvm && (sinceMicrovm < MICROVM_GAP_FILES || startsAt < microvmEnds)) {
      // Files never move ahead of a lower group: look for another file of this one only.
      const other = rest.findIndex((f) => !f.microvm && f.group === rest[0].group);
      if (other >= 0) i = other;
    }
    const [next] = rest.splice(i, 1);
    out.push(next.file);
    free[worker] = startsAt + (next.seconds ?? UNWEIGHED_SECONDS);
    if (next.microvm) {
      microvmEnds = Math.max(microvmEnds, free[worker]);
      sinceMicrovm = 0;
    } else {
      sinceMicrovm++;
    }
  }
  return out;
}

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const listed = listedWeights();
    const microvm = new Set(listed.microvm);
    const root = this.ctx.config.root;
    const weigh = (spec: TestSpecification): WeighedFile<TestSpecification> => {
      const file = path.relative(root, spec.moduleId).split(path.sep).join("/");
      const key = `${spec.project.name}:${file}`;
      const cached = this.ctx.cache.getFileTestResults(`${spec.project.name}:${path.relative(root, spec.moduleId)}`);
      const seconds = cached && !cached.failed ? cached.duration / 1000 : listed.seconds[key];
      let size = 0;
      try {
        size = statSync(spec.moduleId).size;
      } catch {
        // a virtual module: no size
      }
      return { file: spec, group: spec.project.config.sequence.groupOrder, seconds, size, microvm: microvm.has(key) };
    };
    return orderFiles(files.map(weigh), this.ctx.config.maxWorkers);
  }
}
