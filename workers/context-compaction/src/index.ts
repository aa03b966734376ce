// The context-compaction worker (placeholder until it lands): one `register(iii, config)` entry.
import type { WorkerModule } from "@iii-edge/sdk-edge/worker";

export const worker: WorkerModule = {
  name: "context-compaction",
  register() {},
};
export default worker;
