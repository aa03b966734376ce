// A built-in function from its contract in protocol (BUILTINS, protocol/src/builtins.ts): the input
// is parsed with the contract's schema before the handler runs, the handler's result is typed by
// the output schema, and the `request_format` / `response_format` engine::functions::info publishes
// are derived from the same schemas — when first read, so an object waking up does not pay for them.
import { BUILTINS, builtinFormats, type BuiltinId, type BuiltinInput, type BuiltinOutput } from "@iii-edge/protocol";
import type { z } from "zod";
import type { BuiltinFunction, CallContext, EngineApi } from "../api.ts";
import { parseInput } from "./input.ts";

export interface BuiltinSpec<Id extends BuiltinId> {
  description: string;
  /** Hidden from default listings (iii: ids under `engine::`). */
  internal?: boolean;
  handler: (input: BuiltinInput<Id>, ctx: CallContext) => BuiltinOutput<Id> | Promise<BuiltinOutput<Id>>;
}

export function defineBuiltin<Id extends BuiltinId>(core: EngineApi, id: Id, spec: BuiltinSpec<Id>): void {
  // BuiltinInput<Id> is this schema's output by definition; TS cannot follow an index by a generic key.
  const schema = BUILTINS[id].input as z.ZodType<BuiltinInput<Id>>;
  const fn: BuiltinFunction = {
    id,
    description: spec.description,
    handler: (input, ctx) => spec.handler(parseInput(schema, input), ctx),
  };
  if (spec.internal) fn.internal = true;
  Object.defineProperties(fn, {
    request_format: { enumerable: true, get: () => builtinFormats(id).request_format },
    response_format: { enumerable: true, get: () => builtinFormats(id).response_format },
  });
  core.addBuiltin(fn);
}
