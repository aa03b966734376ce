// Built-in inputs are parsed with their protocol/ schema; a mismatch is a typed error, never a cast.
import { formatIssues, IIIError, type SchemaIssues } from "@iii-edge/protocol";

interface Schema<T> {
  safeParse(v: unknown): { success: true; data: T } | { success: false; error: SchemaIssues };
}

export function parseInput<T>(schema: Schema<T>, input: unknown): T {
  const r = schema.safeParse(input ?? {});
  if (r.success) return r.data;
  throw new IIIError("deserialization_error", formatIssues(r.error));
}
