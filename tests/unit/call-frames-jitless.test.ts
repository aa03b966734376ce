// The call frames' hand-written parser against their zod schemas as workerd runs them: workerd
// forbids `new Function`, so zod interprets its object schemas instead of compiling them. zod
// decides when a schema is built, so it is told before the protocol module (and anything that
// imports it) is loaded: everything below is imported after `z.config`. The suite:
// tests/support/call-frames-agreement.ts.
import { expect, it } from "vitest";
import { z } from "zod";

z.config({ jitless: true });
// Every `new Function` from here on is counted: zod must compile nothing, as in workerd.
const RealFunction = globalThis.Function;
let compiled = 0;
globalThis.Function = new Proxy(RealFunction, {
  construct(target, args) {
    compiled++;
    return Reflect.construct(target, args);
  },
});
const protocol = await import("@iii-edge/protocol");
const { describeCallFramesAgreement } = await import("@iii-edge/test-support/call-frames-agreement");

it("zod compiles nothing here, as in workerd", () => {
  for (const raw of ['{"type":"invokefunction","function_id":"f"}', '{"type":"invocationresult","invocation_id":"i","function_id":"f"}'])
    expect(protocol.workerFrame.safeParse(JSON.parse(raw)).success).toBe(true);
  expect(protocol.workerFrame.safeParse({ type: "registerfunction", id: "f", metadata: { a: 1 } }).success).toBe(true);
  globalThis.Function = RealFunction;
  expect(compiled).toBe(0);
});

describeCallFramesAgreement(protocol, "zod jitless, as in workerd");
