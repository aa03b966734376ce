// Beside the conversation: the budget the session is charged to (spent / remaining), the session
// tree (branches, fork from any entry, switch branch), the sub-agents the session spawned, and its
// approvals (mode, remembered approvals, calls waiting with their age).
import {
  PERMISSION_MODES,
  type ApprovalSettings,
  type BudgetView,
  type PendingApprovalRecord,
  type PermissionMode,
  type SessionTree,
  type SubAgentChildView,
  type TreeBranch,
  type TreeEntry,
} from "@iii-edge/protocol/harness";
import { useEffect, useState } from "preact/hooks";
import { MODE_HELP, pendingAge } from "./approvals.ts";

/** How often the ages of waiting calls are redrawn. */
const AGE_TICK_MS = 15_000;

export function BudgetPanel({ budget, budgetId, error }: { budget?: BudgetView | null; budgetId?: string; error?: string }) {
  return (
    <section class="ac-side" id="agent-budget-panel" aria-labelledby="ac-budget-h">
      <h3 id="ac-budget-h">Budget</h3>
      {!budgetId && <p class="ac-muted">This session is not charged to a budget.</p>}
      {budgetId && error && <p class="ac-error">{error}</p>}
      {budgetId && budget && (
        <dl class="ac-dl">
          <dt>budget</dt>
          <dd>{budget.name ?? budget.budget_id}</dd>
          <dt>spent</dt>
          <dd data-budget-spent={budget.spent_usd}>${budget.spent_usd.toFixed(4)}</dd>
          <dt>remaining</dt>
          <dd data-budget-remaining={budget.remaining_usd}>${budget.remaining_usd.toFixed(4)}</dd>
          <dt>ceiling</dt>
          <dd>
            ${budget.ceiling_usd.toFixed(2)} / {budget.period}
          </dd>
          {budget.paused && (
            <>
              <dt>state</dt>
              <dd>paused</dd>
            </>
          )}
        </dl>
      )}
    </section>
  );
}

function EntryRow(props: { entry: TreeEntry; isTip: boolean; onFork: (id: string) => void; onSwitch: (id: string) => void }) {
  const e = props.entry;
  return (
    <li class={`ac-entry${e.active ? " ac-entry-active" : ""}`} data-entry-id={e.entry_id} data-active={e.active ? "true" : undefined}>
      <span class="ac-entry-role">{e.role ?? e.kind}</span>{" "}
      <span class="ac-entry-preview">{e.preview ?? e.call ?? e.function_id ?? ""}</span>
      <span class="ac-entry-actions">
        <button
          type="button"
          class="btn btn-link"
          onClick={() => props.onFork(e.entry_id)}
          aria-label={`fork a new session from ${e.role ?? e.kind} entry`}
        >
          fork
        </button>
        {props.isTip && !e.active && (
          <button type="button" class="btn btn-link" data-switch={e.entry_id} onClick={() => props.onSwitch(e.entry_id)}>
            switch to this branch
          </button>
        )}
      </span>
    </li>
  );
}

function Branch(props: { branch: TreeBranch; onFork: (id: string) => void; onSwitch: (id: string) => void }) {
  const { branch } = props;
  const tip = branch.children.length === 0;
  return (
    <li class="ac-branch">
      <ol class="ac-entries">
        {branch.entries.map((e, i) => (
          <EntryRow
            key={e.entry_id}
            entry={e}
            isTip={tip && i === branch.entries.length - 1}
            onFork={props.onFork}
            onSwitch={props.onSwitch}
          />
        ))}
      </ol>
      {branch.truncated && <p class="ac-muted">… deeper branches not shown</p>}
      {branch.children.length > 0 && (
        <ul class="ac-branches">
          {branch.children.map((c) => (
            <Branch key={c.entries[0]?.entry_id ?? "empty"} branch={c} onFork={props.onFork} onSwitch={props.onSwitch} />
          ))}
        </ul>
      )}
    </li>
  );
}

export function TreePanel(props: {
  tree?: SessionTree | null;
  origin?: { source_session_id: string } | null;
  onFork: (id: string) => void;
  onSwitch: (id: string) => void;
  onResume?: () => void;
  onOpenSession: (sid: string) => void;
}) {
  const { tree } = props;
  const branches = tree ? countTips(tree.roots) : 0;
  return (
    <section class="ac-side" id="agent-tree" aria-labelledby="ac-tree-h" data-branches={branches}>
      <h3 id="ac-tree-h">
        Session tree{" "}
        {tree && (
          <small class="ac-muted">
            ({tree.entry_count} entr{tree.entry_count === 1 ? "y" : "ies"}, {branches} branch{branches === 1 ? "" : "es"})
          </small>
        )}
      </h3>
      {props.origin && (
        <p class="ac-muted" id="agent-origin">
          forked from{" "}
          <button type="button" class="btn btn-link" onClick={() => props.onOpenSession(props.origin!.source_session_id)}>
            {props.origin.source_session_id}
          </button>
        </p>
      )}
      {props.onResume && (
        <button type="button" class="btn btn-secondary" id="agent-resume" onClick={props.onResume}>
          Resume this session
        </button>
      )}
      {!tree && <p class="ac-muted">No entries yet.</p>}
      {tree && (
        <ul class="ac-branches ac-tree-root">
          {tree.roots.map((b) => (
            <Branch key={b.entries[0]?.entry_id ?? "empty"} branch={b} onFork={props.onFork} onSwitch={props.onSwitch} />
          ))}
        </ul>
      )}
    </section>
  );
}

