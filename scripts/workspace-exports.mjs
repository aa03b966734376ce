// The workspace packages' public entries, read from their package.json `exports`: each specifier
// (`@iii-edge/sdk-edge/host`) with the source file the in-repo condition `iii-edge-source` points
// at. Tools that cannot be given that condition (Vite, esbuild's alias, the import check) use this.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const SOURCE_CONDITION = "iii-edge-source";

/** Workspace folders, from the root package.json. */
export function workspaceDirs() {
  return JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")).workspaces;
}

/** [{ name, dir, specifier, source }] for every exported subpath (wildcards as `prefix*`). */
export function workspaceExports() {
  const out = [];
  for (const dir of workspaceDirs()) {
    const pkg = JSON.parse(readFileSync(path.join(repoRoot, dir, "package.json"), "utf8"));
    for (const [sub, target] of Object.entries(pkg.exports ?? {})) {
      const source = typeof target === "string" ? target : (target[SOURCE_CONDITION] ?? target.default);
      if (typeof source !== "string") continue;
      out.push({
        name: pkg.name,
        dir,
        specifier: sub === "." ? pkg.name : `${pkg.name}/${sub.slice(2)}`,
        source: path.join(repoRoot, dir, source),
      });
    }
  }
  return out;
}

/** Vite `resolve.alias` entries resolving every workspace specifier to its source file. */
export function sourceAliases() {
  return workspaceExports().map(({ specifier, source }) => {
    const esc = specifier.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
    if (specifier.endsWith("*")) {
      return { find: new RegExp(`^${esc.slice(0, -2)}(.+)$`), replacement: source.replace(/\*$/, "$1") };
    }
    return { find: new RegExp(`^${esc}$`), replacement: source };
  });
}
