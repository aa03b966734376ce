// The conformance suite on the bubblewrap fallback (used only where QEMU is missing).
import { describeBackendConformance } from "./backend-conformance.ts";
import { bwrapMissing, processBackend } from "./support.ts";

describeBackendConformance("process (bubblewrap)", () => processBackend(), { vm: false }, bwrapMissing);
