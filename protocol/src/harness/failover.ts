// Provider failover (docs/harness.md, "Provider failover"): a run may name models that take a step
// over when its own provider is rate-limited, down or failing before the first frame, once that
// provider's retries are spent.
import { z } from "zod";

/** At most this many fallbacks: each one is a full retry cycle against another provider, so a
 * longer chain only delays the error a user sees when everything is down. */
export const MAX_FALLBACK_MODELS = 4;

/** `"<provider>:<model>"`: a provider id as the providers worker registers it
 * (`provider::<id>::stream`), then the model id that provider knows. The model part may itself hold
 * colons (`lmstudio:org/model:q4`); the provider is what comes before the first one. */
export const fallbackModelRef = z
  .string()
  .max(265)
  .regex(/^[a-z][a-z0-9_-]{0,63}:\S.{0,199}$/, 'a fallback model is "<provider>:<model>", e.g. "anthropic:claude-sonnet-4-5"');

export const runOptions = z.object({ fallback_models: z.array(fallbackModelRef).max(MAX_FALLBACK_MODELS).optional() }).strict();
export type RunOptions = z.infer<typeof runOptions>;

/** The fields a run-starting request gains: spread into `runStartRequest.extend(...)` where it is parsed. */
export const runOptionsField = { options: runOptions.optional() };

export interface ModelRef {
  provider: string;
  model: string;
}

export function parseModelRef(ref: string): ModelRef {
  const at = ref.indexOf(":");
  return { provider: ref.slice(0, at), model: ref.slice(at + 1) };
}

/** Why a step left a provider for the next model. `circuit_open`: the provider was not called,
 * its breaker had opened after repeated failures. */
export type FailoverReason = "rate_limited" | "transient" | "circuit_open";

/** The `agent::events` entry of one switch. */
export interface ProviderFailoverEvent {
  type: "provider_failover";
  from: ModelRef;
  to: ModelRef;
  reason: FailoverReason;
  /** The failed provider's error, as its terminal frame told it. */
  message: string;
}

/** How a provider's terminal error begins when its circuit breaker is open: the stream made no
 * request. A caller with no fallback left fails with this text, at once. */
export const PROVIDER_CIRCUIT_OPEN = "provider_circuit_open";
