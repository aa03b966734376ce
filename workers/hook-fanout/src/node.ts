// The hook-fanout worker as a Node process (`npm run worker -- hook-fanout`): the same module as the edge entry.
export { worker, worker as default } from "./index.ts";
