// Where the host keeps per-VM state, and how a restarted host recognises what a dead one left.
//
// Each machine gets <stateDir>/<kind>/<id>/ holding an `owner` stamp (host pid + its start time,
// so a recycled pid is not mistaken for the owner) and, for QEMU, `qemu.pid`. On start-up a
// backend walks its directory: a machine whose owner is dead is killed if /proc/<pid>/cmdline
// still names that directory (a recycled pid is never killed), and the directory is removed.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

export function defaultStateDir(): string {
  const base = process.env.XDG_RUNTIME_DIR && fs.existsSync(process.env.XDG_RUNTIME_DIR) ? process.env.XDG_RUNTIME_DIR : os.tmpdir();
  return path.join(base, "iii-sandbox-host");
}

/** Start time of a process in clock ticks since boot (field 22 of /proc/<pid>/stat), or undefined. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may contain spaces and parentheses: split after the last ")".
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

export function processCmdline(pid: number): string | undefined {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
  } catch {
    return undefined;
  }
}

export function ownerStamp(pid: number = process.pid): string {
  return `${pid} ${processStartTime(pid) ?? "?"}\n`;
}

/** True when the stamp names a process that is still running (same pid, same start time). */
export function ownerAlive(stamp: string): boolean {
  const [pid, start] = stamp.trim().split(" ");
  const n = Number(pid);
  if (!Number.isSafeInteger(n) || n <= 0) return false;
  const now = processStartTime(n);
  return now !== undefined && now === start;
}

/** Directories under `dir` whose owner process is gone. Missing or unreadable stamps count as gone. */
export function abandonedDirs(dir: string): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const name of names) {
    const d = path.join(dir, name);
    let stamp = "";
    try {
      stamp = fs.readFileSync(path.join(d, "owner"), "utf8");
    } catch {
      // A directory whose stamp was never written belongs to a boot that died at its first step,
      // unless it is brand new (a live host between mkdir and writing the stamp).
      try {
        if (Date.now() - fs.statSync(d).mtimeMs < 10_000) continue;
      } catch {
        continue;
      }
    }
    if (!ownerAlive(stamp)) out.push(d);
  }
  return out;
}
