// What a local state dir's D1 was migrated to, so `npm start` (scripts/start.mjs) launches wrangler
// to apply migrations only when there is something new to apply: `wrangler d1 migrations apply
// --local` costs a wrangler start (2–4 s of CPU) even when it then says "No migrations to apply".
//
// A stamp names the D1 database (its database_id in the wrangler config) and every migration file
// (name and content); the state dir keeps the stamp it was migrated to in MARKER. A state dir is up
// to date when its marker holds the current stamp and its local D1 files are still there.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

export const MARKER = ".iii-d1-migrated";
const D1_DIR = path.join("v3", "d1", "miniflare-D1DatabaseObject");

/** The stamp of the D1 database `DB` in the wrangler config at `configPath`, or undefined when the
 * config declares none the way the root's does (then wrangler is always asked). */
export function migrationsStamp(configPath) {
  const text = readFileSync(configPath, "utf8");
  const section = /\[\[d1_databases\]\]([\s\S]*?)(?=\n\[|$)/.exec(text)?.[1] ?? "";
  const id = /^\s*database_id\s*=\s*"([^"]+)"/m.exec(section)?.[1];
  const dir = /^\s*migrations_dir\s*=\s*"([^"]+)"/m.exec(section)?.[1];
  if (!id || !dir) return undefined;
  const abs = path.resolve(path.dirname(configPath), dir);
  if (!existsSync(abs)) return undefined;
  const h = createHash("sha256").update(`${id}\n`);
  for (const f of readdirSync(abs)
    .filter((n) => n.endsWith(".sql"))
    .sort())
    h.update(`${f}\n`).update(readFileSync(path.join(abs, f)));
  return h.digest("hex");
}

/** Is `stateDir`'s local D1 migrated to `stamp` (and still on disk)? */
export function isMigrated(stateDir, stamp) {
  if (!stamp) return false;
  try {
    if (readFileSync(path.join(stateDir, MARKER), "utf8").trim() !== stamp) return false;
    return readdirSync(path.join(stateDir, D1_DIR)).some((f) => f.endsWith(".sqlite") && f !== "metadata.sqlite");
  } catch {
    return false;
  }
}

export function markMigrated(stateDir, stamp) {
  if (stamp) writeFileSync(path.join(stateDir, MARKER), `${stamp}\n`);
}
