// Built-in functions and trigger types on the engine core served in this process: the cases of
// tests/workers/builtins.case.ts (also run in workerd), over the same raw wire client. There is no
// front door here, so the one value only HTTP can carry past the frame limit is workerd's to check.
import { builtinsCases } from "../workers/builtins.case.ts";
import { useNodeEngine } from "./node-wire.ts";

useNodeEngine();
builtinsCases();
