import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// The SDKs as a web app installs them: `npm pack` of protocol, sdk-edge and sdk-browser, installed
// into a fresh app outside the workspace, bundled by Vite and esbuild, run in real Chromium.
export default defineProject({
  // The suite's own helpers (tests/support) import workspace packages: resolve those to sources.
  // The fresh app never sees this: it resolves the packed tarballs' dist/.
  resolve: { alias: sourceAliases() },
  test: {
    name: "packages",
    environment: "node",
    include: ["**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 180_000,
    sequence: { concurrent: false },
  },
});
