// The turn-orchestrator worker (spec §1.2, §2; TS-7 ids and FSM, GREEN durability): one durable
// FSM per session, every fact of it in engine state, every step a `turn::<state>` message on the
// `turn-step` queue. Runs in workerd and in Node (Web APIs only).
import { runEventsRequest, runStartWithParentRequest, runSteerRequest, turnSessionRequest, type TurnState } from "@iii-edge/protocol/harness";
import { tracerOf, type WorkerModule, type WorkerSurface } from "@iii-edge/sdk-edge/worker";
import type { Trigger } from "./calls.ts";
import { SCOPE_APPROVALS } from "./constants.ts";
import { getState, onApproval, readEvents, steer, stopRun } from "./control.ts";
import { registerBranchFunctions } from "./branches.ts";
import { functionAwaitingApproval, functionExecute } from "./functions.ts";
import { registerHookPresence } from "./hooks.ts";
import { runStart } from "./run-start.ts";
import { assistantStreaming, provisioning, steeringCheck } from "./steps.ts";
import type { Tx } from "./store.ts";
import { runTransition, stepPayload, type StepPayload } from "./transition.ts";

export { TransientError } from "./calls.ts";
export { inferProvider } from "./streaming.ts";

export interface TurnOrchestratorConfig {
  /** Run ids when `run::start` has no message_id (injected in tests). */
  newRunId?: () => string;
}

const newRunIdDefault = (): string => `r${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;

export const worker: WorkerModule<TurnOrchestratorConfig> = {
  name: "turn-orchestrator",
  kernel: true,
  configFrom: () => ({}),
  register(iii: WorkerSurface, config: TurnOrchestratorConfig) {
    const newRunId = config.newRunId ?? newRunIdDefault;
    const tracer = tracerOf(iii);
    const steps: Record<Exclude<TurnState, "stopped" | "failed">, (tx: Tx) => Promise<void>> = {
      provisioning,
      assistant_streaming: (tx) => assistantStreaming(tx, iii.channels),
      function_execute: functionExecute,
      function_awaiting_approval: functionAwaitingApproval,
      steering_check: steeringCheck,
    };
    for (const [state, handler] of Object.entries(steps) as [TurnState, (tx: Tx) => Promise<void>][]) {
      iii.registerFunction(`turn::${state}`, (data: StepPayload, ctx) => runTransition(ctx.trigger as Trigger, state, data, handler, tracer), {
        description: `Turn step: the ${state} state of a session's run (queued on turn-step with {session_id, step})`,
        input: stepPayload,
      });
    }

    iii.registerFunction("run::start", (data: Parameters<typeof runStart>[1], ctx) => runStart({ trigger: ctx.trigger as Trigger, newRunId, tracer }, data), {
      description: "Start a run on a session: {session_id, model, messages, …} → {session_id, started} (started:false, reason session_busy, while a run is live)",
      input: runStartWithParentRequest,
    });
    iii.registerFunction("turn::get_state", (data: { session_id: string }, ctx) => getState(ctx.trigger as Trigger, data.session_id), {
      description: "The client view of a session's turn record ({session_id, state, turn_count, max_turns?, awaiting_approval?, error?}) or null",
      input: turnSessionRequest,
    });
    iii.registerFunction("turn::stop", (data: { session_id: string }, ctx) => stopRun(ctx.trigger as Trigger, data.session_id, tracer), {
      description: "Stop a session's run between steps: {session_id} → {session_id, stopping, state}",
      input: turnSessionRequest,
    });
    iii.registerFunction("run::steer", (data: { session_id: string; message: unknown }, ctx) => steer(ctx.trigger as Trigger, data.session_id, data.message), {
      description: "Queue a message for the running turn (inbox steering): {session_id, message} → {ok}",
      input: runSteerRequest,
    });
    iii.registerFunction("run::events", (data: { session_id: string; after?: string | null; limit?: number }, ctx) => readEvents(ctx.trigger as Trigger, data.session_id, data.after, data.limit), {
      description: "A session's agent::events after a cursor, in order: {session_id, after?, limit?} → {events:[{item_id, data}], next}",
      input: runEventsRequest,
    });
    iii.registerFunction("turn::on_approval", (data: unknown, ctx) => onApproval(ctx.trigger as Trigger, data, tracer), {
      description: "State trigger handler (scope approvals): wakes the parked session a decision belongs to",
    });
    iii.registerTrigger({ type: "state", function_id: "turn::on_approval", config: { scope: SCOPE_APPROVALS } });
    // run::resume, run::rerun_from, run::fork (branches.ts).
    registerBranchFunctions(iii, newRunId);
    registerHookPresence(iii);
  },
};
export default worker;
