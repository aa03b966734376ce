// W3C trace context as the engine carries it (protocol/README.md §4.8): from what caused a call —
// a call's frame, a write, a publish, an enqueue, an HTTP request's headers — to every call it
// causes, trigger fires and queue deliveries included. The engine starts no spans; it only starts
// a fresh trace where nothing caused the call (a cron occurrence).

export interface TraceContext {
  traceparent?: string;
  baggage?: string;
}

/** `traceparent` (W3C Trace Context level 1): version, trace id, parent id, flags, lower-case hex.
 * Version ff is invalid; a later version may append fields after a `-`. */
const TRACEPARENT = /^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}(-.*)?$/;
/** The longest `traceparent` taken from an HTTP header: the 55 characters of version 00 and room
 * for a later version's extra fields. */
const MAX_TRACEPARENT_LENGTH = 256;
/** The longest `baggage` taken from an HTTP header: W3C Baggage's limit for the whole header. */
export const MAX_BAGGAGE_BYTES = 8192;

/** The trace fields that are set (empty strings count as absent, §4.8). */
export function traceOf(from: TraceContext | undefined): TraceContext {
  const out: TraceContext = {};
  if (from?.traceparent) out.traceparent = from.traceparent;
  if (from?.baggage) out.baggage = from.baggage;
  return out;
}

/**
 * The trace context of an incoming HTTP request (an http trigger route, `POST /_iii/invoke`): its
 * `traceparent` and `baggage` headers. A malformed `traceparent` is ignored as W3C asks (the call
 * then starts no trace of its own here); an oversized `baggage` is dropped.
 */
export function traceFromHeaders(get: (name: string) => string | null | undefined): TraceContext {
  const out: TraceContext = {};
  const tp = get("traceparent")?.trim().toLowerCase();
  if (tp && tp.length <= MAX_TRACEPARENT_LENGTH && TRACEPARENT.test(tp)) out.traceparent = tp;
  const bg = get("baggage")?.trim();
  if (bg && new TextEncoder().encode(bg).byteLength <= MAX_BAGGAGE_BYTES) out.baggage = bg;
  return out;
}

/** A new trace (a cron occurrence: nothing caused it), sampled, its ids from `newId` (UUIDs). */
export function freshTraceparent(newId: () => string): string {
  const hex = (n: number) => {
    let s = "";
    while (s.length < n)
      s += newId()
        .replace(/[^0-9a-f]/gi, "")
        .toLowerCase();
    return s.slice(0, n);
  };
  return `00-${hex(32)}-${hex(16)}-01`;
}
