// Every built-in against its contract on the engine core served in this process (traced, as the
// Worker is, so engine::traces::* answer): the cases of
// tests/workers/builtin-contracts.case.ts (also run in workerd), over the same raw wire client.
import { builtinContractCases } from "../workers/builtin-contracts.case.ts";
import { useNodeEngine } from "./node-wire.ts";

useNodeEngine({ tracing: true });
builtinContractCases();
