// Every built-in against its contract in workerd, through the engine Worker: the cases of builtin-contracts.case.ts (also run on the
// engine core in tests/unit/builtin-contracts.test.ts).
import "./wire.ts";
import { builtinContractCases } from "./builtin-contracts.case.ts";

builtinContractCases();
