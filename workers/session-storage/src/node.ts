// The session-storage worker as a Node process (`npm run worker -- session-storage`): the same module as the edge entry.
export { worker, worker as default } from "./index.ts";
