// Everything the engine provides out of the box, added to a core in one place.
import { installEngineFunctions } from "./builtins/engine-fns.ts";
import { installState } from "./builtins/state.ts";
import type { EngineCore } from "./engine.ts";
import { DurableQueues } from "./queues/durable-queue.ts";

export interface InstallOptions {
  /** Extra configuration read from the Worker's vars (see wrangler.toml). */
  QUEUES?: string;
}

export function installEngine(core: EngineCore, _opts: InstallOptions = {}): { queues: DurableQueues } {
  installEngineFunctions(core);
  installState(core);
  const queues = new DurableQueues(core);
  core.setQueueProvider(queues);
  core.addAlarmClient(queues);
  return { queues };
}
