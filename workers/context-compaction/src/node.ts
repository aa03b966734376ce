// The context-compaction worker as a Node process (`npm run worker -- context-compaction`): the same module as the edge entry.
export { worker, worker as default } from "./index.ts";
