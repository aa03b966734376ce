// Invocation routing on the engine core served in this process (traced, as the Worker is): the
// cases of tests/workers/invoke.case.ts (also run in workerd), over the same raw wire client.
import { invokeCases } from "../workers/invoke.case.ts";
import { useNodeEngine } from "./node-wire.ts";

useNodeEngine({ tracing: true });
invokeCases();
