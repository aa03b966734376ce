// Built-in inputs are parsed with their protocol/ schema; a mismatch is a typed error, never a cast.
import { formatIssues, IIIError, MAX_VALUE_BYTES, type SchemaIssues } from "@iii-edge/protocol";

interface Schema<T> {
  safeParse(v: unknown): { success: true; data: T } | { success: false; error: SchemaIssues };
}

export function parseInput<T>(schema: Schema<T>, input: unknown): T {
  const r = schema.safeParse(input ?? {});
  if (r.success) return r.data;
  throw new IIIError("deserialization_error", formatIssues(r.error));
}

/** A value as a built-in stores it: its JSON text, refused with `value_too_large` past
 * MAX_VALUE_BYTES (`what` names the value in the message). */
export function storedText(value: unknown, what = "value"): string {
  const text = JSON.stringify(value ?? null);
  if (text.length > MAX_VALUE_BYTES) throw new IIIError("value_too_large", `${what} of ${text.length} bytes exceeds ${MAX_VALUE_BYTES}`);
  return text;
}
