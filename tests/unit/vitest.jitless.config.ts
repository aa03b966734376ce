import { defineProject } from "vitest/config";
import { sourceAliases } from "../../scripts/workspace-exports.mjs";

// The call-frames agreement under zod's jitless mode, as workerd runs zod: the file switches zod's
// global config before it loads the protocol, so it needs a process whose modules no other file
// has loaded (the `unit` project shares its processes between files).
export default defineProject({
  resolve: { alias: sourceAliases() },
  test: { name: "unit-jitless", environment: "node", include: ["call-frames-jitless.test.ts"] },
});
