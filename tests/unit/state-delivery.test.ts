// What a state write causes, delivered durably, on the engine core served in this process: the cases of
// tests/workers/state-delivery.case.ts (also run in workerd), over the same raw wire client.
import { stateDeliveryCases } from "../workers/state-delivery.case.ts";
import { useNodeEngine } from "./node-wire.ts";

useNodeEngine({ tracing: true });
stateDeliveryCases();
