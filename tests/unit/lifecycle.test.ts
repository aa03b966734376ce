// Connection lifecycle on the engine core served in this process: the cases of
// tests/workers/lifecycle.case.ts (also run in workerd), over the same raw wire client.
import { lifecycleCases } from "../workers/lifecycle.case.ts";
import { useNodeEngine } from "./node-wire.ts";

useNodeEngine({ tracing: true });
lifecycleCases();
