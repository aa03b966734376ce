// A turn as one trace, in OpenTelemetry's GenAI conventions: `invoke_agent` from
// run::start to the run's end, one `step <state>` span per queued step under it, `execute_tool
// <function>` per call the model makes, and the policy check and the approval wait as spans of
// their own under the call. A run crosses many queue steps (and possibly restarts), so what the
// spans need later is kept on the turn record (`trace`): the invoke_agent span's context and start,
// and the start of every call still waiting for a person. The spans whose lifetime crosses steps
// are made once, when they end, with their stored start and a span id derived from the run's, so
// children made in earlier steps already point at them.
import type { FunctionCall, TurnStateRecord } from "@iii-edge/protocol/harness";
import { IN_PROGRESS_ATTRIBUTE } from "@iii-edge/protocol/telemetry";
import { derivedSpanId, formatTraceparent, parseTraceparent, type Attributes, type Span, type Tracer } from "@iii-edge/sdk-edge/worker";
import { MAX_ERROR_TEXT } from "./constants.ts";

/** `gen_ai.agent.name` of the harness's agent. */
export const AGENT_NAME = "iii-edge";

/** What the record keeps of its run's trace. */
export interface TurnTrace {
  /** The invoke_agent span's own context: the parent of every step span. */
  traceparent: string;
  /** Its parent: the context run::start was called in (absent: the turn is its own trace). */
  parent?: string;
  started_at_ms: number;
  /** Calls whose execute_tool span is still open across steps (waiting for a person), by call id. */
  tools?: Record<string, { started_at_ms: number; function_id: string }>;
}

type TracedRecord = TurnStateRecord & { trace?: TurnTrace };

/** The record's trace, if its run has one (records written before tracing have none). */
export function traceOf(rec: TurnStateRecord): TurnTrace | undefined {
  const t = (rec as TracedRecord).trace;
  return t && typeof t.traceparent === "string" && parseTraceparent(t.traceparent) ? t : undefined;
}

const sessionAttributes = (sid: string): Attributes => ({ "gen_ai.conversation.id": sid, "iii.session.id": sid });

/** A run's trace, begun by run::start in the context it was called in (`parent`). */
export function beginTurnTrace(tracer: Tracer, rec: TurnStateRecord, parent: string | undefined): TurnTrace {
  // The span's ids now; the span itself is made at the run's end. Meanwhile an in-progress copy
  // (same id, ended at once) gives a running trace its root: the store replaces it with the
  // finished span, exporters never send it (IN_PROGRESS_ATTRIBUTE).
  const startedAt = Date.now();
  const probe = tracer.startSpan(`invoke_agent ${AGENT_NAME}`, {
    parent: parent ?? null,
    startTimeMs: startedAt,
    attributes: {
      ...sessionAttributes(rec.session_id),
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": AGENT_NAME,
      "iii.run_id": rec.run_id,
      [IN_PROGRESS_ATTRIBUTE]: true,
    },
  });
  probe.end(startedAt);
  const trace: TurnTrace = { traceparent: probe.traceparent, started_at_ms: startedAt };
  if (parent && parseTraceparent(parent)) trace.parent = parent;
  (rec as TracedRecord).trace = trace;
  return trace;
}

/** Run `fn` with the invoke_agent span as the current context (its calls become its children). */
export function inTurn<T>(tracer: Tracer | undefined, rec: TurnStateRecord, fn: () => Promise<T>): Promise<T> {
  const t = traceOf(rec);
  return t && tracer ? tracer.withParent(t.traceparent, fn) : fn();
}

/** One queued step's span, under invoke_agent. `rec` is the step's working copy (its state when the
 * step is done is the span's `iii.turn.next_state`). */
export function stepSpan<T>(tracer: Tracer, rec: TurnStateRecord, state: string, fn: () => Promise<T>, chainedFrom?: number): Promise<T> {
  const t = traceOf(rec);
  if (!t) return fn();
  const attributes: Attributes = {
    ...sessionAttributes(rec.session_id),
    "iii.turn.state": state,
    "iii.turn.step": rec.step,
    "iii.run_id": rec.run_id,
    "iii.turn.count": rec.turn_count,
  };
  // Run by the delivery of an earlier step (runSteps), not by its own queue message.
  if (chainedFrom !== undefined) attributes["iii.turn.chained_from"] = chainedFrom;
  return tracer.withSpan(`step ${state}`, { parent: t.traceparent, attributes }, async (span) => {
    const out = await fn();
    span.setAttribute("iii.turn.next_state", rec.state);
    return out;
  });
}

