// JSON Schema, the subset functions publish (zod's toJSONSchema and hand-written ones): a payload
// template to prefill the form with, and validation before a call is sent. Supported: object,
// string, number, integer, boolean, null, enum/const, array, nested objects, $ref into $defs,
// nullable unions (anyOf/oneOf/type lists with "null"); anything else is edited as JSON and
// validated only as far as these rules reach.

export type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema | JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  default?: unknown;
  examples?: unknown[];
  description?: string;
  title?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  minItems?: number;
  maxItems?: number;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  $ref?: string;
  $defs?: Record<string, JsonSchema>;
  definitions?: Record<string, JsonSchema>;
};

/** Nesting a template or a form follows before it falls back to JSON (recursive schemas). */
export const MAX_FORM_DEPTH = 8;

export type Kind = "object" | "array" | "string" | "number" | "integer" | "boolean" | "null" | "enum" | "json";

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** `s` with its $ref followed, allOf merged and a nullable union reduced to its non-null side. */
export function resolve(s: JsonSchema | boolean | undefined, root: JsonSchema, depth = 0): { schema: JsonSchema; nullable: boolean } {
  if (s === true || s === undefined) return { schema: {}, nullable: false };
  if (s === false) return { schema: { not: {} } as JsonSchema, nullable: false };
  let cur: JsonSchema = s;
  let nullable = false;
  for (let i = 0; i < MAX_FORM_DEPTH; i++) {
    if (cur.$ref) {
      const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(cur.$ref);
      const target = m
        ? (m[1] === "$defs" ? root.$defs : root.definitions)?.[decodeURIComponent(m[2]!)]
        : cur.$ref === "#"
          ? root
          : undefined;
      const { $ref: _r, ...rest } = cur;
      cur = target ? { ...target, ...rest } : rest;
      continue;
    }
    if (cur.allOf?.length) {
      const { allOf, ...rest } = cur;
      cur = allOf.reduce<JsonSchema>((acc, part) => {
        const p = resolve(part, root, depth + 1).schema;
        return {
          // biome-ignore lint/performance/noAccumulatingSpread: an allOf has a handful of parts
          ...acc,
          ...p,
          properties: { ...acc.properties, ...p.properties },
          required: [...(acc.required ?? []), ...(p.required ?? [])],
        };
      }, rest);
      continue;
    }
    const union = cur.anyOf ?? cur.oneOf;
    if (union) {
      const nonNull = union.filter((u) => !(isObj(u) && (u.type === "null" || (u as JsonSchema).const === null)));
      if (nonNull.length < union.length) nullable = true;
      if (nonNull.length === 1) {
        const { anyOf: _a, oneOf: _o, ...rest } = cur;
        cur = { ...rest, ...nonNull[0] };
        continue;
      }
      // Unions of constants read as an enum.
      if (nonNull.every((u) => "const" in u)) {
        const { anyOf: _a, oneOf: _o, ...rest } = cur;
        cur = { ...rest, enum: nonNull.map((u) => u.const) };
        continue;
      }
    }
    if (Array.isArray(cur.type)) {
      const types = cur.type.filter((t) => t !== "null");
      if (types.length < cur.type.length) nullable = true;
      if (types.length === 1) cur = { ...cur, type: types[0] };
    }
    break;
  }
  return { schema: cur, nullable };
}

export function kindOf(s: JsonSchema): Kind {
  if (s.enum || "const" in s) return "enum";
  if (s.anyOf || s.oneOf || Array.isArray(s.type)) return "json";
  switch (s.type) {
    case "object":
      // A record (only additionalProperties) has no fields to show: JSON.
      return s.properties ? "object" : "json";
    case "array":
      return s.items && !Array.isArray(s.items) ? "array" : "json";
    case "string":
    case "number":
    case "integer":
    case "boolean":
    case "null":
      return s.type;
    default:
      if (s.properties) return "object";
      return "json";
  }
}

/** A payload to start from: defaults and examples where the schema has them, else empty values
 * of the right type; optional object fields are left out (the form offers them). */
