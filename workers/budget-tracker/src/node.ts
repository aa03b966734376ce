// The budget-tracker worker as a Node process (`npm run worker -- budget-tracker`): the same module as the edge entry.
export { worker, worker as default } from "./index.ts";
