// Bounded results and registrations on the engine core served in this process: the cases of
// tests/workers/limits.case.ts (also run in workerd), over the same raw wire client.
import { limitsCases } from "../workers/limits.case.ts";
import { useNodeEngine } from "./node-wire.ts";

useNodeEngine();
limitsCases();
