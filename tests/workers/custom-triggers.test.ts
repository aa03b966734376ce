// Worker-provided trigger types in workerd, through the engine Worker: the cases of
// custom-triggers.case.ts (also run on the engine core in tests/unit/custom-triggers.test.ts).
import "./wire.ts";
import { customTriggerCases } from "./custom-triggers.case.ts";

customTriggerCases();
