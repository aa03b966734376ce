// What the agent screen shows of one session, built from two sources: the stored transcript
// (`session-tree::messages`, the active path — the truth once a turn has ended) and the live
// `agent::events` that came after it was read (the streaming reply, calls as they run, approvals).
// Both become keyed items; the view is the history followed by the live items it does not already
// hold, so a message seen live and then read back from storage shows once. Pure functions: the
// screen keeps the state, this file says what each input does to it.
import type {
  AgentMessage,
  AssistantMessage,
  AwaitingApproval,
  ContentBlock,
  ProviderFailoverEvent,
  TurnStateView,
} from "@iii-edge/protocol/harness";
import type { EventItem } from "./follow.ts";

export type CallStatus = "proposed" | "running" | "awaiting" | "done" | "error";

export interface CallView {
  id: string;
  function_id: string;
  args: unknown;
  status: CallStatus;
  result?: unknown;
  duration_ms?: number;
  /** A sub-agent join: the call waits for this child, not for a person. */
  child_session_id?: string;
}

export type Item =
  | { kind: "user"; key: string; text: string }
  | {
      kind: "assistant";
      key: string;
      text: string;
      thinking: string;
      stop_reason?: string;
      error?: string;
      model?: string;
      /** The provider that served this step: after a failover, a fallback's, not the run's own. */
      provider?: string;
    }
  | { kind: "call"; key: string; id: string }
  | { kind: "notice"; key: string; text: string }
  /** A step that left its provider for the next fallback model. */
  | { kind: "failover"; key: string; from: string; to: string; reason: string; text: string };

export interface SessionView {
  history: Item[];
  live: Item[];
  /** The reply being streamed, as its latest partial (each delta carries the whole partial). */
  streaming: AssistantMessage | null;
  calls: Record<string, CallView>;
  /** Item key → the stored entry it came from (history items only). */
  entryOf: Record<string, string>;
  state: TurnStateView | null;
  /** Bumped when the stored transcript should be read again (a turn or run ended). */
  historyDirty: number;
  /** Events applied (for the page's own counters and the bench). */
  eventCount: number;
  /** The last event item applied: a follower started again (after a reconnect) resumes after it,
   * and anything at or before it is not applied twice. */
  lastItemId: string | null;
}

export const emptyView = (): SessionView => ({
  history: [],
  live: [],
  streaming: null,
  calls: {},
  entryOf: {},
  state: null,
  historyDirty: 0,
  eventCount: 0,
  lastItemId: null,
});

const textOfBlocks = (content: unknown, type: "text" | "thinking" = "text"): string => {
  if (typeof content === "string") return type === "text" ? content : "";
  if (!Array.isArray(content)) return "";
  return (content as ContentBlock[])
    .filter((b) => b && b.type === type)
    .map((b) => (b as { text?: string }).text ?? "")
    .join("");
};

/** The function a model's call reaches: the harness's one tool names it in its arguments. */
export function callTarget(block: { function_id: string; arguments: unknown }): { function_id: string; args: unknown } {
  if (block.function_id === "agent_trigger" && block.arguments && typeof block.arguments === "object") {
    const a = block.arguments as { function?: unknown; payload?: unknown };
    if (typeof a.function === "string") return { function_id: a.function, args: a.payload ?? {} };
  }
  return { function_id: block.function_id, args: block.arguments };
}

const messageKey = (m: AgentMessage) => `${m.role}:${m.timestamp}`;

