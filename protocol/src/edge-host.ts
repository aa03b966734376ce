// Worker-hosted functions (sdk-edge `FunctionHost`), reached by the engine over a service binding:
// the manifest a host declares (`iiiManifest()`, read on start and on `engine::edge::refresh`) and
// one invocation (`iiiInvoke()`). The engine parses what a host answers with these schemas.
import { z } from "zod";
import { errorBody, registerFunction, registerTrigger, type ErrorBody } from "./frames.ts";
import { MAX_REGISTRATIONS_PER_WORKER } from "./limits.ts";

/** A function a host declares: a `registerfunction` frame without `type` and `invocation`, bounded
 * the same way. */
export const manifestFunction = registerFunction.omit({ type: true, invocation: true });
/** A trigger binding a host declares: a `registertrigger` frame without `type`. */
export const manifestTrigger = registerTrigger.omit({ type: true });
/** A host holds at most what one worker connection may register. */
export const edgeManifest = z.object({
  functions: z.array(manifestFunction).max(MAX_REGISTRATIONS_PER_WORKER),
  triggers: z.array(manifestTrigger).max(MAX_REGISTRATIONS_PER_WORKER),
  /** The Durable Object binding (sdk-edge `KeyedObjects`) this host's keyed functions run on. An
   * engine whose own Worker has that binding calls the object straight (`iiiKeyedInvoke`), one hop
   * less; otherwise it calls the host, which forwards. */
  keyed_objects: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/)
    .optional(),
});
export type ManifestFunction = z.infer<typeof manifestFunction>;
export type ManifestTrigger = z.infer<typeof manifestTrigger>;
export type EdgeManifest = z.infer<typeof edgeManifest>;

/** One invocation of a host's function, as the engine sends it. */
export interface EdgeInvokeRequest {
  function_id: string;
  data: unknown;
  metadata?: unknown;
  invocation_id: string;
  traceparent?: string;
  baggage?: string;
  /** The namespace whose engine invokes it: the host calls back into the same one. */
  namespace?: string;
  /** Nobody waits for the result (a discovery fire): the host answers `{}` at once and runs the
   * function after, as a worker runs an `invokefunction` without `invocation_id`. */
  void?: true;
  /** A keyed function's key (protocol/src/keyed.ts), taken from the payload and checked by the
   * engine: the host runs the call on the instance it names. */
  key?: string;
}

/** A host's answer; an undefined result is simply absent (RPC results are structured-cloned). */
export type EdgeInvokeResponse = { result?: unknown } | { error: ErrorBody };
export const edgeInvokeResponse: z.ZodType<EdgeInvokeResponse> = z.object({ result: z.unknown().optional(), error: errorBody.optional() });

/** What a host serves over its service binding (sdk-edge's `FunctionHost` implements it). */
export interface EdgeHost {
  iiiManifest(): Promise<EdgeManifest>;
  iiiInvoke(req: EdgeInvokeRequest): Promise<EdgeInvokeResponse>;
  /** The engine's side only: run a keyed call on object `instance` of the host's `keyed_objects`
   * binding directly; undefined when this engine's Worker has no such binding. */
  iiiKeyedInvoke?(objects: string, instance: string, req: EdgeInvokeRequest & { key: string }): Promise<EdgeInvokeResponse> | undefined;
}
