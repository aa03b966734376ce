// Parsing of raw socket messages into frames, shared by the engine and the SDKs.
import { parseCallFrame } from "./call-frames.ts";
import { engineFrame, workerFrame, FRAME_TYPES, type EngineFrame, type WorkerFrame, type ErrorBody } from "./frames.ts";
import { exceedsJsonDepth, jsonDepthMessage } from "./json-depth.ts";
import { MAX_FRAME_BYTES, MAX_JSON_DEPTH } from "./limits.ts";

export type ParseResult<T> =
  | { ok: true; frame: T }
  /** `ignore`: nothing to answer (empty frame, unknown type per §2.3); otherwise an error to report. */
  | { ok: false; ignore: boolean; error: ErrorBody; frame_type?: string; invocation_id?: string; function_id?: string };

/** Binary frames are parsed as UTF-8 JSON text (§2.3): invalid UTF-8 is refused, not replaced. (A
 * text frame with invalid UTF-8 never reaches this far as such: workerd decodes it with U+FFFD
 * replacement before the object sees it; see engine-do/README.md "Bad input".) */
const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
const lenient = new TextDecoder();
const encoder = new TextEncoder();

/** How much of each end of a frame `peekCallIds` reads: the envelope fields of a frame are before
 * or after its payload, so a call's ids are found without reading (or parsing) the payload. */
const PEEK_CHARS = 4 * 1024;
const CALL_TYPE = /"type"\s*:\s*"invokefunction"/;
const RESULT_TYPE = /"type"\s*:\s*"invocationresult"/;
const CALL_INVOCATION_ID = /"invocation_id"\s*:\s*"([^"\\]{1,128})"/;
const CALL_FUNCTION_ID = /"function_id"\s*:\s*"([^"\\]{1,512})"/;

/**
 * The ids of a call, picked out of the head and tail of its raw text without parsing it: for
 * answering a call the engine will not parse (too large, dropped by a budget). Undefined when the
 * frame does not look like an `invokefunction` with an `invocation_id`. A match inside the payload
 * can only point the answer at another id of the same sender.
 */
export function peekCallIds(raw: string | ArrayBuffer | Uint8Array): { invocation_id: string; function_id: string } | undefined {
  const [head, tail] = ends(raw);
  if (!CALL_TYPE.test(head) && !CALL_TYPE.test(tail)) return undefined;
  const invocation_id = CALL_INVOCATION_ID.exec(head)?.[1] ?? CALL_INVOCATION_ID.exec(tail)?.[1];
  if (!invocation_id) return undefined;
  return { invocation_id, function_id: CALL_FUNCTION_ID.exec(head)?.[1] ?? CALL_FUNCTION_ID.exec(tail)?.[1] ?? "" };
}

/** The invocation id of an `invocationresult`, picked out the same way (for a result the engine
 * drops unread: its call is ended at once instead of at its deadline). */
export function peekResultId(raw: string | ArrayBuffer | Uint8Array): string | undefined {
  const [head, tail] = ends(raw);
  if (!RESULT_TYPE.test(head) && !RESULT_TYPE.test(tail)) return undefined;
  return CALL_INVOCATION_ID.exec(head)?.[1] ?? CALL_INVOCATION_ID.exec(tail)?.[1];
}

/** The first and last PEEK_CHARS of a frame's text. */
function ends(raw: string | ArrayBuffer | Uint8Array): [string, string] {
  if (typeof raw === "string") return [raw.slice(0, PEEK_CHARS), raw.length > PEEK_CHARS ? raw.slice(-PEEK_CHARS) : ""];
  const bytes = raw instanceof Uint8Array ? raw : new Uint8Array(raw);
  return [
    lenient.decode(bytes.subarray(0, PEEK_CHARS)),
    bytes.byteLength > PEEK_CHARS ? lenient.decode(bytes.subarray(bytes.byteLength - PEEK_CHARS)) : "",
  ];
}

