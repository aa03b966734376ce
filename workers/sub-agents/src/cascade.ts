// A parent's children: listing them with their states (`harness::children`), and stopping the live
// ones when the parent is stopped or its run ends (`harness::stop_children`, called by the
// orchestrator). Each child's `turn::stop` cascades to its own children in turn.
import type { AwaitingApproval, HarnessChildrenResponse, SubAgentChildView, TurnStopResponse } from "@iii-edge/protocol/harness";
import { SCOPE_LINKS, SCOPE_PARENTS, STOP_TIMEOUT_MS, TASK_PREVIEW_CHARS } from "./constants.ts";
import { awaitingOf, call, errorText, parentRecord, readState, readTurn, subAgentLink, type Trigger } from "./records.ts";

export async function listChildren(trigger: Trigger, parent: string): Promise<HarnessChildrenResponse> {
  const rec = await readState(trigger, { scope: SCOPE_PARENTS, key: parent }, parentRecord);
  const children = await Promise.all(
    (rec?.children ?? []).map(async (c): Promise<SubAgentChildView> => {
      const [link, t] = await Promise.all([
        readState(trigger, { scope: SCOPE_LINKS, key: c.child_session_id }, subAgentLink),
        readTurn(trigger, c.child_session_id),
      ]);
      const task = link?.task ?? "";
      const v: SubAgentChildView = {
        child_session_id: c.child_session_id,
        depth: link?.depth ?? 0,
        task: task.length > TASK_PREVIEW_CHARS ? `${task.slice(0, TASK_PREVIEW_CHARS)}…` : task,
        created_at_ms: c.created_at_ms,
        state: t?.state ?? null,
        turn_count: t?.turn_count ?? 0,
      };
      const awaiting: AwaitingApproval[] | undefined = t ? awaitingOf(t) : undefined;
      if (awaiting && awaiting.length > 0) v.awaiting_approval = awaiting;
      if (t?.error) v.error = { kind: t.error.kind, message: t.error.message };
      return v;
    }),
  );
  return { parent_session_id: parent, children };
}

/** `turn::stop` every child not known to have ended (in parallel, each best effort). */
export async function stopChildren(trigger: Trigger, parent: string): Promise<{ parent_session_id: string; stopped: string[] }> {
  const rec = await readState(trigger, { scope: SCOPE_PARENTS, key: parent }, parentRecord);
  const live = (rec?.children ?? []).filter((c) => !c.ended);
  const stopped: string[] = [];
  await Promise.all(
    live.map(async (c) => {
      try {
        const r = await call<TurnStopResponse>(trigger, "turn::stop", { session_id: c.child_session_id }, STOP_TIMEOUT_MS);
        if (r?.stopping) stopped.push(c.child_session_id);
      } catch (e) {
        console.warn(`sub-agents: turn::stop of ${c.child_session_id} (child of ${parent}) failed: ${errorText(e)}`);
      }
    }),
  );
  return { parent_session_id: parent, stopped: stopped.sort() };
}
