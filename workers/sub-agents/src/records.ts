// What this worker keeps in engine state, and how it reads a run (through the orchestrator's
// functions). Everything read back is parsed with a schema (never cast); every write of its own
// records is a compare-and-set, so a spawn, a join and a child's end racing on one record never
// lose a write.
import { z } from "zod";
import { errorCode, errorText } from "@iii-edge/protocol";
import {
  MODES,
  outputContract,
  RUN_REQUEST,
  RUN_STATUS,
  TURN_STATES,
  type AwaitingApproval,
  type TurnState,
} from "@iii-edge/protocol/harness";
import { CAS_ATTEMPTS, STORAGE_TIMEOUT_MS } from "./constants.ts";
import type { CasOptions, Trigger } from "@iii-edge/sdk-edge/worker";
export { casState, compareAndSet, readState } from "@iii-edge/sdk-edge/worker";

/** `ctx.trigger` inside a handler (keeps the caller's trace), `iii.trigger` outside one. */
export type { Trigger };

export { errorCode, errorText };

// ------------------------------------------------------------------ this worker's records

/** How a child's spending relates to its parent's budget (budget.ts). */
export const budgetLink = z.discriminatedUnion("mode", [
  z.object({ mode: z.literal("none"), requested_share: z.number().optional() }),
  /** The child runs on the parent's own budget: every cent it spends is the parent's. */
  z.object({
    mode: z.literal("shared"),
    parent_budget_id: z.string(),
    requested_share: z.number().optional(),
    reason: z.string().optional(),
  }),
  /** The child has a budget of its own capped at its share; its spend is charged to the parent's
   * budget when it ends (`settled`). */
  z.object({
    mode: z.literal("share"),
    parent_budget_id: z.string(),
    budget_id: z.string(),
    share: z.number(),
    ceiling_micros: z.number(),
    settled: z.boolean().optional(),
  }),
]);
export type BudgetLink = z.infer<typeof budgetLink>;

export const subAgentLink = z.object({
  child_session_id: z.string(),
  parent_session_id: z.string(),
  parent_run_id: z.string(),
  root_session_id: z.string(),
  root_run_id: z.string(),
  depth: z.number().int(),
  /** Parent first, root last: where the child's events are mirrored. */
  ancestors: z.array(z.string()),
  function_call_id: z.string().nullable(),
  task: z.string(),
  message_id: z.string(),
  provider: z.string().nullable(),
  model: z.string(),
  created_at_ms: z.number(),
  budget: budgetLink,
  /** What the child's run inherits (a repeated start sends the same). */
  run: z.object({
    mode: z.enum(MODES).nullable(),
    max_turns: z.number().int(),
    skills: z.array(z.string()).optional(),
    isolation: z.boolean().optional(),
    /** The child's output contract (spawn `options.output`) and fallbacks (spawn's, else the parent's). */
    output: outputContract.optional(),
    fallback_models: z.array(z.string()).optional(),
  }),
  /** Keys (`<parent>/<cid>`) of the waits parked on this child. */
  joiners: z.array(z.string()).catch([]),
  ended: z.object({ state: z.enum(TURN_STATES), at_ms: z.number() }).optional(),
  /** `state`: the `turn::subscribe` subscription following the child's run; `events`: the stream
   * trigger on its `agent::events` group. */
  triggers: z.object({ state: z.string(), events: z.string() }),
});
export type SubAgentLink = z.infer<typeof subAgentLink>;

export const parentEntry = z.object({
  child_session_id: z.string(),
  /** The parent's run that spawned it. */
  run_id: z.string(),
  created_at_ms: z.number(),
  ended: z.boolean().catch(false),
  /** Money set aside from the parent's budget for this child while it lives (budget share). */
  allotted_micros: z.number().optional(),
});
export type ParentEntry = z.infer<typeof parentEntry>;
export const parentRecord = z.object({ session_id: z.string(), children: z.array(parentEntry).catch([]) });
export type ParentRecord = z.infer<typeof parentRecord>;