export function templateOf(s: JsonSchema | undefined, root: JsonSchema = s ?? {}, depth = 0): unknown {
  if (!s) return {};
  const { schema } = resolve(s, root, depth);
  if (schema.default !== undefined) return schema.default;
  if (schema.examples?.length) return schema.examples[0];
  if (depth > MAX_FORM_DEPTH) return null;
  switch (kindOf(schema)) {
    case "object": {
      const out: Record<string, unknown> = {};
      for (const k of schema.required ?? []) out[k] = templateOf(schema.properties?.[k], root, depth + 1);
      return out;
    }
    case "array":
      return [];
    case "string":
      return schema.format === "date-time" ? new Date().toISOString() : "";
    case "number":
    case "integer":
      return schema.minimum ?? schema.exclusiveMinimum ?? 0;
    case "boolean":
      return false;
    case "null":
      return null;
    case "enum":
      return "const" in schema ? schema.const : schema.enum?.[0];
    default:
      return schema.type === "object" ? {} : null;
  }
}

export interface Problem {
  /** Where, e.g. `items[2].name` ("" = the payload itself). */
  path: string;
  message: string;
}

const typeName = (v: unknown) => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v);
const join = (path: string, key: string | number) => (typeof key === "number" ? `${path}[${key}]` : path ? `${path}.${key}` : key);

/** What is wrong with `value` against `s` (empty: fine). */
export function validate(s: JsonSchema | undefined, value: unknown, root: JsonSchema = s ?? {}, path = "", depth = 0): Problem[] {
  if (!s || depth > MAX_FORM_DEPTH * 2) return [];
  const { schema, nullable } = resolve(s, root, depth);
  if (value === null && nullable) return [];
  const out: Problem[] = [];
  const fail = (message: string) => out.push({ path, message });
  const union = schema.anyOf ?? schema.oneOf;
  if (union) {
    if (!union.some((u) => validate(u, value, root, path, depth + 1).length === 0)) fail("matches none of the allowed shapes");
    return out;
  }
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    fail(`must be one of ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}`);
    return out;
  }
  if ("const" in schema && JSON.stringify(schema.const) !== JSON.stringify(value)) {
    fail(`must be ${JSON.stringify(schema.const)}`);
    return out;
  }
  const types = schema.type === undefined ? undefined : Array.isArray(schema.type) ? schema.type : [schema.type];
  if (types) {
    const t = typeName(value);
    const ok = types.some(
      (ty) => ty === t || (ty === "integer" && typeof value === "number" && Number.isInteger(value)) || (ty === "number" && t === "number"),
    );
    if (!ok) {
      if (value === undefined) fail("is required");
      else if (t === "number" && types.includes("integer")) fail("must be a whole number");
      else fail(`must be ${types.join(" or ")}, not ${t}`);
      return out;
    }
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) fail(`must be at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) fail(`must be at most ${schema.maximum}`);
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) fail(`must be more than ${schema.exclusiveMinimum}`);
    if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) fail(`must be less than ${schema.exclusiveMaximum}`);
  }
  if (typeof value === "string") {
    if (schema.minLength !== undefined && value.length < schema.minLength)
      fail(schema.minLength === 1 ? "must not be empty" : `must be at least ${schema.minLength} characters`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) fail(`must be at most ${schema.maxLength} characters`);
    if (schema.pattern !== undefined) {
      try {
        if (!new RegExp(schema.pattern, "u").test(value)) fail(`must match ${schema.pattern}`);
      } catch {
        // a pattern this browser cannot compile is not checked here (the function still checks)
      }
    }
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) fail(`needs at least ${schema.minItems} items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) fail(`takes at most ${schema.maxItems} items`);
    if (schema.items && !Array.isArray(schema.items))
      value.forEach((v, i) => out.push(...validate(schema.items as JsonSchema, v, root, join(path, i), depth + 1)));
  }
  if (isObj(value)) {
    for (const k of schema.required ?? []) if (!(k in value)) out.push({ path: join(path, k), message: "is required" });
    for (const [k, v] of Object.entries(value)) {
      const p = schema.properties?.[k];
      if (p) out.push(...validate(p, v, root, join(path, k), depth + 1));
      else if (schema.additionalProperties === false) out.push({ path: join(path, k), message: "is not a field of this payload" });
      else if (isObj(schema.additionalProperties)) out.push(...validate(schema.additionalProperties, v, root, join(path, k), depth + 1));
    }
  }
  return out;
}
