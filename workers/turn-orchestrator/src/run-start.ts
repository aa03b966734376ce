// `run::start` (docs/harness-contracts.md §1.2): busy guard, claim, session, run request, seed messages, and
// the fresh record whose save enqueues `turn::provisioning`. Returns at once; the run goes on in
// the queue.
import {
  DEFAULT_MAX_TURNS,
  type RunStartRequest,
  type RunStartResponse,
  type SubAgentParentLink,
  type TurnStateRecord,
} from "@iii-edge/protocol/harness";
import type { CallerPrincipal } from "@iii-edge/protocol";
import type { OutputContract, RunOptions } from "@iii-edge/protocol/harness";
import { compareAndSet, type Tracer } from "@iii-edge/sdk-edge/worker";
import { errorText, type Trigger } from "./calls.ts";
import { SCOPE_SESSION_INDEX, START_CLAIM_TTL_MS, STORAGE_TIMEOUT_MS } from "./constants.ts";
import { normaliseMessage } from "./messages.ts";
import { isTerminal, seedEntryId } from "./record.ts";
import { ownForRun } from "./owners.ts";
import { casRunRequest, loadRunRequest, type StoredRunRequest } from "./run-request.ts";
import { StateConflict, loadRecord, Tx } from "./store.ts";
import { inferProvider } from "./streaming.ts";
import { appendMany, ensureSession } from "./transcript.ts";
import { beginTurnTrace, inTurn } from "./trace.ts";
import { fireTurnStarted } from "./turn-events.ts";

export interface StartDeps {
  trigger: Trigger;
  newRunId: () => string;
  /** The run's spans (./trace.ts); none when absent. */
  tracer?: Tracer;
  /** Who asked (the engine-stamped principal); absent: trusted code of this deployment. */
  caller?: CallerPrincipal;
}

const busy = (session_id: string): RunStartResponse => ({ session_id, started: false, reason: "session_busy" });

/** `session_index/<sid>` once per session (its `state:created` is the harness's "new session"
 * fan-out, §7 item 4): a create-if-absent, so later runs write nothing. */
async function markSessionCreated(trigger: Trigger, sid: string): Promise<void> {
  // Not written: the session was marked before (a lost race is that too).
  await compareAndSet(trigger, { scope: SCOPE_SESSION_INDEX, key: sid }, { session_id: sid, created_at_ms: Date.now() }, null, {
    timeoutMs: STORAGE_TIMEOUT_MS,
  }).catch((e: unknown) => console.warn(`turn-orchestrator: session_index/${sid} not written: ${errorText(e)}`));
}

export async function runStart(
  deps: StartDeps,
  input: RunStartRequest & { parent?: SubAgentParentLink; options?: RunOptions; output?: OutputContract },
): Promise<RunStartResponse> {
  const { trigger } = deps;
  const sid = input.session_id;
  const now = Date.now();
  const loaded = await loadRecord(trigger, sid);
  const prev = await loadRunRequest(trigger, sid);
  // (0) Ownership, before anything that would tell a stranger about the session: a new session
  // becomes the caller's (a sub-agent's, its parent's owner's); someone else's is refused.
  const owner = await ownForRun(trigger, deps.caller, sid, !loaded && !prev.raw, input.parent);
  // (1) Busy guard: a live record, or a start that claimed the session moments ago, wins.
  if (loaded && !isTerminal(loaded.rec.state)) return busy(sid);
  const claimInFlight = prev.req && prev.req.run_id !== loaded?.rec.run_id && now - prev.req.requested_at_ms < START_CLAIM_TTL_MS;
  if (claimInFlight) return busy(sid);
  const runId = input.message_id ?? deps.newRunId();
  // The same message already ran to the end: a repeat of a finished request starts nothing.
  if (loaded && loaded.rec.run_id === runId) return busy(sid);

  // (2) The run request doubles as the claim: compare-and-set against what was read.
  const req: StoredRunRequest & { parent?: SubAgentParentLink } = {
    provider: input.provider ?? inferProvider(input.model),
    model: input.model,
    mode: input.mode ?? null,
    system_prompt: input.system_prompt ?? "",
    function_schemas: [],
    max_turns: input.max_turns ?? DEFAULT_MAX_TURNS,
    run_id: runId,
    requested_at_ms: now,
  };
  if (input.skills) req.skills = input.skills;
  if (input.isolation !== undefined) req.isolation = input.isolation;
  if (input.budget_id) req.budget_id = input.budget_id;
  if (input.message_id) req.message_id = input.message_id;
  if (input.options?.fallback_models?.length) req.fallback_models = input.options.fallback_models;
  if (input.output) req.output = input.output;
  if (input.replay_id) req.replay_id = input.replay_id;
  // A sub-agent's run (harness::spawn) records who spawned it; informational, see children.ts.
  if (input.parent) req.parent = input.parent;
  if (!(await casRunRequest(trigger, sid, req, prev.raw))) return busy(sid);

  let saving = false;
  // The run's trace begins here, in the context run::start was called in (the caller's request):
  // the record keeps its invoke_agent span, and what follows — the first step's queue message too —
  // is its child.
  const rec: TurnStateRecord = {
    session_id: sid,
    state: "provisioning",
    step: 0,
    turn_count: 0,
    max_turns: req.max_turns,
    last_assistant: null,
    function_results: [],
    turn_end_emitted: false,
    started_at_ms: now,
    updated_at_ms: now,
    run_id: runId,
  };
  if (input.output) rec.output = input.output;
  if (input.replay_id) rec.replay_id = input.replay_id;
  const tracer = deps.tracer;
  if (tracer) beginTurnTrace(tracer, rec, tracer.current()?.traceparent);
  try {
    await inTurn(tracer, rec, () => seedAndSave());
  } catch (e) {
    // Give the claim back (best effort) so the next start is not refused for START_CLAIM_TTL_MS —
    // unless the record write was attempted: it may have landed, and its run needs this request.
    if (!saving || e instanceof StateConflict)
      await casRunRequest(trigger, sid, (prev.raw ?? null) as StoredRunRequest | null, req).catch(() => undefined);
    if (e instanceof StateConflict) return busy(sid);
    throw e;
  }
  return { session_id: sid, started: true };

  async function seedAndSave(): Promise<void> {
    await ensureSession(trigger, sid, owner);
    const seeds = input.messages.map((m) => normaliseMessage(m, now));
    await appendMany(
      trigger,
      sid,
      seeds.map((message, i) => ({ entry_id: seedEntryId(runId, i), message })),
    );
    const tx = new Tx(trigger, sid, loaded, rec, tracer);
    // These report the appended seed entries (already stored), so they go out before the save:
    // the provisioning step the save wakes can then never get ahead of them.
    tx.events.emit({ type: "agent_start" });
    for (const message of seeds) {
      tx.events.emit({ type: "message_start", message });
      tx.events.emit({ type: "message_end", message });
    }
    await tx.events.flush();
    saving = true;
    await tx.save();
    await markSessionCreated(trigger, sid);
    await tx.events.flush();
    // The record was created by this compare-and-set: the turn's one `harness::turn_started`.
    await fireTurnStarted(trigger, rec);
  }
}
