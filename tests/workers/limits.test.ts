// Bounded results and registrations in workerd, through the engine Worker: the cases of limits.case.ts (also run on the
// engine core in tests/unit/limits.test.ts).
import "./wire.ts";
import { limitsCases } from "./limits.case.ts";

limitsCases();
