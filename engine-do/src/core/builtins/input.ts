// Built-in inputs are parsed with their protocol/ schema; a mismatch is a typed error, never a cast.
import { IIIError } from "@iii-edge/protocol";

interface Schema<T> {
  safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } };
}

export function parseInput<T>(schema: Schema<T>, input: unknown): T {
  const r = schema.safeParse(input ?? {});
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const where = issue?.path.length ? `${issue.path.map(String).join(".")}: ` : "";
  throw new IIIError("deserialization_error", `${where}${issue?.message ?? "invalid input"}`);
}
