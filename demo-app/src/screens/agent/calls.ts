// The harness functions the agent screen calls, typed once. Everything goes through the tab's own
// worker connection (`iii.trigger`): the page needs no HTTP route and no credential of its own.
import {
  RUN_REQUEST,
  type AgentMessage,
  type ApprovalSettings,
  type AuthStatus,
  type PathMessage,
  type BudgetView,
  type PendingApprovalRecord,
  type PermissionMode,
  type HarnessChildrenResponse,
  type Model,
  type RunForkResponse,
  type RunRequestView,
  type RunResumeResponse,
  type SessionTree,
  type SetActiveLeafResponse,
  type TurnStateView,
  type TurnStopResponse,
} from "@iii-edge/protocol/harness";
import type { BrowserClient } from "@iii-edge/sdk-browser";
import type { SessionSummary } from "../../app/sessions.ts";

export type { SessionSummary };

/** Pages of the stored transcript one open reads (`session-tree::messages`, 500 a page). */
const MAX_TRANSCRIPT_PAGES = 20;
const TRANSCRIPT_PAGE = 500;

export type StoredMessage = Pick<PathMessage, "entry_id" | "message">;
export type AuthStatusView = AuthStatus;

export const userMessage = (text: string): AgentMessage => ({ role: "user", content: [{ type: "text", text }], timestamp: Date.now() });

export function harness(iii: BrowserClient) {
  const call = <T>(function_id: string, payload: unknown) => iii.trigger<unknown, T>({ function_id, payload });
  return {
    iii,
    models: () => call<Model[]>("models::list", {}),
    providers: () => call<{ providers: string[] }>("auth::list_providers", {}),
    authStatus: (provider: string) => call<AuthStatusView>("auth::status", { provider }),
    /** Write-only: the key goes to the credentials worker, which never gives it back to a page. */
    setKey: (provider: string, key: string) => call<{ ok: true }>("auth::set_token", { provider, type: "api_key", key }),
    sessions: () => call<{ sessions: SessionSummary[]; total: number }>("session-tree::list", { limit: 30 }),
    async transcript(session_id: string): Promise<StoredMessage[]> {
      const out: StoredMessage[] = [];
      let cursor: string | null | undefined;
      for (let i = 0; i < MAX_TRANSCRIPT_PAGES; i++) {
        const r = await call<{ messages: StoredMessage[]; next_cursor?: string | null } | undefined>("session-tree::messages", {
          session_id,
          limit: TRANSCRIPT_PAGE,
          include_custom: true,
          ...(cursor ? { cursor } : {}),
        });
        if (!r) break;
        out.push(...r.messages);
        cursor = r.next_cursor;
        if (!cursor) break;
      }
      return out;
    },
    state: async (session_id: string) => (await call<TurnStateView | null | undefined>("turn::get_state", { session_id })) ?? null,
    start: (p: { session_id: string; provider: string; model: string; text: string; budget_id?: string }) =>
      call<{ session_id: string; started: boolean; reason?: string }>("run::start", {
        session_id: p.session_id,
        message_id: `${p.session_id}-m1`,
        provider: p.provider,
        model: p.model,
        messages: [userMessage(p.text)],
        ...(p.budget_id ? { budget_id: p.budget_id } : {}),
      }),
    resume: (p: { session_id: string; text?: string; provider?: string; model?: string; budget_id?: string }) =>
      call<RunResumeResponse>("run::resume", {
        session_id: p.session_id,
        ...(p.text ? { message: p.text } : {}),
        ...(p.provider ? { provider: p.provider } : {}),
        ...(p.model ? { model: p.model } : {}),
        ...(p.budget_id ? { budget_id: p.budget_id } : {}),
      }),
    steer: (session_id: string, text: string) => call<{ ok: boolean }>("run::steer", { session_id, message: text }),
    stop: (session_id: string) => call<TurnStopResponse>("turn::stop", { session_id }),
    /** `args_hash`: the arguments the person was shown; an allow for others does not count (asked again). */
    resolve: (session_id: string, function_call_id: string, decision: "allow" | "deny", reason?: string, args_hash?: string) =>
      call<{ ok: boolean; error?: string }>("approval::resolve", {
        session_id,
        function_call_id,
        decision,
        ...(reason ? { reason } : {}),
        ...(args_hash ? { args_hash } : {}),
      }),
    approvalSettings: (session_id: string) =>
      call<{ settings: ApprovalSettings; source: "stored" | "defaults" }>("approval::get-settings", { session_id }),
    setMode: (session_id: string, mode: PermissionMode) => call<{ settings: ApprovalSettings }>("approval::set-mode", { session_id, mode }),
    approveAlways: (session_id: string, function_id: string) =>
      call<{ settings: ApprovalSettings }>("approval::approve-always", { session_id, function_id }),
    removeAlwaysAllow: (session_id: string, function_id: string) =>
      call<{ settings: ApprovalSettings }>("approval::remove-always-allow", { session_id, function_id }),
    pending: (session_id: string) => call<{ pending: PendingApprovalRecord[] }>("approval::list-pending", { session_id }),
    meta: (session_id: string) =>
      call<
        | {
            session_id: string;
            entry_count: number;
            leaf_id: string | null;
            origin?: { kind: string; source_session_id: string; from_entry_id: string | null };
          }
        | null
        | undefined
      >("session-tree::get", { session_id }),
    tree: (session_id: string) => call<SessionTree | undefined>("session-tree::tree", { session_id }),
    fork: (session_id: string, entry_id: string) =>
      call<RunForkResponse>("run::fork", { session_id, entry_id, request_key: `console-${Date.now()}` }),
    switchBranch: (session_id: string, entry_id: string) =>
      call<SetActiveLeafResponse>("session-tree::set_active_leaf", { session_id, entry_id }),
    children: (parent_session_id: string) => call<HarnessChildrenResponse>("harness::children", { parent_session_id }),
    /** What the last run asked for: the budget and the parent link (the orchestrator's `run::request`;
     * its state is its own). */
    runRequest: async (session_id: string) => (await call<RunRequestView | null | undefined>(RUN_REQUEST, { session_id })) ?? null,
    budget: (budget_id: string) => call<BudgetView>("budget::get", { budget_id }),
    budgets: () => call<{ budgets: BudgetView[] }>("budget::list", { limit: 50 }),
    createBudget: (ceiling_usd: number, name: string) =>
      call<{ budget_id: string; budget: BudgetView }>("budget::create", { ceiling_usd, period: "month", name }),
  };
}
export type Harness = ReturnType<typeof harness>;

/** An error as a person reads it: the engine's code and message. */
export function problem(e: unknown): string {
  if (e && typeof e === "object") {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof message === "string") return typeof code === "string" ? `${code}: ${message}` : message;
  }
  return String(e);
}
