// The console's build: Vite (rolldown + oxc) with Preact's automatic JSX runtime, no Babel.
// Workspace packages resolve to their sources (scripts/workspace-exports.mjs), so the page bundles
// @iii-edge/sdk-browser from sdk-browser/src like every other in-repo consumer. `public/` (the
// test page, the standalone SDK bundle) is copied through as is. Output: dist/, the Worker's
// static assets (wrangler.toml [assets]), which also carry the tokenizer's rank tables for the
// context-compaction worker (under /_iii/tokenizer/, read through the ASSETS binding: kept out of
// the Worker script, workers/context-compaction/src/ranks.ts).
import { fileURLToPath } from "node:url";
import { defineConfig, type Plugin } from "vite";
import { rankAssetFiles } from "@iii-edge/worker-context-compaction/rank-assets";
import { sourceAliases } from "../scripts/workspace-exports.mjs";

const tokenizerRanks: Plugin = {
  name: "iii-tokenizer-ranks",
  apply: "build",
  async generateBundle() {
    for (const f of await rankAssetFiles()) this.emitFile({ type: "asset", fileName: f.fileName, source: f.source });
  },
};

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  publicDir: "public",
  resolve: { alias: sourceAliases() },
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  plugins: [tokenizerRanks],
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
