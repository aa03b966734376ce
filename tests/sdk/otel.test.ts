// Trace context through a real registered OpenTelemetry setup: an app that installs a W3C
// propagator and a context manager gets its active span injected as `traceparent`/`baggage` on
// every call, and handlers run inside the caller's extracted context. The propagator and context
// manager here are small test doubles of what an OTel SDK registers, built on @opentelemetry/api's
// interfaces (the SDK packages are not dependencies of this project).
import { AsyncLocalStorage } from "node:async_hooks";
import { ROOT_CONTEXT, context, propagation, trace, type Context, type ContextManager, type TextMapPropagator } from "@opentelemetry/api";
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from "vitest";
import { registerWorker, type EdgeClient } from "@iii-edge/sdk-edge/node";
import { FakeEngine } from "./fake-engine.ts";

class AlsContextManager implements ContextManager {
  private readonly als = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.als.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.als.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.als.disable();
    return this;
  }
}

const W3C = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const w3cPropagator: TextMapPropagator = {
  inject(ctx, carrier, setter) {
    const sc = trace.getSpanContext(ctx);
    if (sc) setter.set(carrier, "traceparent", `00-${sc.traceId}-${sc.spanId}-0${sc.traceFlags & 1}`);
    const bag = propagation.getBaggage(ctx);
    if (bag)
      setter.set(
        carrier,
        "baggage",
        bag
          .getAllEntries()
          .map(([k, v]) => `${k}=${encodeURIComponent(v.value)}`)
          .join(","),
      );
  },
  extract(ctx, carrier, getter) {
    const raw = getter.get(carrier, "traceparent");
    const m = W3C.exec(Array.isArray(raw) ? (raw[0] ?? "") : (raw ?? ""));
    let out = m ? trace.setSpanContext(ctx, { traceId: m[1]!, spanId: m[2]!, traceFlags: parseInt(m[3]!, 16), isRemote: true }) : ctx;
    const b = getter.get(carrier, "baggage");
    const text = Array.isArray(b) ? b[0] : b;
    if (text) {
      const entries: Record<string, { value: string }> = {};
      for (const kv of text.split(",")) {
        const [k, v] = kv.split("=");
        if (k && v !== undefined) entries[k.trim()] = { value: decodeURIComponent(v.trim()) };
      }
      out = propagation.setBaggage(out, propagation.createBaggage(entries));
    }
    return out;
  },
  fields: () => ["traceparent", "baggage"],
};

let engine: FakeEngine;
let client: EdgeClient | undefined;

beforeAll(() => {
  context.setGlobalContextManager(new AlsContextManager());
  propagation.setGlobalPropagator(w3cPropagator);
});
afterAll(() => {
  propagation.disable();
  context.disable();
});
beforeEach(async () => {
  engine = new FakeEngine();
  await engine.start();
});
afterEach(async () => {
  await client?.shutdown();
  await engine.stop();
});

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN_ID = "00f067aa0ba902b7";

it("injects the active span and baggage into every call", async () => {
  client = registerWorker(engine.url, { workerName: "otel", logger: { warn: () => {}, error: () => {} } });
  const conn = await engine.until(() => engine.connections[0]);
  let ctx = trace.setSpanContext(ROOT_CONTEXT, { traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1 });
  ctx = propagation.setBaggage(ctx, propagation.createBaggage({ tenant: { value: "acme" } }));
  const c = client;
  void context.with(ctx, () => c.trigger({ function_id: "x::y", payload: {}, action: { type: "void" } }));
  const frame = await engine.until(() => conn.frames.find((f) => f.function_id === "x::y"));
  expect(frame.traceparent).toBe(`00-${TRACE_ID}-${SPAN_ID}-01`);
  expect(frame.baggage).toBe("tenant=acme");
});

it("runs a handler inside the caller's context, so its own calls continue the trace after an await", async () => {
  client = registerWorker(engine.url, { workerName: "otel", logger: { warn: () => {}, error: () => {} } });
  const seen: { traceId?: string; tenant?: string }[] = [];
  const c = client;
  c.registerFunction("otel::handler", async () => {
    await new Promise((r) => setTimeout(r, 10));
    const active = context.active();
    seen.push({ traceId: trace.getSpanContext(active)?.traceId, tenant: propagation.getBaggage(active)?.getEntry("tenant")?.value });
    await c.trigger({ function_id: "otel::inner", payload: {}, action: { type: "void" } });
    return "done";
  });
  const conn = await engine.until(() => engine.connections[0]?.frames.some((f) => f.type === "registerfunction") && engine.connections[0]);
  conn.send({
    type: "invokefunction",
    invocation_id: "i-1",
    function_id: "otel::handler",
    data: {},
    traceparent: `00-${TRACE_ID}-${SPAN_ID}-01`,
    baggage: "tenant=acme",
  });
  await engine.until(() => conn.frames.find((f) => f.invocation_id === "i-1"));
  expect(seen).toEqual([{ traceId: TRACE_ID, tenant: "acme" }]);
  const inner = conn.frames.find((f) => f.function_id === "otel::inner")!;
  expect(String(inner.traceparent)).toContain(TRACE_ID);
  expect(inner.baggage).toBe("tenant=acme");
});
