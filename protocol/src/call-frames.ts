// The two frames of every routed call, `invokefunction` and `invocationresult`, checked without zod.
// The engine parses both on every routed call (the caller's call, the worker's result), and zod's
// generic object machinery was about a quarter of the engine object's CPU on such a call: workerd
// forbids the `new Function` that zod's compiled object parsers need, so every field goes through
// its interpreter. `parseCallFrame` applies exactly the rules of
// `invokeFunction` and `invocationResult` (frames.ts) and builds the value zod builds: the schema's
// keys in the schema's order, unknown keys dropped, absent optional keys left absent, the JSON
// fields (`data`, `metadata`, `result`) passed on as they are. It only accepts: whatever it does not
// accept goes to the zod schema, which decides and words the refusal, so an invalid frame is
// refused exactly as before. tests/unit/call-frames.test.ts proves the two agree on generated frames.
import type { ErrorBody, InvocationResult, InvokeFunction, TriggerAction } from "./frames.ts";
import { MAX_ID_LENGTH, MAX_INVOCATION_ID_LENGTH, MAX_INVOKE_TIMEOUT_MS, MAX_QUEUE_NAME_LENGTH, NAMESPACE_PATTERN } from "./limits.ts";

/** A parsed JSON value that is an object (what zod's object schemas take). */
type JsonObject = Record<string, unknown>;

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);
/** Code points of `s`: a surrogate pair counts once, a lone surrogate once. */
function codePoints(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    if ((s.charCodeAt(i) & 0xfc00) === 0xd800 && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n--;
      i++;
    }
  }
  return n;
}

/** zod's `.min(min).max(max)` on a string: it counts code points, and (a code point being one or two
 * UTF-16 units) only counts them when `.length` alone cannot decide. */
function isText(v: unknown, min: number, max: number): v is string {
  if (typeof v !== "string") return false;
  const units = v.length;
  if (units < min) return false;
  if (units > max && codePoints(v) > max) return false;
  return units >= 2 * min || codePoints(v) >= min;
}
const isOptionalString = (v: unknown): v is string | undefined => v === undefined || typeof v === "string";

/** Not accepted here (distinct from `undefined`, an absent optional field). */
const REFUSED = Symbol("refused");

/** `errorBody`: code and message strings, an optional stacktrace string, nothing else kept. */
function errorBody(v: unknown): ErrorBody | typeof REFUSED {
  if (!isObject(v)) return REFUSED;
  const { code, message, stacktrace } = v;
  if (typeof code !== "string" || typeof message !== "string" || !isOptionalString(stacktrace)) return REFUSED;
  return stacktrace === undefined ? { code, message } : { code, message, stacktrace };
}

/** `triggerAction`: `{type: "void"}` or `{type: "enqueue", queue, idempotency_key?}`. */
function triggerAction(v: unknown): TriggerAction | typeof REFUSED {
  if (!isObject(v)) return REFUSED;
  if (v.type === "void") return { type: "void" };
  if (v.type !== "enqueue") return REFUSED;
  const { queue, idempotency_key } = v;
  if (!isText(queue, 1, MAX_QUEUE_NAME_LENGTH)) return REFUSED;
  if (idempotency_key === undefined) return { type: "enqueue", queue };
  if (!isText(idempotency_key, 1, MAX_QUEUE_NAME_LENGTH)) return REFUSED;
  return { type: "enqueue", queue, idempotency_key };
}

/** zod's `.int().positive().max(MAX_INVOKE_TIMEOUT_MS)` on a number (which is finite, never NaN). */
const isTimeout = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v > 0 && v <= MAX_INVOKE_TIMEOUT_MS;

function invokeFunction(v: JsonObject): InvokeFunction | undefined {
  const { invocation_id, function_id, data, metadata, traceparent, baggage, action, timeout_ms, namespace } = v;
  if (invocation_id !== undefined && !isText(invocation_id, 1, MAX_INVOCATION_ID_LENGTH)) return undefined;
  if (!isText(function_id, 1, MAX_ID_LENGTH)) return undefined;
  if (!isOptionalString(traceparent) || !isOptionalString(baggage)) return undefined;
  const act = action === undefined ? undefined : triggerAction(action);
  if (act === REFUSED) return undefined;
  if (timeout_ms !== undefined && !isTimeout(timeout_ms)) return undefined;
  if (namespace !== undefined && !(typeof namespace === "string" && NAMESPACE_PATTERN.test(namespace))) return undefined;
  // Built in the schema's key order, so the frame serialises as zod's would.
  const f: InvokeFunction =
    invocation_id === undefined ? { type: "invokefunction", function_id } : { type: "invokefunction", invocation_id, function_id };
  if ("data" in v) f.data = data;
  if ("metadata" in v) f.metadata = metadata;
  if (traceparent !== undefined) f.traceparent = traceparent;
  if (baggage !== undefined) f.baggage = baggage;
  if (act !== undefined) f.action = act;
  if (timeout_ms !== undefined) f.timeout_ms = timeout_ms;
  if (namespace !== undefined) f.namespace = namespace;
  return f;
}

function invocationResult(v: JsonObject): InvocationResult | undefined {
  const { invocation_id, function_id, result, error, traceparent, baggage } = v;
  if (!isText(invocation_id, 1, MAX_INVOCATION_ID_LENGTH) || typeof function_id !== "string") return undefined;
  const err = error === undefined ? undefined : errorBody(error);
  if (err === REFUSED) return undefined;
  if (!isOptionalString(traceparent) || !isOptionalString(baggage)) return undefined;
  const f: InvocationResult = { type: "invocationresult", invocation_id, function_id };
  if ("result" in v) f.result = result;
  if (err !== undefined) f.error = err;
  if (traceparent !== undefined) f.traceparent = traceparent;
  if (baggage !== undefined) f.baggage = baggage;
  return f;
}

/**
 * `value` (an object as JSON.parse made it) as the `invokefunction` or `invocationresult` frame zod's
 * schema would make of it. Undefined for any other type, and for a frame of these types the schema
 * might refuse: the caller then parses it with the schema, which decides.
 */
export function parseCallFrame(value: JsonObject): InvokeFunction | InvocationResult | undefined {
  const type = value.type;
  if (type === "invokefunction") return invokeFunction(value);
  if (type === "invocationresult") return invocationResult(value);
  return undefined;
}
