// The turn-orchestrator worker (docs/harness-contracts.md §1.2, §2): one durable FSM per session, every fact
// of it in engine state, every step a `turn::<state>` message on the `turn-step` queue (a delivery
// runs the steps its saves queue after it, transition.ts runSteps). Runs in
// workerd and in Node (Web APIs only).
import { configurePendingTimeout, pendingTimeoutFrom } from "./approvals.ts";
import { responseFormat } from "@iii-edge/protocol";
import {
  RUN_REQUEST,
  RUN_STATUS,
  TURN_SUBSCRIBE,
  TURN_UNSUBSCRIBE,
  runEventsRequest,
  runEventsResponse,
  runStartResponse,
  runStartWithParentRequest,
  runSteerRequest,
  runSteerResponse,
  turnGetStateResponse,
  turnSessionRequest,
  turnSubscribeRequest,
  turnUnsubscribeRequest,
  turnStopResponse,
  type TurnState,
  type TurnSubscribeRequest,
} from "@iii-edge/protocol/harness";
import { outputContract, runOptionsField } from "@iii-edge/protocol/harness";
import { tracerOf, type WorkerModule, type WorkerSurface } from "@iii-edge/sdk-edge/worker";
import type { Trigger } from "./calls.ts";
import { SCOPE_APPROVALS } from "./constants.ts";
import { getState, onApproval, readEvents, steer, stopRun } from "./control.ts";
import { registerBranchFunctions } from "./branches.ts";
import { functionAwaitingApproval, functionExecute } from "./functions.ts";
import { registerHookBindings } from "./hook-chain.ts";
import { registerHookPresence } from "./hooks.ts";
import { checkSession, OWNER_CHECKED } from "./owners.ts";
import { NOTIFY_SUBSCRIBER, notifySubscriber, runRequestView, runStatus, subscribe, unsubscribe } from "./public.ts";
import { runStart } from "./run-start.ts";
import { registerHarnessSurface } from "./surface.ts";
import { assistantStreaming, provisioning, steeringCheck } from "./steps.ts";
import type { Tx } from "./store.ts";
import { runSteps, stepPayload, type StepPayload } from "./transition.ts";

export { TransientError } from "./calls.ts";
export { inferProvider } from "./streaming.ts";

export interface TurnOrchestratorConfig {
  /** Run ids when `run::start` has no message_id (injected in tests). */
  newRunId?: () => string;
  /** Session ids of `harness::send` without one (injected in tests). */
  newSessionId?: () => string;
  /** The clock of `harness::send`'s idempotency keys (injected in tests). */
  now?: () => number;
}

