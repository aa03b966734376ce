// How deeply a JSON value nests, checked without recursion (so a value nested 100 000 deep is
// measured, not a stack overflow). The frame parser refuses frames deeper than MAX_JSON_DEPTH; the
// engine checks invoke payloads and stored values with the same function.
import { MAX_JSON_DEPTH } from "./limits.ts";

/** Containers one check visits at most. JSON text of MAX_FRAME_BYTES holds fewer than 400 000, so
 * only a structured-clone value that shares or cycles objects (an RPC payload) can reach it; such a
 * value is refused rather than walked along exponentially many paths. */
const MAX_VISITS = 1_000_000;

/** True when `value` nests objects/arrays more than `max` levels deep (the outermost is level 1),
 * or shares/cycles objects so much that walking it passes MAX_VISITS. Stops at the first path over
 * `max`; primitives cost nothing. */
export function exceedsJsonDepth(value: unknown, max: number = MAX_JSON_DEPTH): boolean {
  if (value === null || typeof value !== "object") return false;
  const values: object[] = [value];
  const depths: number[] = [1];
  let visits = 0;
  while (values.length > 0) {
    const v = values.pop()!;
    const d = depths.pop()!;
    if (d > max || ++visits > MAX_VISITS) return true;
    if (Array.isArray(v)) {
      for (const c of v) {
        if (c !== null && typeof c === "object") {
          values.push(c);
          depths.push(d + 1);
        }
      }
      continue;
    }
    for (const k in v) {
      const c = (v as Record<string, unknown>)[k];
      if (c !== null && typeof c === "object") {
        values.push(c);
        depths.push(d + 1);
      }
    }
  }
  return false;
}

/** The message of a refusal for a value over the limit (names the limit, for every caller alike). */
export function jsonDepthMessage(what: string, max: number = MAX_JSON_DEPTH): string {
  return `${what} is nested too deeply: more than ${max} levels (MAX_JSON_DEPTH)`;
}
