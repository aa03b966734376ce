// The built-in harness workers composed into one Worker-hosted FunctionHost: the engine reaches it
// through the `HARNESS` service binding (wrangler.toml, EDGE_HOSTS) and runs each worker's
// functions and triggers with no socket. `HARNESS_DISABLE=policy,…` leaves workers out — to run
// your own in their place (`npm run worker -- <name>` runs a built-in one as a Node process).
// A name that is no worker's keeps the whole host out, with the reason in the log.
import { WorkerHost, type WorkerModule } from "@iii-edge/sdk-edge/worker-edge";
import { worker as harness } from "@iii-edge/worker-harness";
import { worker as cassettes } from "@iii-edge/worker-harness/cassettes";
import { worker as turnOrchestrator } from "@iii-edge/worker-turn-orchestrator";
import { worker as provisioning } from "@iii-edge/worker-provisioning";
import { worker as providers } from "@iii-edge/worker-providers";
import { worker as authCredentials } from "@iii-edge/worker-auth-credentials";
import { worker as policy } from "@iii-edge/worker-policy";
import { worker as approvalGate } from "@iii-edge/worker-approval-gate";
import { worker as sessionStorage } from "@iii-edge/worker-session-storage";
import { worker as budgetTracker } from "@iii-edge/worker-budget-tracker";
import { worker as hookFanout } from "@iii-edge/worker-hook-fanout";
import { worker as contextCompaction } from "@iii-edge/worker-context-compaction";
import { worker as subAgents } from "@iii-edge/worker-sub-agents";

/** What the host reads itself; the modules read their own settings from the same env. */
interface HarnessEnv {
  ENGINE: DurableObjectNamespace;
  HARNESS_DISABLE?: string;
}

export class HarnessWorkers extends WorkerHost<HarnessEnv> {
  protected readonly workers: readonly WorkerModule<unknown>[] = [
    harness,
    turnOrchestrator,
    provisioning,
    providers,
    authCredentials,
    policy,
    approvalGate,
    sessionStorage,
    budgetTracker,
    hookFanout,
    contextCompaction,
    subAgents,
    cassettes,
  ];
  protected override readonly disableVar = "HARNESS_DISABLE";
}