const newSessionIdDefault = (): string => `s${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;
const newRunIdDefault = (): string => `r${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;

export const worker: WorkerModule<TurnOrchestratorConfig> = {
  name: "turn-orchestrator",
  kernel: true,
  configFrom: () => ({}),
  register(iii: WorkerSurface, config: TurnOrchestratorConfig) {
    const newRunId = config.newRunId ?? newRunIdDefault;
    configurePendingTimeout(pendingTimeoutFrom(iii.env));
    const tracer = tracerOf(iii);
    const steps: Record<Exclude<TurnState, "stopped" | "failed">, (tx: Tx) => Promise<void>> = {
      provisioning,
      assistant_streaming: (tx) => assistantStreaming(tx, iii.channels),
      function_execute: functionExecute,
      function_awaiting_approval: functionAwaitingApproval,
      steering_check: steeringCheck,
    };
    const chain = { handlers: steps, tracer, connectionEpoch: iii.connectionEpoch?.bind(iii) };
    for (const state of Object.keys(steps) as TurnState[]) {
      // A step is the orchestrator's own queue message: a caller with a grant must own the session too.
      iii.registerFunction(
        `turn::${state}`,
        async (data: StepPayload, ctx) => {
          await checkSession(ctx.trigger as Trigger, ctx.caller, data.session_id);
          return runSteps(ctx.trigger as Trigger, state, data, chain);
        },
        {
          description: `Turn step: the ${state} state of a session's run (queued on turn-step with {session_id, step, queued})`,
          input: stepPayload,
          metadata: OWNER_CHECKED,
        },
      );
    }

    iii.registerFunction(
      "run::start",
      (data: Parameters<typeof runStart>[1], ctx) =>
        runStart({ trigger: ctx.trigger as Trigger, newRunId, tracer, caller: ctx.caller }, data),
      {
        description:
          "Start a run on a session: {session_id, model, messages, …} → {session_id, started} (started:false, reason session_busy, while a run is live)",
        input: runStartWithParentRequest.extend({ ...runOptionsField, output: outputContract.optional() }),
        response_format: responseFormat(runStartResponse),
        metadata: OWNER_CHECKED,
      },
    );
    // Each of these first checks the caller against the session's owner (owners.ts).
    const owned =
      <D extends { session_id: string }, R>(run: (trigger: Trigger, data: D) => Promise<R>) =>
      async (data: D, ctx: { trigger: unknown; caller?: Parameters<typeof checkSession>[1] }) => {
        await checkSession(ctx.trigger as Trigger, ctx.caller, data.session_id);
        return run(ctx.trigger as Trigger, data);
      };
    iii.registerFunction(
      "turn::get_state",
      owned((trigger, data: { session_id: string }) => getState(trigger, data.session_id)),
      {
        description:
          "The client view of a session's turn record ({session_id, state, turn_count, max_turns?, awaiting_approval?, error?}) or null",
        input: turnSessionRequest,
        response_format: responseFormat(turnGetStateResponse),
        metadata: OWNER_CHECKED,
      },
    );
    // What others may know of a run and how they follow it (public.ts): nothing outside this
    // worker reads its scopes.
    iii.registerFunction(
      RUN_STATUS,
      owned((trigger, data: { session_id: string }) => runStatus(trigger, data.session_id)),
      {
        description:
          "A session's run as a worker following it needs it: {session_id} → {session_id, run_id, state, turn_count, max_turns?, stop_requested, awaiting_approval?, error?, final_text} or null",
        input: turnSessionRequest,
        metadata: OWNER_CHECKED,
      },
    );
    iii.registerFunction(
      RUN_REQUEST,
      owned((trigger, data: { session_id: string }) => runRequestView(trigger, data.session_id)),
      {
        description:
          "What a session's last run asked for: {session_id} → {provider, model, mode, max_turns?, skills?, isolation?, budget_id?, parent?} or null",
        input: turnSessionRequest,
        metadata: OWNER_CHECKED,
      },
    );
    iii.registerFunction(TURN_SUBSCRIBE, (data: TurnSubscribeRequest, ctx) => subscribe(ctx.trigger as Trigger, ctx.caller, data), {
      description:
        "Follow a session's run: {session_id, function_id, subscription_id} → {subscription_id}; function_id gets {subscription_id, session_id, event_type, state} after every change of the run's state, at least once and in order, until turn::unsubscribe",
      input: turnSubscribeRequest,
      metadata: OWNER_CHECKED,
    });
    iii.registerFunction(
      TURN_UNSUBSCRIBE,
      (data: { subscription_id: string }, ctx) => unsubscribe(ctx.trigger as Trigger, ctx.caller, data.subscription_id),
      {
        description: "End a turn::subscribe subscription: {subscription_id} → {removed}",
        input: turnUnsubscribeRequest,
        metadata: OWNER_CHECKED,
      },
    );
    iii.registerFunction(NOTIFY_SUBSCRIBER, (data: unknown, ctx) => notifySubscriber(ctx.trigger as Trigger, data, ctx.metadata), {
      description: "Internal: the state trigger handler of turn::subscribe's bindings (tells the subscriber its session's run changed)",
      metadata: { internal: true },
    });
    iii.registerFunction(
      "turn::stop",
      owned((trigger, data: { session_id: string }) => stopRun(trigger, data.session_id, tracer)),
      {
        description: "Stop a session's run between steps: {session_id} → {session_id, stopping, state}",
        input: turnSessionRequest,
        response_format: responseFormat(turnStopResponse),
        metadata: OWNER_CHECKED,
      },
    );
    iii.registerFunction(
      "run::steer",
      owned((trigger, data: { session_id: string; message: unknown }) => steer(trigger, data.session_id, data.message)),
      {
        description: "Queue a message for the running turn (inbox steering): {session_id, message} → {ok}",
        input: runSteerRequest,
        response_format: responseFormat(runSteerResponse),
        metadata: OWNER_CHECKED,
      },
    );
    iii.registerFunction(
      "run::events",
      owned((trigger, data: { session_id: string; after?: string | null; limit?: number }) =>
        readEvents(trigger, data.session_id, data.after, data.limit),
      ),
      {
        description: "A session's agent::events after a cursor, in order: {session_id, after?, limit?} → {events:[{item_id, data}], next}",
        input: runEventsRequest,
        response_format: responseFormat(runEventsResponse),
        metadata: OWNER_CHECKED,
      },
    );
    iii.registerFunction("turn::on_approval", (data: unknown, ctx) => onApproval(ctx.trigger as Trigger, data, tracer), {
      description: "State trigger handler (scope approvals): wakes the parked session a decision belongs to",
    });
    iii.registerTrigger({ type: "state", function_id: "turn::on_approval", config: { scope: SCOPE_APPROVALS } });
    // run::resume, run::rerun_from, run::fork (branches.ts).
    registerBranchFunctions(iii, newRunId);
    registerHookPresence(iii);
    registerHookBindings(iii);
    // iii's harness::send|run|stop|status (surface.ts), driving the same turn.
    registerHarnessSurface(iii, {
      newRunId,
      newSessionId: config.newSessionId ?? newSessionIdDefault,
      now: config.now ?? Date.now,
      tracer,
    });
  },
};
export default worker;