function countTips(branches: TreeBranch[]): number {
  let n = 0;
  for (const b of branches) n += b.children.length === 0 ? 1 : countTips(b.children);
  return n;
}

export function ChildrenPanel(props: {
  children: SubAgentChildView[];
  onOpen: (sid: string) => void;
  onDecide: (sid: string, callId: string, d: "allow" | "deny") => void;
}) {
  if (props.children.length === 0) return null;
  return (
    <section class="ac-side" id="agent-children" aria-labelledby="ac-children-h">
      <h3 id="ac-children-h">Sub-agents</h3>
      <ul class="ac-children">
        {props.children.map((c) => (
          <li key={c.child_session_id} style={{ marginInlineStart: `${(c.depth - 1) * 1}rem` }} data-child={c.child_session_id}>
            <button type="button" class="btn btn-link" onClick={() => props.onOpen(c.child_session_id)}>
              {c.task.slice(0, 80) || c.child_session_id}
            </button>{" "}
            <span class={`ac-status ac-status-${c.state ?? "none"}`}>{c.state ?? "starting"}</span>{" "}
            <span class="ac-muted">
              {c.turn_count} round{c.turn_count === 1 ? "" : "s"}
            </span>
            {c.error && <p class="ac-error">{c.error.message}</p>}
            {(c.awaiting_approval ?? []).map((a) => (
              <div key={a.function_call_id} class="ac-approval" role="group" aria-label={`sub-agent approval for ${a.function_id}`}>
                <code>{a.function_id}</code>
                <button
                  type="button"
                  class="btn btn-primary"
                  onClick={() => props.onDecide(c.child_session_id, a.function_call_id, "allow")}
                >
                  Approve
                </button>
                <button type="button" class="btn btn-danger" onClick={() => props.onDecide(c.child_session_id, a.function_call_id, "deny")}>
                  Deny
                </button>
              </div>
            ))}
          </li>
        ))}
      </ul>
    </section>
  );
}

export function ApprovalsPanel(props: {
  settings?: ApprovalSettings | null;
  pending: PendingApprovalRecord[];
  onMode: (mode: PermissionMode) => void;
  onApproveAlways: (rec: PendingApprovalRecord) => void;
  onRemoveTrusted: (functionId: string) => void;
}) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (props.pending.length === 0) return;
    const t = setInterval(() => setNow(Date.now()), AGE_TICK_MS);
    return () => clearInterval(t);
  }, [props.pending.length]);
  const s = props.settings;
  return (
    <section class="ac-side" id="agent-approvals" aria-labelledby="ac-approvals-h" data-mode={s?.mode}>
      <h3 id="ac-approvals-h">Approvals</h3>
      {!s && <p class="ac-muted">Permission settings unavailable.</p>}
      {s && (
        <>
          <label for="agent-permission-mode">mode</label>{" "}
          <select
            id="agent-permission-mode"
            value={s.mode}
            onChange={(e) => props.onMode((e.target as HTMLSelectElement).value as PermissionMode)}
          >
            {PERMISSION_MODES.map((m) => (
              <option key={m} value={m}>
                {m}
              </option>
            ))}
          </select>
          <p class={s.mode === "full" ? "ac-error" : "ac-muted"} id="agent-mode-help">
            {MODE_HELP[s.mode]}
          </p>
          <h4>Remembered approvals</h4>
          {s.approved_always.length === 0 && <p class="ac-muted">None yet: “Approve always” on a waiting call adds one.</p>}
          <ul id="agent-approved-always">
            {s.approved_always.map((e) => (
              <li key={e.function_id}>
                <code>{e.function_id}</code>
              </li>
            ))}
          </ul>
          {s.always_allow.length > 0 && (
            <>
              <h4>Trusted in auto mode</h4>
              <ul id="agent-always-allow">
                {s.always_allow.map((e) => (
                  <li key={e.function_id}>
                    <code>{e.function_id}</code>{" "}
                    <button type="button" class="btn btn-link" onClick={() => props.onRemoveTrusted(e.function_id)}>
                      remove
                    </button>
                  </li>
                ))}
              </ul>
            </>
          )}
        </>
      )}
      <h4>Waiting for you</h4>
      {props.pending.length === 0 && <p class="ac-muted">No call is waiting.</p>}
      <ul id="agent-pending">
        {props.pending.map((p) => (
          <li key={p.function_call_id} data-pending={p.function_call_id}>
            <code>{p.function_id}</code> <span class="ac-muted ac-pending-age">{pendingAge(p, now)}</span>{" "}
            <button type="button" class="btn btn-link" onClick={() => props.onApproveAlways(p)}>
              Approve always
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}
