// Replayable turns (docs/cassettes.md): a finished turn exported as a cassette — what the model
// answered at each step and how each call was decided and answered — and replayed through the real
// orchestrator with no provider and no side effects, answering a diff of the new transcript against
// the recorded one. `cassette::export`, `cassette::replay`, and what the orchestrator asks the
// cassette worker during a replay.
import { z } from "zod";
import { approvalSettingsSchema } from "./approval-gate.ts";
import { agentMessageSchema, type AssistantMessage } from "./messages.ts";
import { MODES } from "./turn-orchestrator.ts";

/** The cassette format's version: a replay refuses a cassette of another. */
export const CASSETTE_VERSION = 1;
/** The provider id a replay's run names: `provider::cassette::stream` answers each model step from
 * the cassette, so the orchestrator's streaming path runs unchanged. */
export const CASSETTE_PROVIDER = "cassette";
/** Scratch sessions of replays are named `replay-<replay id>`. */
export const REPLAY_SESSION_PREFIX = "replay-";

/** Model steps a cassette holds: a run's `max_turns` is at most 1000, but a turn worth replaying by
 * hand is far shorter; past this the export refuses rather than build a cassette nobody reads. */
export const MAX_CASSETTE_STEPS = 200;
/** Calls per step: the batch a model can ask for in one answer (providers cap it well below). */
export const MAX_CASSETTE_CALLS_PER_STEP = 128;
/** A replay's policy override is YAML text, judged on every call of the replay: the size of a large
 * permissions file, not an unbounded parse per call. */
export const MAX_REPLAY_POLICY_CHARS = 64_000;
/** How long `cassette::replay` waits for the replayed run to end. Nothing waits on a model or a
 * function, so a replay takes a few queue hops per step; this bounds a wedged one. */
export const REPLAY_TIMEOUT_MS = 60_000;

const block = z.looseObject({ type: z.string().min(1) });

export const callGateSchema = z.object({
  policy: z.enum(["allow", "deny", "needs_approval", "none"]),
  policy_version: z.string().max(200).optional(),
  approval: z.enum(["allow", "deny", "aborted", "expired"]).optional(),
});

/** One call of a step: what the model asked, how the harness decided it, what came back. */
export const cassetteCallSchema = z.object({
  function_call_id: z.string().min(1).max(256),
  /** The function the call reached (`agent_trigger` unwrapped). */
  function_id: z.string().min(1).max(512),
  arguments: z.unknown(),
  /** The result the model read; null when the recorded turn has none (it ended first). */
  result: z.object({ content: z.array(block), details: z.unknown() }).nullable(),
  is_error: z.boolean(),
  /** Absent for turns recorded before the transcript kept it. */
  gate: callGateSchema.optional(),
});
export type CassetteCall = z.infer<typeof cassetteCallSchema>;

const assistantMessageSchema = z.looseObject({
  role: z.literal("assistant"),
  content: z.array(block),
  stop_reason: z.string(),
  model: z.string().optional(),
  provider: z.string().optional(),
  usage: z.unknown().optional(),
});

/** One model step: the final assistant message (with its usage; the stream's deltas are not kept)
 * and the calls it made, in the assistant's order. */
export const cassetteStepSchema = z.object({
  message: assistantMessageSchema.transform((m) => m as unknown as AssistantMessage),
  calls: z.array(cassetteCallSchema).max(MAX_CASSETTE_CALLS_PER_STEP),
});
export type CassetteStep = z.infer<typeof cassetteStepSchema>;

export const cassetteSchema = z.object({
  version: z.literal(CASSETTE_VERSION),
  exported_at_ms: z.number(),
  source: z.object({ session_id: z.string().min(1).max(128), turn_id: z.string().min(1).max(256) }),
  /** What the turn asked for (never its system prompt: the orchestrator does not hand it out). */
  request: z.object({
    provider: z.string().min(1).max(64),
    model: z.string().min(1).max(200),
    mode: z.enum(MODES).nullable(),
    max_turns: z.number().int().min(1).max(1000).optional(),
  }),
  /** The session's permission settings when it was exported (approval-gate's mode and lists), when
   * it had any of its own: a replay's scratch session gets the same, so a call the recorded session
   * allowed by its mode or lists is not reported as needing a person. */
  permissions: approvalSettingsSchema.omit({ mode_set_at: true }).optional(),
  /** The messages that started the turn (its seed user messages). */
  input: z.array(agentMessageSchema).max(1000),
  steps: z.array(cassetteStepSchema).min(1).max(MAX_CASSETTE_STEPS),
  final_state: z.enum(["stopped", "failed"]),
  /** The last step's text: what a person read at the end. */
  final_text: z.string(),
});
export type Cassette = z.infer<typeof cassetteSchema>;

