// Keyed functions in the engine (protocol/src/keyed.ts, docs/keyed-workers.md): the engine owns
// the check that a call carries its key, so a call without one is answered `invalid_arguments` at
// once, whoever hosts the function and whichever door the call came in by (a socket, HTTP, a
// queue, a trigger). Where the instance lives is the host's business; the engine passes the key on.
import { type ErrorBody, type IIIError, keyFieldOf, keyOf } from "@iii-edge/protocol";
import type { FunctionRecord } from "./catalog.ts";

/** The key of a call to `fn`: undefined when `fn` is not keyed, an error body when the call cannot
 * name its instance (nothing runs), else the key. A stored declaration that no longer parses (it
 * was checked at registration) refuses the call rather than running it unkeyed. */
export function callKey(fn: FunctionRecord, data: unknown): string | undefined | { error: ErrorBody } {
  let field: string | undefined;
  try {
    field = keyFieldOf(fn.metadata);
  } catch (e) {
    return { error: (e as IIIError).toBody() };
  }
  if (field === undefined) return undefined;
  const key = keyOf(fn.id, field, data);
  return typeof key === "string" ? key : { error: key.toBody() };
}

/** Why a registration's keyed declaration cannot be honoured, or undefined. */
export function keyedDeclarationProblem(metadata: unknown): string | undefined {
  try {
    keyFieldOf(metadata);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}
