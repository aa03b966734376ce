// Worker-provided trigger types on the engine core served in this process: the cases of
// tests/workers/custom-triggers.case.ts (also run in workerd), over the same raw wire client.
import { customTriggerCases } from "../workers/custom-triggers.case.ts";
import { useNodeEngine } from "./node-wire.ts";

useNodeEngine();
customTriggerCases();