/** Items of one message; function results update `calls` and add no item of their own. */
function itemsOf(m: AgentMessage, calls: Record<string, CallView>, defaultStatus: CallStatus): Item[] {
  if (m.role === "user") return [{ kind: "user", key: messageKey(m), text: textOfBlocks(m.content) }];
  if (m.role === "custom") return [{ kind: "notice", key: messageKey(m), text: m.display ?? m.custom_type }];
  if (m.role === "function_result") {
    const prev = calls[m.function_call_id];
    calls[m.function_call_id] = {
      ...prev,
      args: prev?.args,
      id: m.function_call_id,
      function_id: m.function_id ?? prev?.function_id ?? "?",
      status: m.is_error ? "error" : "done",
      result: { content: m.content, details: m.details },
    };
    return [];
  }
  const out: Item[] = [];
  const text = textOfBlocks(m.content);
  const thinking = textOfBlocks(m.content, "thinking");
  if (text || thinking || m.stop_reason === "error") {
    out.push({
      kind: "assistant",
      key: messageKey(m),
      text,
      thinking,
      stop_reason: m.stop_reason,
      error: m.error_message ?? undefined,
      model: m.model,
      provider: m.provider,
    });
  }
  for (const b of m.content ?? []) {
    if (b.type !== "function_call") continue;
    const t = callTarget(b);
    if (!calls[b.id]) calls[b.id] = { id: b.id, function_id: t.function_id, args: t.args, status: defaultStatus };
    out.push({ kind: "call", key: `call:${b.id}`, id: b.id });
  }
  return out;
}

/** The stored transcript (oldest first) as the view's history; each item remembers its entry
 * (what fork-from-here forks at). */
export function withHistory(view: SessionView, stored: { entry_id: string; message: AgentMessage }[]): SessionView {
  const calls = { ...view.calls };
  const entryOf: Record<string, string> = {};
  const history: Item[] = [];
  for (const s of stored) {
    for (const item of itemsOf(s.message, calls, "proposed")) {
      entryOf[item.key] = s.entry_id;
      history.push(item);
    }
  }
  const keys = new Set(history.map((i) => i.key));
  return { ...view, history, calls, entryOf, live: view.live.filter((i) => !keys.has(i.key)) };
}

const ensureCall = (live: Item[], id: string): Item[] =>
  live.some((i) => i.kind === "call" && i.id === id) ? live : [...live, { kind: "call", key: `call:${id}`, id }];

function markAwaiting(calls: Record<string, CallView>, awaiting: AwaitingApproval[] | undefined): Record<string, CallView> {
  if (!awaiting?.length) return calls;
  const out = { ...calls };
  for (const a of awaiting) {
    const child = (a as AwaitingApproval & { child_session_id?: string }).child_session_id;
    out[a.function_call_id] = {
      ...out[a.function_call_id],
      args: out[a.function_call_id]?.args ?? a.args,
      id: a.function_call_id,
      function_id: a.function_id,
      status: "awaiting",
      ...(child ? { child_session_id: child } : {}),
    };
  }
  return out;
}

const FAILOVER_REASON_TEXT: Record<ProviderFailoverEvent["reason"], string> = {
  rate_limited: "was rate-limited",
  transient: "failed before answering",
  circuit_open: "is paused by its circuit breaker after repeated failures",
};

/** A failover as the transcript shows it: which model gave up, why, and which took the step. Keyed
 * by its event item, so the same switch read again (a reconnect) shows once. */
export function failoverItem(itemId: string, e: ProviderFailoverEvent): Item {
  const from = `${e.from.provider}:${e.from.model}`;
  const to = `${e.to.provider}:${e.to.model}`;
  const why = FAILOVER_REASON_TEXT[e.reason] ?? e.reason;
  return { kind: "failover", key: `failover:${itemId}`, from, to, reason: e.reason, text: `${from} ${why}; ${to} takes this step` };
}

