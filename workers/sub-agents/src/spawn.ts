// `harness::spawn`: a child session with its own turn loop under a running parent. In order, each
// step safe to repeat: the limits (depth, live children, the tree), the child's entry on its
// parent (compare-and-set), its budget, its link, the subscription and the trigger that follow it,
// and `run::start` with the task as its user message. The child id comes from (parent, parent's run, call id), so a
// repeated spawn finds the child the first one made and starts nothing new.
import { IIIError } from "@iii-edge/protocol";
import {
  AGENT_EVENTS_STREAM,
  DEFAULT_MAX_TURNS,
  HARNESS_JOIN,
  SUB_AGENT_MAX_DEPTH,
  SUB_AGENT_MAX_LIVE_CHILDREN,
  SUB_AGENT_MAX_PER_TREE,
  TURN_SUBSCRIBE,
  type HarnessSpawnRequest,
  type HarnessSpawnResponse,
  type RunStartResponse,
  type SubAgentModelCall,
  type SubAgentParentLink,
} from "@iii-edge/protocol/harness";
import { subAgentMessageId, subAgentSessionId } from "./ids.ts";
import { allotment, createChildBudget, readParentBudget } from "./budget.ts";
import {
  MAX_ERROR_TEXT,
  ON_CHILD_EVENT,
  ON_CHILD_STATE,
  RUN_START_TIMEOUT_MS,
  SCOPE_LINKS,
  SCOPE_PARENTS,
  SCOPE_TREES,
  START_GRACE_MS,
  STORAGE_TIMEOUT_MS,
} from "./constants.ts";
import {
  call,
  casOptions,
  casState,
  compareAndSet,
  errorCode,
  isRunning,
  isTerminalState,
  parentRecord,
  readRunRequest,
  readState,
  readTurn,
  subAgentLink,
  type BudgetLink,
  type ParentEntry,
  type ParentRecord,
  type SubAgentLink,
  type Trigger,
} from "./records.ts";

/** Which session is the parent: the calling session when a model calls (the orchestrator names it
 * in the call's metadata; a model cannot), else the one a worker names. */
export function parentOf(req: { parent_session_id?: string }, what: string, modelCall?: Pick<SubAgentModelCall, "session_id">): string {
  const caller = modelCall?.session_id;
  const parent = req.parent_session_id ?? caller;
  if (!parent) throw new IIIError("invalid_input", `${what} needs parent_session_id (the session whose sub-agents these are)`);
  if (caller && caller !== parent)
    throw new IIIError("forbidden", `session ${caller} may only act on its own sub-agents, not on those of ${parent}`);
  return parent;
}

/** The depth a child of `parentLink` would have, or `depth_exceeded`. */
export function childDepth(parentLink: Pick<SubAgentLink, "depth"> | undefined): number {
  const depth = (parentLink?.depth ?? 0) + 1;
  if (depth > SUB_AGENT_MAX_DEPTH) {
    throw new IIIError(
      "depth_exceeded",
      `sub-agents nest at most ${SUB_AGENT_MAX_DEPTH} deep and this session is already at depth ${depth - 1}: it cannot spawn another; do this part of the task yourself`,
    );
  }
  return depth;
}

/** Whether a child entry is still running, as far as this worker knows: not marked ended, and its
 * record live (or not written yet by a spawn younger than START_GRACE_MS). */
async function isLive(trigger: Trigger, e: ParentEntry, now: number): Promise<boolean> {
  if (e.ended) return false;
  const t = await readTurn(trigger, e.child_session_id);
  if (!t) return now - e.created_at_ms < START_GRACE_MS;
  return !isTerminalState(t.state);
}

/** Entries worth keeping: the current run's (they count against its tree) and live older ones. */
function prune(children: ParentEntry[], runId: string, live: Set<string>): ParentEntry[] {
  return children.filter((c) => c.run_id === runId || live.has(c.child_session_id));
}

export interface SpawnDeps {
  trigger: Trigger;
  now?: () => number;
  /** Call ids for spawns that name none (a worker's direct call): not repeatable. */
  newCallId?: () => string;
}

