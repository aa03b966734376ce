// The providers worker as a Node process (`npm run worker -- providers`): the same module as the edge entry.
export { worker, worker as default } from "./index.ts";