export const cassetteExportRequest = z.object({
  session_id: z.string().min(1).max(128),
  /** The turn's run id (`run::status`'s `run_id`, the approval inbox's `turn_id`). */
  turn_id: z.string().min(1).max(256),
});

export const replayOverridesSchema = z
  .object({
    /** An `iii-permissions.yaml` text every call of the replay is judged under instead of the rules
     * in force (the structural floor still applies). */
    policy: z.string().min(1).max(MAX_REPLAY_POLICY_CHARS).optional(),
    system_prompt: z.string().max(200_000).optional(),
    /** The model the replayed steps are labelled with (their answers still come from the cassette). */
    model: z.string().min(1).max(200).optional(),
  })
  .strict();
export type ReplayOverrides = z.infer<typeof replayOverridesSchema>;

export const cassetteReplayRequest = z.object({ cassette: cassetteSchema, overrides: replayOverridesSchema.optional() });

export const DIFFERENCE_KINDS = [
  /** A call the recorded turn ran is now denied by the policy. */
  "call_denied",
  /** A call that ran on the policy's allow now waits for a person. */
  "call_needs_approval",
  /** A call that was denied or waited for a person is now allowed outright. */
  "call_allowed",
  /** The policy answered differently in another way (e.g. a denial became a question). */
  "policy_changed",
  "approval_changed",
  "argument_changed",
  "result_changed",
  /** A call one transcript has and the other does not. */
  "call_added",
  "call_missing",
  "step_added",
  "step_missing",
  "model_changed",
  "final_text_changed",
  "final_state_changed",
] as const;
export type DifferenceKind = (typeof DIFFERENCE_KINDS)[number];

export const replayDifferenceSchema = z.object({
  kind: z.enum(DIFFERENCE_KINDS),
  /** The model step (1-based) it is in. */
  step: z.number().int().min(1).optional(),
  function_call_id: z.string().optional(),
  function_id: z.string().optional(),
  before: z.unknown(),
  after: z.unknown(),
  /** One sentence a person reads. */
  text: z.string(),
});
export type ReplayDifference = z.infer<typeof replayDifferenceSchema>;

export const cassetteReplayResponse = z.object({
  same: z.boolean(),
  differences: z.array(replayDifferenceSchema),
  /** The differences as lines a person reads ("no difference" when there are none). */
  report: z.string(),
  replay: z.object({
    session_id: z.string(),
    turn_id: z.string(),
    state: z.string(),
  }),
});
export type CassetteReplayResponse = z.infer<typeof cassetteReplayResponse>;

// What the orchestrator asks the cassette worker while it runs a replay (the run's `replay_id`):
// calls are never invoked, they are answered from the cassette.

/** `cassette::check_permissions`: the policy's answer for a replayed call, under the replay's
 * policy override when it has one (`policy::check_permissions`'s request and answer otherwise). */
export const replayCheckRequest = z.object({
  replay_id: z.string().min(1).max(128),
  session_id: z.string().min(1).max(128),
  function_id: z.string().min(1),
  args: z.unknown().optional(),
  with_version: z.boolean().optional(),
});

/** `cassette::answer`: the recorded result of a call (by its call id), or a person's recorded
 * decision on it (`approval: true`). */
export const replayAnswerRequest = z.object({
  replay_id: z.string().min(1).max(128),
  session_id: z.string().min(1).max(128),
  function_call_id: z.string().min(1).max(256),
  function_id: z.string().min(1),
  approval: z.boolean().optional(),
});
export const replayAnswerResponse = z.union([
  z.object({ found: z.literal(true), result: z.object({ content: z.array(block), details: z.unknown() }), is_error: z.boolean() }),
  z.object({ found: z.literal(true), decision: z.enum(["allow", "deny", "aborted", "expired"]) }),
  z.object({ found: z.literal(false), reason: z.string() }),
]);
export type ReplayAnswer = z.infer<typeof replayAnswerResponse>;