export const joinWait = z.object({
  parent_session_id: z.string(),
  function_call_id: z.string(),
  child_session_id: z.string(),
  since_ms: z.number(),
  expires_at: z.number(),
  woken_at: z.number().optional(),
  woken_reason: z.string().optional(),
});
export type JoinWait = z.infer<typeof joinWait>;
export const waitKey = (parent: string, cid: string): string => `${parent}/${cid}`;

// ------------------------------------------------------------------ state helpers

/** One engine call with a deadline. */
export function call<T>(trigger: Trigger, function_id: string, payload: unknown, timeoutMs = STORAGE_TIMEOUT_MS): Promise<T> {
  return trigger<unknown, T>({ function_id, payload, timeoutMs });
}

/** How the records of this worker are compare-and-set (the kit's casState): parsed with their
 * schema, CAS_ATTEMPTS tries in all. */
export function casOptions<T>(schema: z.ZodType<T>): CasOptions<T> {
  return { schema, retries: CAS_ATTEMPTS - 1, timeoutMs: STORAGE_TIMEOUT_MS };
}

export async function deleteState(trigger: Trigger, scope: string, key: string): Promise<void> {
  await call(trigger, "state::delete", { scope, key });
}

// ------------------------------------------------------------------ the orchestrator's contract
// A run is read through the orchestrator's functions (`run::status`, `run::request`), never its
// state: whichever worker serves that contract is the orchestrator.

/** What this worker reads of a run (protocol RunStatus), leniently: a field it cannot read is
 * absent rather than the whole answer lost. */
const runStatus = z.looseObject({
  session_id: z.string(),
  state: z.enum(TURN_STATES),
  run_id: z.string().catch(""),
  turn_count: z.number().int().catch(0),
  stop_requested: z.boolean().optional().catch(undefined),
  error: z.object({ kind: z.string(), message: z.string() }).optional().catch(undefined),
  awaiting_approval: z
    .array(z.looseObject({ function_call_id: z.string(), function_id: z.string(), args: z.unknown() }))
    .optional()
    .catch(undefined),
  final_text: z.string().nullable().catch(null),
  result: z.unknown().optional(),
  result_error: z.string().optional().catch(undefined),
});
export type TurnRecordView = z.infer<typeof runStatus>;

export async function readTurn(trigger: Trigger, sid: string): Promise<TurnRecordView | undefined> {
  const raw = await call<unknown>(trigger, RUN_STATUS, { session_id: sid });
  if (raw === undefined || raw === null) return undefined;
  const r = runStatus.safeParse(raw);
  return r.success ? r.data : undefined;
}

export const isTerminalState = (s: TurnState | null | undefined): boolean => s === "stopped" || s === "failed";
/** A run that may still call functions: live and not asked to stop. */
export const isRunning = (t: TurnRecordView): boolean => !isTerminalState(t.state) && t.stop_requested !== true;

export const awaitingOf = (t: TurnRecordView): AwaitingApproval[] | undefined => t.awaiting_approval as AwaitingApproval[] | undefined;

/** The final assistant text of a run, or null when it has none. */
export const finalText = (t: TurnRecordView): string | null => t.final_text;

/** What a run asked for (protocol RunRequestView), leniently: the defaults a child inherits. */
const runRequest = z.looseObject({
  provider: z.string().optional().catch(undefined),
  model: z.string().optional().catch(undefined),
  mode: z.enum(MODES).nullable().optional().catch(undefined),
  max_turns: z.number().int().positive().optional().catch(undefined),
  skills: z.array(z.string()).optional().catch(undefined),
  isolation: z.boolean().optional().catch(undefined),
  budget_id: z.string().optional().catch(undefined),
  fallback_models: z.array(z.string()).optional().catch(undefined),
});
export type RunRequestView = z.infer<typeof runRequest>;

export async function readRunRequest(trigger: Trigger, sid: string): Promise<RunRequestView | undefined> {
  const raw = await call<unknown>(trigger, RUN_REQUEST, { session_id: sid });
  if (raw === undefined || raw === null) return undefined;
  const r = runRequest.safeParse(raw);
  return r.success ? r.data : undefined;
}
