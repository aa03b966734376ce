// Keyed functions (docs/keyed-workers.md): a function that declares a key field runs on one
// instance per key: a Durable Object named by the key on Cloudflare, an in-process instance with its
// own node:sqlite database in Node. Calls on one key run one at a time against that instance's
// storage. The declaration rides in the registration's metadata, so it reaches every catalog
// listing unchanged, needs no new frame field, and an iii-sdk worker can declare one too.
import { IIIError } from "./errors.ts";
import { KEY_FIELD_PATTERN, KEY_PATTERN, MAX_KEY_LENGTH } from "./limits.ts";

/** The registration metadata key naming a keyed function's key field: `{"keyed_by": "cart_id"}`. */
export const KEYED_METADATA_KEY = "keyed_by";

/** The key field a function's registration metadata declares; undefined when it is not keyed.
 * Throws `invalid_arguments` when the declaration is there but unusable (a registration that
 * cannot be honoured is refused, never silently unkeyed). */
export function keyFieldOf(metadata: unknown): string | undefined {
  if (typeof metadata !== "object" || metadata === null || Array.isArray(metadata)) return undefined;
  if (!(KEYED_METADATA_KEY in metadata)) return undefined;
  const field = (metadata as Record<string, unknown>)[KEYED_METADATA_KEY];
  if (typeof field !== "string" || !KEY_FIELD_PATTERN.test(field)) {
    throw new IIIError(
      "invalid_arguments",
      `metadata.${KEYED_METADATA_KEY} must name the payload field holding the key (${KEY_FIELD_PATTERN}), got ${JSON.stringify(field)}`,
    );
  }
  return field;
}

/** The key of a call to a function keyed by `field`, or the `invalid_arguments` error it is
 * answered with (the call runs nowhere). */
export function keyOf(functionId: string, field: string, data: unknown): string | IIIError {
  const value = typeof data === "object" && data !== null && !Array.isArray(data) ? (data as Record<string, unknown>)[field] : undefined;
  if (value === undefined || value === null) {
    return new IIIError("invalid_arguments", `${functionId} is keyed by "${field}": the payload must carry it`);
  }
  if (typeof value !== "string") return new IIIError("invalid_arguments", `${functionId}: "${field}" must be a string`);
  if (value.length === 0 || value.length > MAX_KEY_LENGTH || !KEY_PATTERN.test(value)) {
    return new IIIError(
      "invalid_arguments",
      `${functionId}: "${field}" must be 1-${MAX_KEY_LENGTH} characters of ${KEY_PATTERN.source} (letters, digits and . _ : @ + = ~ -)`,
    );
  }
  return value;
}

/** The group of keyed functions sharing instances: a function id without its last `::` segment
 * (`cart::add` and `cart::get` both reach the instance of their cart). An id without `::` is its own group. */
export function keyedGroupOf(functionId: string): string {
  const at = functionId.lastIndexOf("::");
  return at > 0 ? functionId.slice(0, at) : functionId;
}

/** The name of the instance a keyed call runs on: its engine namespace, its function group and its
 * key. JSON so that no choice of the three can spell another's name. */
export function keyedInstanceName(namespace: string, functionId: string, key: string): string {
  return keyedInstanceNameOf(namespace, keyedGroupOf(functionId), key);
}

/** The same name from the group itself. */
export function keyedInstanceNameOf(namespace: string, group: string, key: string): string {
  return JSON.stringify([namespace, group, key]);
}
