// A test-only engine Worker (tests/sdk/worker-edge.e2e.test.ts builds its wrangler config from the
// root one): the engine, plus one Worker-hosted host of test modules behind TEST_EDGE.
import { Engine, PrincipalConnections, engineWorker } from "@iii-edge/engine-do";

export { Engine, PrincipalConnections };
/** The root config's every Durable Object class must be exported, the demo keyed counter's too
 * (no host here reaches it). */
export { DemoCounters } from "@iii-edge/demo-app/edge";
export { TestWorkers } from "./test-workers.ts";
export default engineWorker;
