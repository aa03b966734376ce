// workerd tests for the Engine Durable Object (design/style.md §8): raw iii frames over real
// hibernatable WebSockets, eviction between steps, and property tests over the protocol schemas.
import { defineProject } from "vitest/config";
import { engineInWorkerd } from "../support/workerd-project.ts";

export default defineProject(async () => ({
  // No Worker-hosted functions here: the engine must not wait for an edge manifest.
  plugins: [await engineInWorkerd({ EDGE_HOSTS: "" })],
  test: {
    name: "workers",
    include: ["**/*.test.ts"],
    setupFiles: ["./apply-migrations.ts"],
    testTimeout: 20_000,
  },
}));