/** `too_many_children` for the fan-out, naming what to do instead. */
const tooManyLive = (parent: string) =>
  new IIIError(
    "too_many_children",
    `session ${parent} already has ${SUB_AGENT_MAX_LIVE_CHILDREN} sub-agents running (the most at once): wait for one with ${HARNESS_JOIN} before spawning another`,
  );
const tooManyInTree = (root: string) =>
  new IIIError(
    "too_many_children",
    `${SUB_AGENT_MAX_PER_TREE} sub-agents were already spawned in this run of ${root} (the most per run, at every depth): finish the task with the ones you have`,
  );

/** `modelCall`: the orchestrator's call when a model spawns (its metadata), absent for a worker. */
export async function spawn(deps: SpawnDeps, req: HarnessSpawnRequest, modelCall?: SubAgentModelCall): Promise<HarnessSpawnResponse> {
  const { trigger } = deps;
  const now = deps.now?.() ?? Date.now();
  const parent = parentOf(req, "harness::spawn", modelCall);
  if (req.provider && !req.model) throw new IIIError("invalid_input", "give model together with provider (the child's model)");

  // (1) The parent must be running: a child lives only while its parent's run does.
  const parentTurn = await readTurn(trigger, parent);
  if (!parentTurn || !isRunning(parentTurn)) {
    throw new IIIError(
      "parent_not_running",
      `session ${parent} has no running turn (${parentTurn ? (parentTurn.stop_requested ? "it is stopping" : parentTurn.state) : "none"}): sub-agents are spawned from inside a run`,
    );
  }
  const parentRunId = parentTurn.run_id;
  const functionCallId = modelCall?.function_call_id ?? deps.newCallId?.() ?? `direct-${crypto.randomUUID()}`;
  const child = await subAgentSessionId(parent, parentRunId, functionCallId);
  const messageId = await subAgentMessageId(child);

  // (2) A repeat of this spawn: make sure its child runs, start nothing else.
  const existing = await readState(trigger, { scope: SCOPE_LINKS, key: child }, subAgentLink);
  if (existing) {
    await startChild(trigger, existing);
    return response(existing, true);
  }

  const parentLink = await readState(trigger, { scope: SCOPE_LINKS, key: parent }, subAgentLink);
  const depth = childDepth(parentLink);
  const root = parentLink?.root_session_id ?? parent;
  const rootRun = parentLink?.root_run_id ?? parentRunId;
  const parentReq = (await readRunRequest(trigger, parent)) ?? {};
  const model = req.model ?? parentReq.model;
  if (!model) throw new IIIError("invalid_input", `session ${parent}'s run names no model to inherit: give model`);

  // (3) The parent's budget, read before the entry is written (a share is computed against it).
  const parentBudgetId = parentReq.budget_id;
  const share = req.budget_share;
  const parentBudget = parentBudgetId && share !== undefined ? await readParentBudget(trigger, parentBudgetId) : undefined;

  // (4) The tree counter first (an atomic increment): a spawn past it is refused and given back.
  const treeKey = `${root}:${rootRun}`;
  const counted = await call<{ new_value?: { spawned?: unknown } }>(trigger, "state::update", {
    scope: SCOPE_TREES,
    key: treeKey,
    ops: [{ type: "increment", path: "spawned", by: 1 }],
  });
  const spawned = typeof counted?.new_value?.spawned === "number" ? counted.new_value.spawned : 1;
  const giveBack = () =>
    call(trigger, "state::update", { scope: SCOPE_TREES, key: treeKey, ops: [{ type: "decrement", path: "spawned", by: 1 }] }).catch(
      () => undefined,
    );
  if (spawned > SUB_AGENT_MAX_PER_TREE) {
    await giveBack();
    throw tooManyInTree(root);
  }

  // (5) The child's entry on its parent: the live-children bound and the budget allotment are
  // decided against the same version of the record they are written into.
  let budget: BudgetLink = parentBudgetId ? { mode: "shared", parent_budget_id: parentBudgetId } : { mode: "none" };
  if (share !== undefined) budget = { ...budget, requested_share: share };
  if (parentBudget && !parentBudget.ok && budget.mode === "shared") budget = { ...budget, reason: parentBudget.reason };
  let allotted: number | undefined;
  let listedBefore = false;
  try {
    await casState(
      trigger,
      { scope: SCOPE_PARENTS, key: parent },
      async (value) => {
        const rec: ParentRecord = value ?? { session_id: parent, children: [] };
        const prior = rec.children.find((c) => c.child_session_id === child);
        if (prior) {
          // An earlier delivery of this spawn listed it (and counted it in the tree) before it died.
          allotted = prior.allotted_micros;
          listedBefore = true;
          return undefined;
        }
        const liveFlags = await Promise.all(rec.children.map((c) => isLive(trigger, c, now)));
        const live = new Set(rec.children.filter((_, i) => liveFlags[i]).map((c) => c.child_session_id));
        if (live.size >= SUB_AGENT_MAX_LIVE_CHILDREN) throw tooManyLive(parent);
        const siblings = rec.children.map((c) => (live.has(c.child_session_id) ? c : { ...c, ended: true }));
        allotted = parentBudget?.ok && share !== undefined ? allotment(parentBudget, share, siblings) : undefined;
        const entry: ParentEntry = { child_session_id: child, run_id: parentRunId, created_at_ms: now, ended: false };
        if (allotted !== undefined) entry.allotted_micros = allotted;
        return { session_id: parent, children: [...prune(siblings, parentRunId, live), entry] };
      },
      { ...casOptions(parentRecord), giveUp: () => new IIIError("state_conflict", `the sub-agents of ${parent} kept changing; try again`) },
    );
    if (listedBefore) await giveBack();
  } catch (e) {
    await giveBack();
    throw e;
  }
  if (parentBudget?.ok && share !== undefined && allotted !== undefined) {
    try {
      budget = await createChildBudget(trigger, parentBudget, child, share, allotted);
    } catch (e) {
      budget = {
        mode: "shared",
        parent_budget_id: parentBudget.budget_id,
        requested_share: share,
        reason: `budget::create failed: ${errorCode(e) ?? "error"}`,
      };
    }
  }

  // (6) The link, then the triggers, then the run: a crash in between is repaired by a repeat.
  const link: SubAgentLink = {
    child_session_id: child,
    parent_session_id: parent,
    parent_run_id: parentRunId,
    root_session_id: root,
    root_run_id: rootRun,
    depth,
    ancestors: [parent, ...(parentLink?.ancestors ?? [])],
    function_call_id: modelCall?.function_call_id ?? null,
    task: req.task,
    message_id: messageId,
    provider: req.provider ?? (req.model ? null : (parentReq.provider ?? null)),
    model,
    created_at_ms: now,
    budget,
    run: {
      mode: req.mode ?? parentReq.mode ?? null,
      max_turns: childMaxTurns(req.max_turns ?? req.options?.max_turns, parentReq.max_turns),
    },
    joiners: [],
    triggers: { state: `sub-agents:state:${child}`, events: `sub-agents:events:${child}` },
  };
  // Inherited, never widened: a child of an isolated run is isolated too, with the parent's skills.
  if (parentReq.skills?.length) link.run.skills = parentReq.skills;
  if (parentReq.isolation) link.run.isolation = true;
  // iii's spawn options: the child's deliverable, and the parent's fallbacks unless the spawn names its own.
  if (req.options?.output) link.run.output = req.options.output;
  const fallbacks = req.options?.fallback_models ?? parentReq.fallback_models;
  if (fallbacks?.length) link.run.fallback_models = fallbacks;
  if (!(await compareAndSet(trigger, { scope: SCOPE_LINKS, key: child }, link, null, { timeoutMs: STORAGE_TIMEOUT_MS })).written) {
    const first = await readState(trigger, { scope: SCOPE_LINKS, key: child }, subAgentLink);
    if (!first) throw new IIIError("state_conflict", `the link of ${child} changed while it was written; try again`);
    await startChild(trigger, first);
    return response(first, true);
  }
  await startChild(trigger, link);
  return response(link, false);
}

