// The console's build: Vite (rolldown + oxc) with Preact's automatic JSX runtime, no Babel.
// Workspace packages resolve to their sources (scripts/workspace-exports.mjs), so the page bundles
// @iii-edge/sdk-browser from sdk-browser/src like every other in-repo consumer. `public/` (the
// test page, the standalone SDK bundle) is copied through as is. Output: dist/, the Worker's
// static assets (wrangler.toml [assets]).
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";
import { sourceAliases } from "../scripts/workspace-exports.mjs";

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  publicDir: "public",
  resolve: { alias: sourceAliases() },
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: true,
    // One small app: a single chunk loads in one round trip.
    reportCompressedSize: false,
  },
  logLevel: "warn",
});
