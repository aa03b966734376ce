// The call frames' hand-written parser against their zod schemas as Node builds them (compiled
// object parsers): tests/support/call-frames-agreement.ts. call-frames-jitless.test.ts runs the
// same suite against zod's interpreter, as in workerd.
import * as protocol from "@iii-edge/protocol";
import { describeCallFramesAgreement } from "@iii-edge/test-support/call-frames-agreement";

describeCallFramesAgreement(protocol, "zod compiled");