/** A child runs at most as many rounds as its parent may. */
function childMaxTurns(asked: number | undefined, parentMax: number | undefined): number {
  const cap = parentMax ?? DEFAULT_MAX_TURNS;
  return Math.min(asked ?? cap, cap);
}

/** Follow the child (its run through the orchestrator's subscription, its events by a stream
 * trigger; both idempotent by id) and start its run (idempotent by message id: a repeat of the
 * same start answers busy with our own run already there). */
async function startChild(trigger: Trigger, link: SubAgentLink): Promise<void> {
  const child = link.child_session_id;
  await call(trigger, TURN_SUBSCRIBE, { session_id: child, function_id: ON_CHILD_STATE, subscription_id: link.triggers.state });
  await call(trigger, "engine::register_trigger", {
    id: link.triggers.events,
    trigger_type: "stream",
    function_id: ON_CHILD_EVENT,
    config: { stream_name: AGENT_EVENTS_STREAM, group_id: child },
  });
  const started = await readTurn(trigger, child);
  if (started?.run_id === link.message_id) return;
  const parentLink: SubAgentParentLink = {
    session_id: link.parent_session_id,
    run_id: link.parent_run_id,
    depth: link.depth,
    root_session_id: link.root_session_id,
  };
  if (link.function_call_id) parentLink.function_call_id = link.function_call_id;
  const payload: Record<string, unknown> = {
    session_id: child,
    message_id: link.message_id,
    model: link.model,
    messages: [{ role: "user", content: [{ type: "text", text: link.task }], timestamp: link.created_at_ms }],
    parent: parentLink,
  };
  if (link.provider) payload.provider = link.provider;
  if (link.run.mode) payload.mode = link.run.mode;
  payload.max_turns = link.run.max_turns;
  if (link.run.skills?.length) payload.skills = link.run.skills;
  if (link.run.isolation) payload.isolation = true;
  if (link.run.output) payload.output = link.run.output;
  if (link.run.fallback_models?.length) payload.options = { fallback_models: link.run.fallback_models };
  const budgetId =
    link.budget.mode === "share" ? link.budget.budget_id : link.budget.mode === "shared" ? link.budget.parent_budget_id : undefined;
  if (budgetId) payload.budget_id = budgetId;
  const r = await call<RunStartResponse>(trigger, "run::start", payload, RUN_START_TIMEOUT_MS);
  if (r.started) return;
  // Busy: our own run got there first (a racing repeat), or the id is someone else's session.
  const now = await readTurn(trigger, child);
  if (now?.run_id === link.message_id) return;
  throw new IIIError("child_session_busy", `session ${child} already runs something else`.slice(0, MAX_ERROR_TEXT));
}

