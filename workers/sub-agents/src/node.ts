// The sub-agents worker as a Node process (`npm run worker -- sub-agents`): the same module as the edge entry.
export { worker, worker as default } from "./index.ts";
