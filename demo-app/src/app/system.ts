// Which functions are the system's own (the engine's built-ins and the harness's workers) rather
// than the user's, so every screen can put the user's first and fold the rest away.
//
// The rule, from what the engine already says about each function (no list of names to keep up):
// - marked kernel: registration metadata `model: "never"` (the engine's writing built-ins and
//   every function of a harness worker carry it where they are registered), or `internal: true`;
// - or served by a "system worker": a worker name most of whose functions are marked kernel. That
//   takes in what the kernel lets a model call — the engine's reads (`state::get` shares the
//   worker name `state` with `state::set`), the harness's `harness::spawn`, `models::list` — while a
//   user worker that closes one of its functions to models stays the user's.
import type { FunctionEntry } from "./engine.ts";

/** protocol's MODEL_METADATA_KEY / MODEL_NEVER, spelled here so the page does not bundle the
 * protocol's schemas for two strings. */
const KERNEL_MARK = { key: "model", value: "never" } as const;

export const isKernel = (f: FunctionEntry): boolean => f.metadata?.[KERNEL_MARK.key] === KERNEL_MARK.value || f.metadata?.internal === true;

/** Worker names whose functions are mostly kernel-marked. */
export function systemWorkers(all: readonly FunctionEntry[]): Set<string> {
  const counts = new Map<string, { kernel: number; total: number }>();
  for (const f of all) {
    const c = counts.get(f.worker_name) ?? { kernel: 0, total: 0 };
    c.total++;
    if (isKernel(f)) c.kernel++;
    counts.set(f.worker_name, c);
  }
  return new Set([...counts].filter(([, c]) => c.kernel * 2 > c.total).map(([name]) => name));
}

/** The functions split into the user's and the system's, each in id order. */
export function splitFunctions(all: readonly FunctionEntry[]): { user: FunctionEntry[]; system: FunctionEntry[] } {
  const workers = systemWorkers(all);
  const user: FunctionEntry[] = [];
  const system: FunctionEntry[] = [];
  for (const f of all) (isKernel(f) || workers.has(f.worker_name) ? system : user).push(f);
  return { user, system };
}