function response(link: SubAgentLink, existing: boolean): HarnessSpawnResponse {
  const r: HarnessSpawnResponse = {
    child_session_id: link.child_session_id,
    started: true,
    depth: link.depth,
    child_turn_id: link.message_id,
    message: `Sub-agent ${link.child_session_id} is working on the task. Call ${HARNESS_JOIN} with {"child_session_id": "${link.child_session_id}"} to wait for its result.`,
  };
  if (existing) r.existing = true;
  const budgetId =
    link.budget.mode === "share" ? link.budget.budget_id : link.budget.mode === "shared" ? link.budget.parent_budget_id : undefined;
  if (budgetId) r.budget_id = budgetId;
  return r;
}

/** Mark a child ended on its parent's record (its allotment is free again). */
export async function markEndedOnParent(trigger: Trigger, parent: string, child: string): Promise<void> {
  await casState(
    trigger,
    { scope: SCOPE_PARENTS, key: parent },
    (cur) => {
      if (!cur) return undefined;
      const i = cur.children.findIndex((c) => c.child_session_id === child);
      if (i < 0 || cur.children[i].ended) return undefined;
      const children = cur.children.slice();
      children[i] = { ...children[i], ended: true };
      return { ...cur, children };
    },
    casOptions(parentRecord),
  );
}
