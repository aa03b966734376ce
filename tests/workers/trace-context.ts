// The trace context both trace suites send and look for (tests/workers/trace.test.ts through the
// front door, tests/unit/trace.test.ts on the engine core): a caller's W3C traceparent and baggage,
// the matcher for "the same trace, under a span of the engine", and a handler that keeps the first
// call it receives. Runtime-free, so it loads in workerd and in Node alike.
import { expect } from "vitest";
import type { Frame, Wires } from "./wire-core.ts";

export const TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
export const BAGGAGE = "userId=alice,tenant=acme";
export const TRACE = { traceparent: TRACEPARENT, baggage: BAGGAGE };
export const traceId = (tp: string) => tp.split("-")[1];
/** The caller's trace, continued: its trace id, sampled, under a span of the engine; its baggage. */
export const SAME_TRACE = expect.stringMatching(new RegExp(`^00-${traceId(TRACEPARENT)}-(?!${TRACEPARENT.split("-")[2]})[0-9a-f]{16}-01$`));
export const IN_TRACE = { traceparent: SAME_TRACE, baggage: BAGGAGE };

type Wire = Awaited<ReturnType<Wires["connect"]>>;
/** Serve `fn` on `w`; resolves with the first invokefunction frame it receives. */
export const firstCallOf = (w: Wire, fn: string, handler: (d: Frame) => unknown = () => null): Promise<Frame> => {
  w.serve(fn, handler);
  return w.next((f) => f.type === "invokefunction" && f.function_id === fn, 5_000, `a call of ${fn}`);
};
