// The auth-credentials worker as a Node process (`npm run worker -- auth-credentials`): the same module as the edge entry.
export { worker, worker as default } from "./index.ts";
