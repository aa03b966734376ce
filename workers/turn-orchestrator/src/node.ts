// The turn-orchestrator worker as a Node process (`npm run worker -- turn-orchestrator`): the same module as the edge entry.
export { worker, worker as default } from "./index.ts";
