// The sub-agents worker (placeholder until it lands): one `register(iii, config)` entry.
import type { WorkerModule } from "@iii-edge/sdk-edge/worker";

export const worker: WorkerModule = {
  name: "sub-agents",
  register() {},
};
export default worker;
