import { defineProject } from "vitest/config";
import { sourceAliases } from "../scripts/workspace-exports.mjs";

// The console's pure rules (test/*.test.ts) in plain Node — part of `npm run test:unit`; the
// console in a real browser is tests/browser.
export default defineProject({
  resolve: { alias: sourceAliases() },
  test: { name: "console-logic", environment: "node", include: ["test/**/*.test.ts"], isolate: false },
});
