// The JSON Schema subset the sandbox functions publish as request_format / response_format, and
// a validator for it, so the published schema and the check that enforces it are one object.

export interface JsonSchema {
  type?: "object" | "string" | "integer" | "number" | "boolean" | "array" | "null";
  description?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  enum?: readonly (string | number | boolean)[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  maxItems?: number;
  pattern?: string;
}

function typeOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

/** First violation of `schema` by `value`, as "path: problem", or undefined when it conforms. */
export function validate(schema: JsonSchema, value: unknown, at = "request"): string | undefined {
  const t = typeOf(value);
  if (schema.type && !(schema.type === t || (schema.type === "number" && t === "integer")))
    return `${at}: expected ${schema.type}, got ${t}`;
  if (schema.enum && !schema.enum.includes(value as string))
    return `${at}: must be one of ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}`;
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) return `${at}: must be >= ${schema.minimum}`;
    if (schema.maximum !== undefined && value > schema.maximum) return `${at}: must be <= ${schema.maximum}`;
  }
  if (typeof value === "string") {
    if (schema.minLength !== undefined && value.length < schema.minLength) return `${at}: must not be shorter than ${schema.minLength}`;
    if (schema.maxLength !== undefined && value.length > schema.maxLength) return `${at}: must not be longer than ${schema.maxLength}`;
    if (schema.pattern !== undefined && !new RegExp(schema.pattern).test(value)) return `${at}: must match ${schema.pattern}`;
  }
  if (Array.isArray(value)) {
    if (schema.maxItems !== undefined && value.length > schema.maxItems) return `${at}: at most ${schema.maxItems} items`;
    if (schema.items) {
      for (let i = 0; i < value.length; i++) {
        const e = validate(schema.items, value[i], `${at}[${i}]`);
        if (e) return e;
      }
    }
  }
  if (t === "object") {
    const obj = value as Record<string, unknown>;
    for (const r of schema.required ?? []) if (obj[r] === undefined) return `${at}.${r}: required`;
    for (const [k, v] of Object.entries(obj)) {
      const sub = schema.properties?.[k];
      if (sub) {
        if (v === undefined) continue;
        const e = validate(sub, v, `${at}.${k}`);
        if (e) return e;
      } else if (schema.additionalProperties === false) {
        return `${at}.${k}: unknown field`;
      } else if (typeof schema.additionalProperties === "object") {
        const e = validate(schema.additionalProperties, v, `${at}.${k}`);
        if (e) return e;
      }
    }
  }
  return undefined;
}
