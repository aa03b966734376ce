// The deployable Worker (wrangler.toml `main`): the engine and what runs on it, composed above the
// packages so none of them depends on another's insides. `npm start` and `wrangler deploy` ship
// this one entry: the engine's front door and Durable Object, and the Worker-hosted functions the
// engine reaches by service binding (EDGE_HOSTS).
import { Engine, engineWorker } from "@iii-edge/engine-do";

export { Engine };
/** Demo functions hosted in this Worker (`EDGE_DEMO` service binding, wrangler.toml). */
export { DemoEdgeFunctions } from "@iii-edge/demo-app/edge";
/** The built-in harness workers (`HARNESS` service binding; `HARNESS_DISABLE` leaves some out). */
export { HarnessWorkers } from "./harness.ts";

export default engineWorker;
