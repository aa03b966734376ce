// The sub-agents worker (docs/harness-contracts.md §2.2 depth/parent/child_session_id, §2.7 cascade): a model delegates
// part of its task to a child session with its own turn loop (`harness::spawn`), waits for it
// without holding anything (`harness::join` parks its call like an approval), lists its children
// (`harness::children`); the child's events reach whoever follows the parent, and stopping or
// ending the parent stops the children. Every fact lives in engine state; the per-child triggers
// are engine-held. Runs in workerd and in Node (Web APIs only).
import {
  HARNESS_CHILDREN,
  HARNESS_JOIN,
  HARNESS_SPAWN,
  HARNESS_STOP_CHILDREN,
  JOIN_DEFAULT_TIMEOUT_MS,
  SUB_AGENT_MAX_DEPTH,
  SUB_AGENT_MAX_LIVE_CHILDREN,
  SUB_AGENT_MAX_PER_TREE,
  harnessCallOf,
  harnessChildrenRequest,
  harnessJoinRequest,
  harnessSpawnRequest,
  harnessStopChildrenRequest,
  subAgentModelCall,
  type HarnessJoinRequest,
  type HarnessSpawnRequest,
  type SubAgentModelCall,
  harnessSpawnResponse,
  harnessJoinResponse,
  harnessChildrenResponse,
} from "@iii-edge/protocol/harness";
import { assertSessionAccess, IIIError, type CallerPrincipal, formatIssues, responseFormat } from "@iii-edge/protocol";
import type { WorkerModule, WorkerSurface } from "@iii-edge/sdk-edge/worker";
import type { z } from "zod";
import { listChildren, stopChildren } from "./cascade.ts";
import { ON_CHILD_EVENT, ON_CHILD_STATE, SWEEP } from "./constants.ts";
import { onChildEvent, onChildState } from "./follow.ts";
import { join, sweep } from "./join.ts";
import type { Trigger } from "./records.ts";
import { parentOf, spawn } from "./spawn.ts";

export { childDepth, parentOf } from "./spawn.ts";
export * from "./constants.ts";

export interface SubAgentsConfig {
  /** The clock (tests). */
  now?: () => number;
}

const internal = { internal: true };
/** These act on a session's sub-agents: the engine tells them who calls, and the caller must be
 * allowed the parent session (its owner, a `sessions` grant, or trusted code). A child session
 * belongs to its parent's owner (run::start records it from the parent link). */
const ownerChecked = { caller_principal: true };
const internalOwnerChecked = { internal: true, caller_principal: true };

type Ctx = { trigger: unknown; caller?: CallerPrincipal; metadata?: unknown };
const allowed = (ctx: Ctx, sid: string) => assertSessionAccess((req) => (ctx.trigger as Trigger)(req), ctx.caller, sid);
/** The session a call about children names (`parent_session_id`, else the calling model's own), once
 * the caller may act on it. */
async function allowedParent(ctx: Ctx, data: { parent_session_id?: string }, what: string): Promise<string> {
  const parent = parentOf(data, what, modelCallOf(ctx));
  await allowed(ctx, parent);
  return parent;
}

/** The model's call this is, when the orchestrator dispatched it: its metadata names the calling
 * session and call (never the payload, which is the model's own arguments). */
function modelCallOf(ctx: Ctx): SubAgentModelCall | undefined {
  const call = harnessCallOf(ctx.metadata);
  if (!call) return undefined;
  const ids = subAgentModelCall.safeParse(call);
  if (!ids.success)
    throw new IIIError(
      "invalid_input",
      `this call's session or call id cannot name a sub-agent: ${formatIssues(ids.error, { all: true })}`,
    );
  return ids.data;
}

