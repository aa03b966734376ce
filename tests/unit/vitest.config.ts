import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// Plain-Node tests of engine/protocol code: pure parts (the update ops, the frame parser with
// fast-check) and suites on the engine core served in this process (support/node-engine.ts), among
// them the wire cases shared with tests/workers (node-wire.ts). No engine process.
//
// `isolate: false`: a test process runs one file after another with the modules it has already
// loaded, instead of loading the engine core, zod and the protocol again for every file (the unit
// tier spent about as long importing as testing). A file here must leave no global behind; the one
// that has to (zod's jitless switch) runs alone in `unit-jitless` (vitest.jitless.config.ts).
export default defineProject({
  // Workspace packages by name, resolved to their sources (scripts/workspace-exports.mjs).
  resolve: { alias: sourceAliases() },
  test: {
    name: "unit",
    environment: "node",
    include: ["**/*.test.ts"],
    exclude: ["call-frames-jitless.test.ts", "**/node_modules/**"],
    isolate: false,
  },
});
