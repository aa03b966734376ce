// The update operations shared by state::update and stream::update (protocol/README.md §7.2).
// Pure: takes the current value and returns the new one plus per-op errors; a failing op is
// skipped and the others still apply, as in iii.
import type { UpdateOp } from "@iii-edge/protocol";
import { isRecord } from "@iii-edge/protocol";

export interface OpError {
  op_index: number;
  code: string;
  message: string;
}

/** Limits from §7.2: bound the work one merge can cause and refuse prototype pollution. */
const MAX_PATH_SEGMENTS = 32;
const MAX_SEGMENT_BYTES = 256;
const MAX_VALUE_DEPTH = 16;
const MAX_MERGE_KEYS = 1024;
const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

type Obj = Record<string, unknown>;

function depth(v: unknown, d = 0): number {
  if (d > MAX_VALUE_DEPTH) return d;
  if (Array.isArray(v)) return Math.max(d, ...v.map((x) => depth(x, d + 1)));
  if (isRecord(v)) return Math.max(d, ...Object.values(v).map((x) => depth(x, d + 1)));
  return d;
}

function segments(path: string | string[] | undefined): string[] | OpError["code"] {
  if (path === undefined || path === "") return [];
  const segs = Array.isArray(path) ? path : [path];
  if (segs.length > MAX_PATH_SEGMENTS) return "merge.path.too_deep";
  for (const s of segs) {
    if (new TextEncoder().encode(s).length > MAX_SEGMENT_BYTES) return "merge.path.segment_too_long";
    if (FORBIDDEN_KEYS.has(s)) return "merge.path.proto_polluted";
  }
  return segs;
}

export function applyUpdateOps(current: unknown, ops: UpdateOp[]): { value: unknown; errors: OpError[] } {
  let value: unknown = current === undefined || current === null ? {} : structuredClone(current);
  const errors: OpError[] = [];
  ops.forEach((op, op_index) => {
    const fail = (code: string, message: string) => errors.push({ op_index, code, message });
    switch (op.type) {
      case "set": {
        if (op.path === "") {
          value = op.value ?? null;
          return;
        }
        if (FORBIDDEN_KEYS.has(op.path)) return fail("set.path.proto_polluted", `path '${op.path}' is not allowed`);
        if (!isRecord(value)) return fail("set.not_object", "value is not an object");
        value[op.path] = op.value ?? null;
        return;
      }
      case "increment":
      case "decrement": {
        if (!isRecord(value)) return fail(`${op.type}.not_object`, "value is not an object");
        if (FORBIDDEN_KEYS.has(op.path)) return fail(`${op.type}.path.proto_polluted`, `path '${op.path}' is not allowed`);
        const by = op.type === "increment" ? op.by : -op.by;
        const prev = op.path === "" ? undefined : value[op.path];
        if (prev === undefined || prev === null) value[op.path] = by;
        else if (typeof prev === "number") value[op.path] = prev + by;
        else return fail(`${op.type}.not_number`, `field '${op.path}' is not a number`);
        return;
      }
      case "remove": {
        if (!isRecord(value)) return fail("remove.not_object", "value is not an object");
        delete value[op.path];
        return;
      }
      case "merge": {
        const segs = segments(op.path);
        if (typeof segs === "string") return fail(segs, "invalid merge path");
        if (!isRecord(op.value)) return fail("merge.value.not_object", "merge value must be an object");
        if (depth(op.value) > MAX_VALUE_DEPTH) return fail("merge.value.too_deep", `merge value deeper than ${MAX_VALUE_DEPTH}`);
        const keys = Object.keys(op.value);
        if (keys.length > MAX_MERGE_KEYS) return fail("merge.value.too_many_keys", `more than ${MAX_MERGE_KEYS} keys`);
        if (keys.some((k) => FORBIDDEN_KEYS.has(k))) return fail("merge.value.proto_polluted", "forbidden key in merge value");
        if (!isRecord(value)) value = {};
        let target = value as Obj;
        for (const s of segs) {
          if (!isRecord(target[s])) target[s] = {};
          target = target[s] as Obj;
        }
        for (const k of keys) target[k] = op.value[k];
        return;
      }
      case "append": {
        const segs = segments(op.path);
        if (typeof segs === "string") return fail(segs.replace("merge", "append"), "invalid append path");
        if (segs.length === 0) {
          if (Array.isArray(value)) value.push(op.value);
          else if (typeof value === "string" && typeof op.value === "string") value = value + op.value;
          else if (isRecord(value) && Object.keys(value).length === 0) value = typeof op.value === "string" ? op.value : [op.value];
          else return fail("append.type_mismatch", "root is neither an array nor a string");
          return;
        }
        if (!isRecord(value)) return fail("append.type_mismatch", "value is not an object");
        let parent = value as Obj;
        for (const s of segs.slice(0, -1)) {
          if (parent[s] === undefined) parent[s] = {};
          if (!isRecord(parent[s])) return fail("append.type_mismatch", `'${s}' is not an object`);
          parent = parent[s] as Obj;
        }
        const last = segs[segs.length - 1]!;
        const target = parent[last];
        if (target === undefined || target === null) parent[last] = typeof op.value === "string" ? op.value : [op.value];
        else if (Array.isArray(target)) target.push(op.value);
        else if (typeof target === "string" && typeof op.value === "string") parent[last] = target + op.value;
        else return fail("append.type_mismatch", `'${last}' is neither an array nor a string`);
        return;
      }
    }
  });
  return { value, errors };
}