export function registerSubAgents(iii: WorkerSurface, config: SubAgentsConfig = {}): void {
  const now = config.now ?? Date.now;
  const trig = (ctx: { trigger: unknown }) => ctx.trigger as Trigger;

  iii.registerFunction(
    HARNESS_SPAWN,
    async (data: HarnessSpawnRequest, ctx) => {
      const modelCall = modelCallOf(ctx);
      await allowed(ctx, parentOf(data, HARNESS_SPAWN, modelCall));
      return spawn({ trigger: trig(ctx), now }, data, modelCall);
    },
    {
      description:
        "Delegate part of your task to a sub-agent: a new session with its own turn loop, working on `task` (its first user message) with your model unless you name one. " +
        `→ {child_session_id, started}. Then call ${HARNESS_JOIN} {child_session_id} to wait for its final answer. Sub-agents nest at most ${SUB_AGENT_MAX_DEPTH} deep, ` +
        `${SUB_AGENT_MAX_LIVE_CHILDREN} running at once per session, ${SUB_AGENT_MAX_PER_TREE} per run.`,
      input: harnessSpawnRequest,
      response_format: responseFormat(harnessSpawnResponse),
      metadata: ownerChecked,
    },
  );
  iii.registerFunction(
    HARNESS_JOIN,
    async (data: HarnessJoinRequest, ctx) => (
      await allowed(ctx, data.child_session_id), join({ trigger: trig(ctx), now }, data, modelCallOf(ctx))
    ),
    {
      description:
        "Wait for a sub-agent you spawned to finish: {child_session_id, timeout_ms?} → {state, final_message, turn_count, error?}. " +
        `Your call waits (without using your turns) until it ends, or timeout_ms passes (default ${JOIN_DEFAULT_TIMEOUT_MS / 60_000} min).`,
      input: harnessJoinRequest,
      response_format: responseFormat(harnessJoinResponse),
      metadata: ownerChecked,
    },
  );
  iii.registerFunction(
    HARNESS_CHILDREN,
    async (data: z.infer<typeof harnessChildrenRequest>, ctx) => listChildren(trig(ctx), await allowedParent(ctx, data, HARNESS_CHILDREN)),
    {
      description:
        "The sub-agents a session spawned, with their states: {parent_session_id?} → {parent_session_id, children:[{child_session_id, task, depth, state, turn_count, awaiting_approval?, error?}]}",
      input: harnessChildrenRequest,
      response_format: responseFormat(harnessChildrenResponse),
      metadata: ownerChecked,
    },
  );
  iii.registerFunction(
    HARNESS_STOP_CHILDREN,
    async (data: z.infer<typeof harnessStopChildrenRequest>, ctx) =>
      stopChildren(trig(ctx), await allowedParent(ctx, data, HARNESS_STOP_CHILDREN)),
    {
      description: "Internal (the orchestrator, when a run is stopped or ends): turn::stop every live sub-agent of a session",
      input: harnessStopChildrenRequest,
      metadata: internalOwnerChecked,
    },
  );
  iii.registerFunction(ON_CHILD_STATE, (data: unknown, ctx) => onChildState(trig(ctx), data, now()), {
    description: "Internal: the subscriber of a sub-agent's run (turn::subscribe; its end wakes the joins parked on it)",
    metadata: internal,
  });
  iii.registerFunction(ON_CHILD_EVENT, (data: unknown, ctx) => onChildEvent(trig(ctx), data), {
    description: "Internal: the stream trigger on a sub-agent's agent::events (mirrored to its ancestors as child_event)",
    metadata: internal,
  });
  iii.registerFunction(SWEEP, (_data: unknown, ctx) => sweep(trig(ctx), now()), {
    description: "Internal (a cron bound while joins are parked): wake parked joins that expired or whose sub-agent ended unnoticed",
    metadata: internal,
  });
}

export const worker: WorkerModule<SubAgentsConfig> = {
  name: "sub-agents",
  kernel: true,
  // What an agent may do on its own with its sub-agents (the policy still decides).
  modelCallable: [HARNESS_SPAWN, HARNESS_JOIN, HARNESS_CHILDREN],
  configFrom: () => ({}),
  register: (iii, config) => registerSubAgents(iii, config),
};
export default worker;