/** The invoke_agent span, made once the run reached `stopped` or `failed`. */
export function endTurnTrace(tracer: Tracer, rec: TurnStateRecord, model: { provider?: string; model?: string } = {}): void {
  const t = traceOf(rec);
  if (!t) return;
  const own = parseTraceparent(t.traceparent)!;
  const now = Date.now();
  // Calls left waiting (the run stopped or failed meanwhile): their spans end with it.
  for (const [cid, open] of Object.entries(t.tools ?? {})) {
    const span = tracer.startSpan(`execute_tool ${open.function_id}`, {
      parent: t.traceparent,
      spanId: toolSpanId(t, cid),
      startTimeMs: open.started_at_ms,
      attributes: toolAttributes(rec.session_id, cid, open.function_id, "run_ended"),
    });
    span.setAttribute("error.type", "run_ended");
    span.setStatus("error", `the run ended (${rec.state}) before the call finished`);
    span.end(now);
  }
  delete t.tools;
  const attributes: Attributes = {
    ...sessionAttributes(rec.session_id),
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.agent.name": AGENT_NAME,
    "iii.run_id": rec.run_id,
    "iii.turn.count": rec.turn_count,
    "iii.turn.final_state": rec.state,
  };
  if (model.provider) attributes["gen_ai.provider.name"] = model.provider;
  if (model.model) attributes["gen_ai.request.model"] = model.model;
  const span = tracer.startSpan(`invoke_agent ${AGENT_NAME}`, {
    parent: t.parent ?? null,
    traceId: own.trace_id,
    spanId: own.span_id,
    startTimeMs: t.started_at_ms,
    attributes,
  });
  // A log record for the end, correlated with the step that ended the run.
  tracer.log(
    rec.state === "failed" ? "error" : "info",
    `run ${rec.run_id} of session ${rec.session_id} ${rec.state} after ${rec.turn_count} round(s)${rec.error ? `: ${rec.error.kind}: ${rec.error.message}` : ""}`,
    {
      ...sessionAttributes(rec.session_id),
      "iii.run_id": rec.run_id,
      "iii.turn.final_state": rec.state,
    },
  );
  if (rec.state === "failed") {
    span.setAttribute("error.type", rec.error?.kind ?? "_OTHER");
    span.setStatus("error", (rec.error?.message ?? "the run failed").slice(0, MAX_ERROR_TEXT));
  } else {
    span.setStatus("ok");
  }
  span.end(now);
}

// ------------------------------------------------------------------ calls

const toolAttributes = (sid: string, cid: string, fn: string, outcome: string): Attributes => ({
  ...sessionAttributes(sid),
  "gen_ai.operation.name": "execute_tool",
  "gen_ai.tool.name": fn,
  "gen_ai.tool.call.id": cid,
  "gen_ai.tool.type": "function",
  "iii.function_id": fn,
  "iii.tool.outcome": outcome,
});

const toolSpanId = (t: TurnTrace, cid: string): string => derivedSpanId(`${parseTraceparent(t.traceparent)!.span_id}:tool:${cid}`);

/** The execute_tool span of one call: its id is derived from the run's and the call's, so the
 * policy check, the approval wait and the dispatch — possibly in different steps — are its
 * children before it is made. */
export class ToolSpan {
  private readonly tracer: Tracer;
  private readonly rec: TurnStateRecord;
  private readonly call: FunctionCall;
  private readonly trace: TurnTrace | undefined;
  private readonly startedMs: number;

  constructor(tracer: Tracer, rec: TurnStateRecord, call: FunctionCall) {
    this.tracer = tracer;
    this.rec = rec;
    this.call = call;
    this.trace = traceOf(rec);
    this.startedMs = this.trace?.tools?.[call.id]?.started_at_ms ?? Date.now();
  }

  /** This span as a parent (undefined when the run is not traced). */
  get traceparent(): string | undefined {
    if (!this.trace) return undefined;
    const own = parseTraceparent(this.trace.traceparent)!;
    return formatTraceparent({ trace_id: own.trace_id, span_id: toolSpanId(this.trace, this.call.id), sampled: own.sampled });
  }

  /** Run `fn` as a child span `name` of this call (or plainly, untraced). */
  child<T>(name: string, attributes: Attributes, fn: (span: Span | undefined) => Promise<T>): Promise<T> {
    const parent = this.traceparent;
    if (!parent) return fn(undefined);
    return this.tracer.withSpan(name, { parent, attributes: { ...attributes, "iii.session.id": this.rec.session_id } }, (span) => fn(span));
  }

  /** Run `fn` with this call's span as the current context (the dispatch: the target's spans are its children). */
  within<T>(fn: () => Promise<T>): Promise<T> {
    const parent = this.traceparent;
    return parent ? this.tracer.withParent(parent, fn) : fn();
  }

  /** A finished child span of this call that began earlier (the approval wait: from when the call
   * was parked, possibly steps ago, to now). */
  recordChild(name: string, attributes: Attributes, startTimeMs: number, error?: string): void {
    const parent = this.traceparent;
    if (!parent) return;
    const span = this.tracer.startSpan(name, { parent, startTimeMs, attributes: { ...attributes, "iii.session.id": this.rec.session_id } });
    if (error) span.setStatus("error", error);
    span.end();
  }

  /** The call waits for a person: its span stays open (its start kept on the record). */
  keepOpen(): void {
    if (!this.trace) return;
    (this.trace.tools ??= {})[this.call.id] = { started_at_ms: this.startedMs, function_id: this.call.function_id };
  }

  /** The span ends: the call has its result (`error`: it failed, was denied or interrupted). */
  end(outcome: { error?: string; outcome: string }): void {
    if (!this.trace) return;
    if (this.trace.tools) {
      delete this.trace.tools[this.call.id];
      if (Object.keys(this.trace.tools).length === 0) delete this.trace.tools;
    }
    const span = this.tracer.startSpan(`execute_tool ${this.call.function_id}`, {
      parent: this.trace.traceparent,
      spanId: toolSpanId(this.trace, this.call.id),
      startTimeMs: this.startedMs,
      attributes: toolAttributes(this.rec.session_id, this.call.id, this.call.function_id, outcome.outcome),
    });
    if (outcome.error) {
      span.setAttribute("error.type", outcome.outcome);
      span.setStatus("error", outcome.error.slice(0, MAX_ERROR_TEXT));
    } else {
      span.setStatus("ok");
    }
    span.end();
  }
}
