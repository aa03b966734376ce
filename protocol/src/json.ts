// One test for "a JSON object": what a decoded payload, a stored row or a schema node must be
// before its fields are read. Arrays and null are not.

/** A plain object (not null, not an array): its fields may be read. */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
