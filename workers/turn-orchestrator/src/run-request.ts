// `run_request/<sid>`: what a run asked for (docs/harness-contracts.md §1.2), enriched by provisioning. It
// doubles as run::start's claim on the session: written with compare-and-set before anything else,
// so of two starts racing on one idle session exactly one goes on.
import { z } from "zod";
import { MODES, type RunRequest } from "@iii-edge/protocol/harness";
import { fallbackModelRef, outputContract, type OutputContract } from "@iii-edge/protocol/harness";
import { compareAndSet } from "@iii-edge/sdk-edge/worker";
import { callRequired, requiredTrigger, type Trigger } from "./calls.ts";
import { SCOPE_RUN_REQUEST, STORAGE_TIMEOUT_MS } from "./constants.ts";

/** The stored form: the contract's RunRequest plus the run it belongs to and when it was claimed. */
export type StoredRunRequest = RunRequest & {
  run_id: string;
  requested_at_ms: number;
  /** `options.fallback_models` of run::start, as given (`"<provider>:<model>"`, in order). */
  fallback_models?: string[];
  /** The turn's output contract (`harness::send` / `harness::spawn` `options.output`). */
  output?: OutputContract;
};

const stored = z.looseObject({
  provider: z.string(),
  model: z.string(),
  mode: z.enum(MODES).nullable().catch(null),
  system_prompt: z.string().catch(""),
  function_schemas: z.array(z.looseObject({ name: z.string(), description: z.string().catch(""), parameters: z.unknown() })).catch([]),
  max_turns: z.number().int().positive().optional().catch(undefined),
  skills: z.array(z.string()).optional().catch(undefined),
  isolation: z.boolean().optional().catch(undefined),
  budget_id: z.string().optional().catch(undefined),
  message_id: z.string().optional().catch(undefined),
  sandbox_id: z.string().optional().catch(undefined),
  fallback_models: z.array(fallbackModelRef).optional().catch(undefined),
  output: outputContract.optional().catch(undefined),
  replay_id: z.string().optional().catch(undefined),
  run_id: z.string().catch(""),
  requested_at_ms: z.number().catch(0),
});

export function parseRunRequest(value: unknown): StoredRunRequest | undefined {
  if (value === undefined || value === null) return undefined;
  const r = stored.safeParse(value);
  return r.success ? (r.data as StoredRunRequest) : undefined;
}

export interface LoadedRunRequest {
  req: StoredRunRequest | undefined;
  raw: unknown;
}

export async function loadRunRequest(trigger: Trigger, sid: string): Promise<LoadedRunRequest> {
  const raw = await callRequired<unknown>(trigger, "state::get", { scope: SCOPE_RUN_REQUEST, key: sid });
  return { req: parseRunRequest(raw), raw: raw ?? null };
}

/** The run request a step needs; its absence is a broken invariant. */
export async function requireRunRequest(trigger: Trigger, sid: string): Promise<StoredRunRequest> {
  const { req } = await loadRunRequest(trigger, sid);
  if (!req) throw new Error(`no run request stored for ${sid}`);
  return req;
}

/** Compare-and-set write; false when someone else wrote it first. */
export async function casRunRequest(trigger: Trigger, sid: string, value: StoredRunRequest | null, expected: unknown): Promise<boolean> {
  const ref = { scope: SCOPE_RUN_REQUEST, key: sid };
  return (await compareAndSet(requiredTrigger(trigger), ref, value, expected, { timeoutMs: STORAGE_TIMEOUT_MS })).written;
}

/** An unconditional write (provisioning's enriched request, inside the run's own step). */
export async function saveRunRequest(trigger: Trigger, sid: string, value: StoredRunRequest): Promise<void> {
  await callRequired(trigger, "state::set", { scope: SCOPE_RUN_REQUEST, key: sid, value });
}
