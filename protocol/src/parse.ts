// Parsing of raw socket messages into frames, shared by the engine and the SDKs.
import { engineFrame, workerFrame, FRAME_TYPES, type EngineFrame, type WorkerFrame, type ErrorBody } from "./frames.ts";
import { MAX_FRAME_BYTES } from "./limits.ts";

export type ParseResult<T> =
  | { ok: true; frame: T }
  /** `ignore`: nothing to answer (empty frame, unknown type per §2.3); otherwise an error to report. */
  | { ok: false; ignore: boolean; error: ErrorBody; frame_type?: string; invocation_id?: string; function_id?: string };

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/** UTF-8 size of a text frame; only counted when its length alone cannot decide (≤3 bytes/unit). */
function byteSize(raw: string | ArrayBuffer | Uint8Array): number {
  if (typeof raw !== "string") return raw.byteLength;
  if (raw.length > MAX_FRAME_BYTES || raw.length * 3 <= MAX_FRAME_BYTES) return raw.length;
  return encoder.encode(raw).byteLength;
}

function parseWith<T>(raw: string | ArrayBuffer | Uint8Array, schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } } }): ParseResult<T> {
  const size = byteSize(raw);
  if (size > MAX_FRAME_BYTES) {
    return { ok: false, ignore: false, error: { code: "frame_too_large", message: `frame of ${size} bytes exceeds the ${MAX_FRAME_BYTES}-byte limit` } };
  }
  const text = typeof raw === "string" ? raw : decoder.decode(raw);
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
  const parsed = schema.safeParse(value);
  if (parsed.success) return { ok: true, frame: parsed.data };
  const issue = parsed.error.issues[0];
  const where = issue ? issue.path.map(String).join(".") : "";
  const v = value as { invocation_id?: unknown; function_id?: unknown };
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
  return parseWith(raw, workerFrame);
}
export function parseEngineFrame(raw: string | ArrayBuffer | Uint8Array): ParseResult<EngineFrame> {
  return parseWith(raw, engineFrame);
}