/** Apply a batch of events (id order). One new object per batch, so a frame renders once. */
export function withEvents(view: SessionView, items: EventItem[]): SessionView {
  let { live, streaming, state, historyDirty, lastItemId } = view;
  let applied = 0;
  let calls = view.calls;
  let copied = false;
  const writable = () => {
    if (!copied) {
      calls = { ...calls };
      copied = true;
    }
    return calls;
  };
  const add = (more: Item[]) => {
    const keys = new Set(live.map((i) => i.key));
    const fresh = more.filter((i) => !keys.has(i.key));
    if (fresh.length) live = [...live, ...fresh];
  };
  for (const { item_id, data: e } of items) {
    if (lastItemId !== null && item_id <= lastItemId) continue;
    lastItemId = item_id;
    applied++;
    switch (e.type) {
      case "message_start":
        if (e.message.role === "user") add(itemsOf(e.message, writable(), "proposed"));
        break;
      case "message_update":
        if (e.message.role === "assistant") streaming = e.message;
        break;
      case "message_complete":
        streaming = null;
        add(itemsOf(e.message, writable(), "proposed"));
        break;
      case "function_execution_start": {
        const c = writable();
        c[e.function_call_id] = {
          ...c[e.function_call_id],
          id: e.function_call_id,
          function_id: e.function_id,
          args: e.args,
          status: "running",
        };
        live = ensureCall(live, e.function_call_id);
        break;
      }
      case "function_execution_end": {
        const c = writable();
        c[e.function_call_id] = {
          ...c[e.function_call_id],
          id: e.function_call_id,
          function_id: e.function_id,
          args: c[e.function_call_id]?.args,
          status: e.is_error ? "error" : "done",
          result: e.result,
          duration_ms: e.duration_ms,
        };
        live = ensureCall(live, e.function_call_id);
        break;
      }
      case "turn_state_changed": {
        state = e.new_value;
        const before = calls;
        calls = markAwaiting(calls, e.new_value.awaiting_approval);
        if (calls !== before) copied = true;
        for (const a of e.new_value.awaiting_approval ?? []) live = ensureCall(live, a.function_call_id);
        if (e.new_value.state === "stopped" || e.new_value.state === "failed") streaming = null;
        break;
      }
      case "compaction_done":
        add([
          { kind: "notice", key: `compaction:${e.compaction_entry_id}`, text: `context compacted (${e.tokens_before} tokens summarised)` },
        ]);
        break;
      case "provider_failover":
        add([failoverItem(item_id, e)]);
        break;
      case "turn_end":
      case "agent_end":
        historyDirty++;
        break;
      default:
        break;
    }
  }
  return { ...view, live, streaming, calls, state, historyDirty, lastItemId, eventCount: view.eventCount + applied };
}

/** A state read directly (`turn::get_state`), e.g. on opening a session that is parked. */
export function withState(view: SessionView, state: TurnStateView | null): SessionView {
  if (!state) return { ...view, state };
  const calls = markAwaiting(view.calls, state.awaiting_approval);
  let live = view.live;
  for (const a of state.awaiting_approval ?? [])
    if (!view.history.some((i) => i.kind === "call" && i.id === a.function_call_id)) live = ensureCall(live, a.function_call_id);
  return { ...view, state, calls, live };
}

/** Approvals resolved elsewhere leave the awaiting state: a call still marked so but no longer in
 * the state's list goes back to "running" until its end event arrives. */
export function visibleCalls(view: SessionView): Record<string, CallView> {
  const waiting = new Set((view.state?.awaiting_approval ?? []).map((a) => a.function_call_id));
  const out: Record<string, CallView> = {};
  for (const [id, c] of Object.entries(view.calls)) out[id] = c.status === "awaiting" && !waiting.has(id) ? { ...c, status: "running" } : c;
  return out;
}

/** History then the live items it does not hold. */
export function itemsToShow(view: SessionView): Item[] {
  const keys = new Set(view.history.map((i) => i.key));
  return [...view.history, ...view.live.filter((i) => !keys.has(i.key))];
}

export const RUNNING_STATES = new Set([
  "provisioning",
  "assistant_streaming",
  "function_execute",
  "function_awaiting_approval",
  "steering_check",
]);
export const isRunning = (s: TurnStateView | null | undefined): boolean => !!s && RUNNING_STATES.has(s.state);

export { textOfBlocks };
