// W3C trace context for calls and handlers, through @opentelemetry/api.
//
// With a registered global propagator (an OTel SDK set up by the app) the active context is
// injected into every outgoing call and every handler runs inside the caller's extracted context.
// Without one the API is a no-op, so we also remember the trace fields of the invocation being
// handled ("ambient" fields) and pass them through on calls made while handling it: a call made
// inside a handler continues the caller's trace either way.
import { context, propagation } from "@opentelemetry/api";

export interface TraceFields {
  traceparent?: string;
  baggage?: string;
}

/**
 * Where the trace fields of the invocation being handled are kept while its handler runs.
 * Node uses AsyncLocalStorage (survives `await`); browsers have no equivalent, so the default
 * store only covers the synchronous part of a handler — use the handler's `ctx.trigger` to be
 * sure a call continues the trace after an `await`.
 */
export interface AmbientTrace {
  run<T>(fields: TraceFields, fn: () => T): T;
  get(): TraceFields | undefined;
}

/** Synchronous-only ambient store (browsers, workerd without AsyncLocalStorage). */
export function syncAmbientTrace(): AmbientTrace {
  const stack: TraceFields[] = [];
  return {
    run(fields, fn) {
      stack.push(fields);
      try {
        return fn();
      } finally {
        stack.pop();
      }
    },
    get: () => stack[stack.length - 1],
  };
}

function clean(fields: TraceFields): TraceFields {
  const out: TraceFields = {};
  // §4.8: empty strings count as absent.
  if (fields.traceparent) out.traceparent = fields.traceparent;
  if (fields.baggage) out.baggage = fields.baggage;
  return out;
}

/** Trace fields for an outgoing call: explicit ones, else the active OTel context, else the
 * fields of the invocation being handled (`fallback`). */
export function outgoingTrace(explicit: TraceFields, fallback: TraceFields | undefined): TraceFields {
  if (explicit.traceparent || explicit.baggage) return clean(explicit);
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  const injected = clean({ traceparent: carrier.traceparent, baggage: carrier.baggage });
  if (injected.traceparent || injected.baggage) return injected;
  return clean(fallback ?? {});
}

/** Run a handler inside the caller's trace context (OTel context and ambient fields). */
export function runInTrace<T>(fields: TraceFields, ambient: AmbientTrace, fn: () => T): T {
  const carrier: Record<string, string> = {};
  if (fields.traceparent) carrier.traceparent = fields.traceparent;
  if (fields.baggage) carrier.baggage = fields.baggage;
  const ctx = propagation.extract(context.active(), carrier);
  return ambient.run(clean(fields), () => context.with(ctx, fn));
}