/** UTF-8 size of a text frame; only counted when its length alone cannot decide (≤3 bytes/unit). */
export function byteSize(raw: string | ArrayBuffer | Uint8Array): number {
  if (typeof raw !== "string") return raw.byteLength;
  if (raw.length > MAX_FRAME_BYTES || raw.length * 3 <= MAX_FRAME_BYTES) return raw.length;
  return encoder.encode(raw).byteLength;
}

function parseWith<T>(
  raw: string | ArrayBuffer | Uint8Array,
  schema: {
    safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } };
  },
  /** The hand-written check of the frames of a routed call (call-frames.ts): what it accepts the
   * schema would; anything else goes to the schema. */
  fast: (v: Record<string, unknown>) => T | undefined,
): ParseResult<T> {
  const size = byteSize(raw);
  if (size > MAX_FRAME_BYTES) {
    const error = { code: "frame_too_large", message: `frame of ${size} bytes exceeds the ${MAX_FRAME_BYTES}-byte limit` };
    // A call too large to read still gets its answer: its ids are in the envelope, not the payload.
    const call = peekCallIds(raw);
    return call ? { ok: false, ignore: false, error, frame_type: "invokefunction", ...call } : { ok: false, ignore: false, error };
  }
  let text: string;
  try {
    text = typeof raw === "string" ? raw : decoder.decode(raw);
  } catch {
    return { ok: false, ignore: false, error: { code: "invalid_frame", message: "frame is not valid UTF-8" } };
  }
  if (text.trim() === "") return { ok: false, ignore: true, error: { code: "invalid_frame", message: "empty frame" } };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, ignore: false, error: { code: "invalid_frame", message: "frame is not valid JSON" } };
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    return { ok: false, ignore: false, error: { code: "invalid_frame", message: "frame must be a JSON object" } };
  }
  const type = (value as { type?: unknown }).type;
  if (typeof type !== "string") {
    return { ok: false, ignore: false, error: { code: "invalid_frame", message: "frame has no string `type`" } };
  }
  if (!(FRAME_TYPES as readonly string[]).includes(type)) {
    // §2.3: unknown types are logged and ignored, never fatal.
    return { ok: false, ignore: true, error: { code: "invalid_frame", message: `unknown frame type '${type.slice(0, 64)}'` } };
  }
  const v = value as { invocation_id?: unknown; function_id?: unknown };
  // Before the schema (whose recursive parts would recurse as deep): nothing deeper is stored,
  // routed or answered, so no JSON.stringify or structured clone downstream overflows the stack.
  // An over-deep frame is at least 2 × MAX_JSON_DEPTH characters long.
  if (text.length > 2 * MAX_JSON_DEPTH && exceedsJsonDepth(value)) {
    return {
      ok: false,
      ignore: false,
      error: { code: "invalid_frame", message: jsonDepthMessage(type) },
      frame_type: type,
      invocation_id: typeof v.invocation_id === "string" ? v.invocation_id : undefined,
      function_id: typeof v.function_id === "string" ? v.function_id : undefined,
    };
  }
  const frame = fast(value as Record<string, unknown>);
  if (frame !== undefined) return { ok: true, frame };
  const parsed = schema.safeParse(value);
  if (parsed.success) return { ok: true, frame: parsed.data };
  const issue = parsed.error.issues[0];
  const where = issue ? issue.path.map(String).join(".") : "";
  return {
    ok: false,
    ignore: false,
    error: { code: "invalid_frame", message: `${type}: ${where ? `${where}: ` : ""}${issue?.message ?? "invalid"}` },
    frame_type: type,
    invocation_id: typeof v.invocation_id === "string" ? v.invocation_id : undefined,
    function_id: typeof v.function_id === "string" ? v.function_id : undefined,
  };
}

export function parseWorkerFrame(raw: string | ArrayBuffer | Uint8Array): ParseResult<WorkerFrame> {
  return parseWith(raw, workerFrame, parseCallFrame);
}
export function parseEngineFrame(raw: string | ArrayBuffer | Uint8Array): ParseResult<EngineFrame> {
  return parseWith(raw, engineFrame, parseCallFrame);
}
