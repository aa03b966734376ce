// The approval-gate worker as a Node process (`npm run worker -- approval-gate`): the same module as the edge entry.
export { worker, worker as default } from "./index.ts";
